"""KaMIS's ReduMIS (reductions + evolutionary local search, C++) as an outside MIS reference, run as its binary.

Why a binary and not a port: KaMIS is the reference the paper reports on ER-700-800, and a rewrite would be our
algorithm, not theirs. Build it from its repository (``cmake`` and ``make redumis``) and pass the binary's path.
"""

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from hf_ext.companion.combinatorial.cam import Graph

# redumis's clock starts after it has read the graph: a run is stopped only this long after its time limit
READ_MARGIN_SECONDS = 60.0


def write_metis(graph: Graph, path: Path) -> None:
    """The METIS graph format KaMIS reads: ``n m``, then each node's neighbours, 1-based and sorted, a line each."""
    neighbours = graph.neighbours()
    lines = [f"{graph.num_nodes} {len(graph.edges)}"]
    lines += [" ".join(str(j + 1) for j in sorted(adjacent)) for adjacent in neighbours]
    path.write_text("\n".join(lines) + "\n")


def read_independent_set(graph: Graph, path: Path) -> np.ndarray:
    """The 0/1 line per node that KaMIS writes, checked to be an independent set of ``graph``."""
    chosen = np.array([int(line) for line in path.read_text().split()], dtype=bool)
    if chosen.shape != (graph.num_nodes,) or (chosen[graph.edges[:, 0]] & chosen[graph.edges[:, 1]]).any():
        raise RuntimeError(
            f"KaMIS wrote {len(chosen)} node flags for a graph of {graph.num_nodes} nodes, or a set that is not "
            "independent"
        )
    return chosen


def redumis_mis(graph: Graph, binary: str, time_limit: float, seed: int = 0) -> np.ndarray:
    """An independent set of ``graph`` found by KaMIS's ``redumis`` within ``time_limit`` seconds (its own clock,
    which starts after it has read the graph)."""
    if not Path(binary).is_file():
        raise FileNotFoundError(f"redumis_mis: `binary` must be the path of KaMIS's redumis, got {binary!r}")
    with tempfile.TemporaryDirectory() as folder:
        graph_file, set_file = Path(folder) / "graph.metis", Path(folder) / "set.txt"
        write_metis(graph, graph_file)
        command = [binary, str(graph_file), f"--output={set_file}", f"--time_limit={time_limit}", f"--seed={seed}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=time_limit + READ_MARGIN_SECONDS)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"redumis did not stop within {time_limit} s + {READ_MARGIN_SECONDS} s") from error
        if done.returncode != 0 or not set_file.exists():
            raise RuntimeError(f"redumis failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        return read_independent_set(graph, set_file)
