"""benchmarks/recipe_parity.py: which numbers of two results.json files are compared, and how."""

import importlib.util
import math
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "recipe_parity.py"
spec = importlib.util.spec_from_file_location("recipe_parity", SCRIPT)
recipe_parity = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(SCRIPT.parent))  # it imports its sibling _harness, as a script run from benchmarks/ does
spec.loader.exec_module(recipe_parity)
sys.path.remove(str(SCRIPT.parent))  # left there, benchmarks/bo_robust.py etc. shadowed the examples' names


def test_every_number_is_found_by_its_place_but_timings_flags_and_text():
    results = {"loss": [[1, 2.5], [2, 2.0]], "train_seconds": 3.0, "step_time": 1.0, "ok": True, "model": "tiny"}
    assert recipe_parity.numbers(results | {"runs": {"a": {"acc": 0.5}}}) == {
        "/loss/0/0": 1.0,
        "/loss/0/1": 2.5,
        "/loss/1/0": 2.0,
        "/loss/1/1": 2.0,
        "/runs/a/acc": 0.5,
    }


def test_the_largest_differences_are_reported_where_they_are_and_unmatched_places_listed():
    ours = {"/a": 1.0, "/b": 100.5, "/c": math.nan, "/d": 0.0, "/only": 1.0}
    reference = {"/a": 1.0, "/b": 100.0, "/c": math.nan, "/d": 0.01, "/other": 2.0}
    found = recipe_parity.compare(ours, reference)
    assert found["max_abs"] == 0.5 and found["max_abs_at"] == "/b"
    assert found["max_rel"] == 1.0 and found["max_rel_at"] == "/d"
    assert found["compared"] == 4 and found["only_sharded"] == ["/only"] and found["only_reference"] == ["/other"]
