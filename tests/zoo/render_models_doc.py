"""Write docs/models.md from the zoo's matrix: ``python tests/zoo/render_models_doc.py``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from zoo_architectures import ARCHITECTURES  # noqa: E402
from zoo_matrix import method_checks  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
INTRO = """# Supported models

Every method of hf-ext on tiny random models of each architecture below (built offline from the
architecture's transformers config; `tests/zoo/zoo_architectures.py`). A cell is **yes** when the method's
result on that model equals its result on an equivalent the method already handles (the column *checked
against*), and otherwise names the refusal the method raises before any work. `tests/zoo/test_zoo.py` runs
every cell, and this page is written from the same entries (`python tests/zoo/render_models_doc.py`), so the
two cannot disagree.

On real checkpoints, `pytest -m slow tests/zoo/test_real_checkpoints.py` (about 6 minutes on 2 CPU cores) runs
each method once on SmolLM2-135M-Instruct and on all-MiniLM-L6-v2 with a fresh 4-class head: every optimizer
groups the parameters by role and lowers a held-out loss in 3-5 steps, leaving frozen weights untouched; AGZO and
MeZO move only their target projections; a packed binarized model computes what the binarized one does; the
plasticity metrics match QK norms computed by hand from the checkpoint's own projections.
"""


def render() -> str:
    checks = method_checks()
    header = "| method | entry point | " + " | ".join(ARCHITECTURES) + " |"
    rule = "|" + "---|" * (len(ARCHITECTURES) + 2)
    rows = []
    for entry in checks:
        marks = ["refused" if a in entry.refused else "yes" for a in ARCHITECTURES]
        rows.append(f"| {entry.method} | `{entry.entry_point}` | " + " | ".join(marks) + " |")
    proofs = ["", "## What each method is checked against", ""]
    proofs += [f"- **{entry.method}**: {entry.proves}" for entry in checks]
    refusals = ["", "## Refusals", ""]
    refusals += [
        f"- **{entry.method}** on `{architecture}`: {reason}"
        for entry in checks
        for architecture, reason in entry.refused.items()
    ]
    if len(refusals) == 3:
        refusals.append("None.")
    return "\n".join([INTRO, header, rule, *rows, *proofs, *refusals]) + "\n"


if __name__ == "__main__":
    DOC.write_text(render())
    print(f"wrote {DOC}")
