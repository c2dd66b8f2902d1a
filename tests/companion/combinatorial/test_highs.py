"""The one module that talks to HiGHS: loaded on first use, and both solvers share its process-wide scheduler."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("highspy")

from hf_ext.companion.combinatorial.cam import erdos_renyi  # noqa: E402
from hf_ext.companion.combinatorial.set_cover.instance import beasley  # noqa: E402
from hf_ext.companion.combinatorial.set_cover.mip import solve_mip  # noqa: E402
from hf_ext.companion.evaluation.combinatorial.cam import exact_mis  # noqa: E402


def test_solves_with_different_thread_counts_in_one_process_all_find_solutions():
    instance = beasley(8, 12, 0.25, cost_range=(1, 9), seed=1)
    graph = erdos_renyi(12, 0.3, 0)
    objectives = []
    for threads in (2, 1, 2):
        independent, optimal = exact_mis(graph, time_limit=10)
        assert optimal and independent.any()
        objectives.append(solve_mip(instance.costs, instance.matrix, time_limit=10.0, threads=threads).objective)
    assert np.isfinite(objectives).all() and len(set(objectives)) == 1


def test_a_node_limit_reaches_highs_and_is_left_at_its_default_otherwise():
    from hf_ext.companion.combinatorial._highs import _model

    def nodes(model):
        return model.getOptionValue("mip_max_nodes")[1]  # (status, value)

    default = nodes(_model(1.0, 1))
    assert nodes(_model(1.0, 1, node_limit=3)) == 3
    assert nodes(_model(1.0, 1, node_limit=None)) == default > 3


@pytest.mark.parametrize(
    ("packages", "blocked", "call"),
    [
        (
            ("combinatorial.cam", "evaluation.combinatorial.cam"),
            ("highspy", "scipy"),
            "exact_mis(erdos_renyi(5, 0.5, 0))",
        ),
        (("combinatorial.set_cover",), ("highspy",), "solve_mip([1.0], [[1]], time_limit=1.0)"),
    ],
)
def test_packages_load_without_highs_and_a_solve_names_the_extra(packages, blocked, call):
    """``cam`` and its references promise to need torch only, ``set_cover`` to need highspy only for its MIPs."""
    imports = "".join(f"from hf_ext.companion.{package} import *\n" for package in packages)
    script = f"import sys\nsys.modules.update(dict.fromkeys({blocked!r}))\n{imports}{call}\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    error = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "need the [combinatorial] extra: pip install 'hf-ext[combinatorial]'" in error
