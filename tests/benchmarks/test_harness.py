"""benchmarks/_harness.py: the options every benchmark shares, and peak memory read from the kernel."""

import ast
import importlib.util
import mmap
import threading
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("_harness", BENCHMARKS / "_harness.py")
harness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(harness)

# gpu_check.py runs the GPU benchmarks one after the other and writes their results to one file (`--output`).
SCRIPTS = sorted(path for path in BENCHMARKS.glob("*.py") if path.name not in ("_harness.py", "gpu_check.py"))
MIB = 1024**2


def test_the_shared_options_and_their_defaults():
    parser = harness.benchmark_parser("Says what it measures.\n\n    python benchmarks/x.py", seeds=range(3))
    args = parser.parse_args([])
    assert (args.seeds, args.output_dir) == ([0, 1, 2], "outputs/benchmarks")
    assert parser.parse_args(["--seeds", "4", "5", "--output-dir", "elsewhere"]).seeds == [4, 5]
    assert "    python benchmarks/x.py" in parser.format_help()  # the docstring's usage, as written


def test_a_benchmark_without_seeds_has_no_seeds_option():
    parser = harness.benchmark_parser("Times one thing.", output_dir="outputs/benchmarks/x")
    assert vars(parser.parse_args([])) == {"output_dir": "outputs/benchmarks/x"}


def _spike(size: int) -> None:
    """Make ``size`` bytes resident and free them again, in pages new to the process: a fresh anonymous mapping.

    Not a NumPy array: glibc serves a large request from heap space freed earlier that is still resident, and
    then the RSS does not move at all (the test failed so in a full run of the suite, its process at 1.3 GB).
    """
    with mmap.mmap(-1, size) as region:
        region[:: mmap.PAGESIZE] = b"\1" * (size // mmap.PAGESIZE)  # one byte written in every page


@pytest.fixture(params=["fresh heap", "heap holding freed memory"])
def heap(request):
    """The process as it is, or with 96 MiB freed inside its heap and still resident, as after a long run."""
    if request.param == "fresh heap":
        yield
        return
    blocks = [np.ones(96 * 1024 // 8) for _ in range(1024)]  # 96 KiB each: below glibc's mmap threshold, in the heap
    top = np.ones(96 * 1024 // 8)  # keeps the freed blocks inside the heap, where free() cannot trim them
    del blocks
    yield
    del top


def test_the_peak_includes_memory_freed_before_the_context_closes(heap):
    with harness.PeakRSS() as peak:
        _spike(64 * MIB)
    assert peak.peak - peak.start >= 60 * MIB
    assert harness.current_rss() < peak.start + 32 * MIB  # the spike is gone, the mark kept it


def test_the_peak_is_read_from_the_kernel_without_a_sampling_thread():
    """Issue 38: a thread sampled the RSS every millisecond beside the measured code."""
    threads = threading.active_count()
    with harness.PeakRSS() as peak:
        assert threading.active_count() == threads
    assert peak.peak >= peak.start > 0


def test_a_new_context_forgets_an_earlier_peak():
    with harness.PeakRSS():
        _spike(64 * MIB)
    with harness.PeakRSS() as peak:
        pass
    assert peak.peak - peak.start < 32 * MIB


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_every_benchmark_parses_its_options_with_the_shared_parser(script):
    source = script.read_text(encoding="utf-8")
    assert "benchmark_parser(__doc__" in source and "ArgumentParser(" not in source


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_every_benchmark_imports_only_public_names_of_hf_ext(script):
    """A benchmark runs a recipe through its `main`, and otherwise uses the library's public names."""
    for module, names in _imports(script):
        if module != "hf_ext" and not module.startswith("hf_ext."):
            continue
        if module == "hf_ext.recipes._plotting":
            continue  # the method display names recipes and benchmarks share, kept out of the core (issue 74)
        assert not any(part.startswith("_") for part in module.split(".")), module
        assert not any(name.startswith("_") for name in names), (module, names)
        assert module != "hf_ext.cli"
        if module.startswith("hf_ext.recipes."):
            assert names == ["main"], f"{script.name} imports {names} from the recipe {module}"
