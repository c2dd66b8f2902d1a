"""One entry of docs/measurements.yaml measured again: ``make measure ENTRY=demo`` runs the entry's command and
prints, beside each number the entry records, the number the run printed and the line it printed it on.

An entry's ``command`` is a shell command, or a list of them run one after the other; a list inside the list (an
alias of another entry's command) is spliced in. A recorded number is found where the run printed it whole, or
printed a number that rounds to it (``0.15625`` for ``0.156``). tests/test_measurements.py reads the entries through
this module too, and finds a number in a document only where it stands whole: ``0.156`` is not in ``0.1567``.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = ROOT / "docs" / "measurements.yaml"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def load_entries(path: Path = MEASUREMENTS) -> list[dict]:
    """The entries of ``path`` (docs/measurements.yaml), in their order."""
    return yaml.safe_load(path.read_text())


def command_lines(command: str | list) -> list[str]:
    """An entry's command as the shell lines it runs, a nested list (another entry's command) spliced in."""
    if isinstance(command, str):
        return [command]
    return [line for part in command for line in command_lines(part)]


def whole(number: str) -> re.Pattern:
    """``number`` where it stands whole: no digit or point right before it, no digit, decimals or exponent after."""
    before = r"(?<![\d.])" if number[:1].isdigit() else ""
    after = r"(?!\d|\.\d|[eE][-+]?\d)" if number[-1:].isdigit() else ""
    return re.compile(before + re.escape(number) + after)


def states(text: str, number: str) -> bool:
    """Whether ``text`` states ``number`` whole (``0.156`` is not stated by ``0.1567``, ``10.156`` or ``0.156e-3``)."""
    return whole(number).search(text) is not None


def printed_as(output: str, number: str) -> tuple[str, str] | None:
    """The first number of ``output`` that is ``number`` at its precision, with the stretch of its line around it."""
    decimals = len(number.partition(".")[2]) if "e" not in number.lower() else None
    for line in output.splitlines():
        for found in NUMBER.finditer(line):
            text = found.group()
            if text == number or (decimals is not None and f"{float(text):.{decimals}f}" == number.lstrip("+")):
                return text, line[max(found.start() - 60, 0) : found.end() + 20].strip()
    return None


def beside(numbers: list[str], output: str) -> list[str]:
    """One line per number of ``numbers`` (each a recorded string, several numbers in some): what ``output`` printed."""
    rows = []
    for recorded in numbers:
        if states(output, recorded):
            rows.append(f"{recorded}\n    printed as recorded")
            continue
        rows.append(recorded)
        for number in NUMBER.findall(recorded):
            match = printed_as(output, number)
            rows.append(f"    {number}: " + (f"{match[0]}  (... {match[1]} ...)" if match else "not printed"))
    return rows


def measure(entry: dict) -> int:
    """Run ``entry``'s command from the repository root (its programs from this interpreter's environment first),
    echo its output, then print the recorded numbers beside the printed ones; the command's exit status."""
    lines = command_lines(entry["command"])
    print("\n".join(f"$ {line}" for line in lines), flush=True)
    environment = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.Popen(
        ["bash", "-e", "-c", "\n".join(lines)],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = []
    for line in run.stdout:
        sys.stdout.write(line)
        output.append(line)
    status = run.wait()
    print(f"\n{entry['name']}: recorded (stated in {', '.join(entry['stated_in'])}) and printed")
    print("\n".join(beside(entry["numbers"], "".join(output))))
    if "measured_at" in entry:
        print(f"recorded on commit {entry['measured_at']}")
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("entry", help="the entry's name in docs/measurements.yaml")
    args = parser.parse_args()
    entries = {entry["name"]: entry for entry in load_entries()}
    if args.entry not in entries:
        parser.error(f"no entry {args.entry!r} in {MEASUREMENTS.relative_to(ROOT)}; one of {sorted(entries)}")
    return measure(entries[args.entry])


if __name__ == "__main__":
    sys.exit(main())
