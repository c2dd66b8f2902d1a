"""Every method on every architecture of the zoo: the method's equivalence holds, or it is refused by name."""

import pytest
from zoo_matrix import cells


@pytest.mark.parametrize(("entry", "architecture"), cells(), ids=[f"{e.method}-{a}" for e, a in cells()])
def test_each_method_is_right_or_refused_by_name_on_each_architecture(entry, architecture):
    if architecture in entry.refused:
        with pytest.raises((ValueError, TypeError)) as refusal:
            entry.check(architecture)
        assert entry.refused[architecture] in str(refusal.value), str(refusal.value)
    else:
        entry.check(architecture)
