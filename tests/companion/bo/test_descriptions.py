from dataclasses import dataclass
from typing import ClassVar

from botorch.test_functions import Branin

from hf_ext.companion.bo.descriptions import describe


@dataclass
class _Backend:
    TRANSPORT_FIELDS: ClassVar[tuple[str, ...]] = ("timeout",)

    model: str
    timeout: float = 30.0


def test_describe_keeps_what_decides_a_run_and_leaves_out_transport():
    assert describe(Branin(negate=True, noise_std=0.1)) == {"type": "Branin", "negate": True, "noise_std": 0.1}
    assert describe(_Backend("smollm2", timeout=5.0)) == {"type": "_Backend", "model": "smollm2"}
    assert describe(len) == {"type": "len"}  # a function or a class: its name
