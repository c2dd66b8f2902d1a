import os
import stat
import sys

import numpy as np
import pytest

from hf_ext.companion.combinatorial.cam import Graph, erdos_renyi
from hf_ext.companion.evaluation.combinatorial.cam import exact_mis, kamis, redumis_mis
from hf_ext.companion.evaluation.combinatorial.cam.kamis import read_independent_set, write_metis

PATH = Graph(4, np.array([[0, 1], [1, 2], [2, 3]]))

# Stands in for KaMIS's binary: reads the METIS file it is given and writes, as redumis does, one 0/1 line per node
# (here the nodes of even index on the path 0-1-2-3, an independent set), where --output says.
FAKE_REDUMIS = """\
import sys
graph = sys.argv[1]
output = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--output="))
assert any(a.startswith("--time_limit=") for a in sys.argv) and any(a.startswith("--seed=") for a in sys.argv)
n = int(open(graph).readline().split()[0])
open(output, "w").write("".join(f"{int(i % 2 == 0)}\\n" for i in range(n)))
"""


def test_the_metis_file_lists_each_nodes_neighbours_one_based_and_sorted(tmp_path):
    write_metis(Graph(4, np.array([[2, 0], [0, 1], [1, 2]])), tmp_path / "g")
    assert (tmp_path / "g").read_text() == "4 3\n2 3\n1 3\n1 2\n\n"  # node 4 is isolated: an empty line


def test_a_set_that_is_not_independent_or_of_the_wrong_length_is_refused(tmp_path):
    (tmp_path / "s").write_text("1\n0\n1\n0\n")
    assert read_independent_set(PATH, tmp_path / "s").tolist() == [True, False, True, False]
    for text in ("1\n1\n0\n0\n", "1\n0\n1\n"):
        (tmp_path / "s").write_text(text)
        with pytest.raises(RuntimeError, match="not independent"):
            read_independent_set(PATH, tmp_path / "s")


def executable(path, source):
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_binary_gets_the_graph_and_its_set_is_read_back(tmp_path):
    binary = executable(tmp_path / "redumis", FAKE_REDUMIS)
    assert redumis_mis(PATH, binary, 1.0).tolist() == [True, False, True, False]
    with pytest.raises(FileNotFoundError, match="redumis_mis: `binary` must be the path of KaMIS's redumis"):
        redumis_mis(PATH, str(tmp_path / "missing"), 1.0)


def test_a_binary_that_does_not_stop_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(kamis, "READ_MARGIN_SECONDS", 0.5)
    binary = executable(tmp_path / "redumis", "import time\ntime.sleep(30)\n")
    with pytest.raises(RuntimeError, match="redumis did not stop within 0.1 s"):
        redumis_mis(PATH, binary, 0.1)


def test_a_failing_binary_is_an_error_with_its_message(tmp_path):
    binary = executable(tmp_path / "redumis", "import sys\nsys.exit('cannot read the graph')\n")
    with pytest.raises(RuntimeError, match="redumis failed \\(exit 1\\): cannot read the graph"):
        redumis_mis(PATH, binary, 1.0)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KAMIS_REDUMIS"), reason="KAMIS_REDUMIS names no redumis binary")
def test_kamis_finds_the_maximum_independent_set_of_a_small_er_graph():
    graph = erdos_renyi(60, 0.15, 3)
    optimum, proven = exact_mis(graph, 60.0)
    assert proven
    assert redumis_mis(graph, os.environ["KAMIS_REDUMIS"], 2.0).sum() == optimum.sum()
