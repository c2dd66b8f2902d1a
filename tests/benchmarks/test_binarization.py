"""benchmarks/binarization.py: a run killed between cells resumes from the cells it logged, in a new process."""

import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "binarization.py"


@pytest.mark.slow  # three processes, each distilling a tiny model with the Trainer
def test_a_run_sigkilled_after_a_cell_and_resumed_in_a_new_process_ends_as_the_uninterrupted_one(
    tmp_path, resume_check
):
    tiny = ["--model", "tiny", "--seeds", "0", "--budgets", "2", "4", "--variants", "step0_binary", "progressive"]
    tiny += ["--workers", "1", "--max-files", "4", "--eval-blocks", "2", "--block-size", "16"]
    cells = "binarization_cells.jsonl"
    outputs = resume_check.assert_resumes_identically(
        lambda folder: [sys.executable, str(SCRIPT), *tiny, "--output-dir", str(folder)],
        lambda folder: resume_check.lines(folder / cells) >= 2,  # step0_binary's run, logged at both budgets
        tmp_path,
        ignored_keys={cells: {"seconds"}, "binarization.json": {"seconds", "wall_seconds"}},
    )
    assert len(outputs[cells].splitlines()) == 2 + 2 + 3  # step0 and progressive at 2 and 4 steps, 3 untrained
