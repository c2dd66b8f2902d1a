"""The ``hf-ext`` command: ``env`` (versions and devices), ``list`` (recipes), ``run`` (a recipe)."""

import argparse
import ast
import importlib.metadata
import importlib.resources
import platform
import subprocess
import sys
from pathlib import Path

_PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "triton")
ACCELERATE_CONFIGS = ("cpu", "cpu_2proc")


def recipes_dir() -> Path:
    return Path(str(importlib.resources.files("hf_ext.recipes")))


def available_recipes() -> dict[str, str]:
    """Recipe name -> first line of its docstring (read without importing the script)."""
    recipes = {}
    for script in sorted(recipes_dir().glob("*.py")):
        if script.name.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        recipes[script.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return recipes


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def env_report() -> dict[str, str]:
    """Versions of the stack, whether CUDA is available and whether Triton kernels will run."""
    import torch

    from hf_ext.kernels import triton_available

    report = {"python": platform.python_version()}
    report.update({package: _version(package) for package in _PACKAGES})
    cuda = torch.cuda.is_available()
    report["cuda available"] = str(cuda)
    report["triton kernels"] = "yes" if cuda and triton_available() else "no (torch reference kernels)"
    return report


def overrides_to_flags(overrides: list[str]) -> list[str]:
    """``["lr=1e-4", "seeds=0 1"]`` -> ``["--lr", "1e-4", "--seeds", "0", "1"]``.

    A value with spaces gives the flag several values, which is how list fields are set.
    """
    flags = []
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key or key.startswith("-"):
            raise ValueError(f"overrides must look like key=value, got {override!r}")
        flags += [f"--{key}", *value.split()]
    return flags


def _resolve_accelerate_config(name_or_path: str | None) -> str | None:
    if name_or_path is None:
        import torch

        name_or_path = None if torch.cuda.is_available() else "cpu"
    if name_or_path is None or Path(name_or_path).is_file():
        return name_or_path
    if name_or_path not in ACCELERATE_CONFIGS:
        raise ValueError(
            f"--accelerate-config must be a file or one of {list(ACCELERATE_CONFIGS)}, got {name_or_path!r}"
        )
    return str(recipes_dir() / "accelerate" / f"{name_or_path}.yaml")


def launch_command(
    recipe: str, config: str | None, overrides: list[str], accelerate_config: str | None = None
) -> list[str]:
    """The ``accelerate launch`` command line that runs ``recipe``."""
    recipes = available_recipes()
    if recipe not in recipes:
        raise ValueError(f"unknown recipe {recipe!r}; available: {sorted(recipes)}")
    shipped = recipes_dir() / "configs" / f"{config or recipe}.yaml"
    if config is None:
        config = str(shipped) if shipped.is_file() else None
    elif not Path(config).is_file():
        if not shipped.is_file():
            raise ValueError(f"--config: no such file or shipped config {config!r}")
        config = str(shipped)
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    resolved = _resolve_accelerate_config(accelerate_config)
    if resolved is not None:
        command += ["--config_file", resolved]
    command.append(str(recipes_dir() / f"{recipe}.py"))
    if config is not None:
        command += ["--config", config]
    return command + overrides_to_flags(overrides)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-ext", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env", help="print versions, CUDA availability and the kernel backend")
    commands.add_parser("list", help="list recipes with a one-line description")
    run = commands.add_parser("run", help="run a recipe through `accelerate launch`")
    run.add_argument("recipe", help="recipe name, see `hf-ext list`")
    run.add_argument("overrides", nargs="*", help="key=value settings that override the config file")
    run.add_argument("--config", help="YAML file, or the name of one in recipes/configs/ (default: the recipe's own)")
    run.add_argument(
        "--accelerate-config",
        help=f"accelerate config file or one of {list(ACCELERATE_CONFIGS)} "
        "(default: cpu without a GPU, accelerate's own default with one)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    # Overrides may follow options (`run NAME --config F a=1 b=2`), which argparse's greedy
    # positional matching leaves over; collect them here.
    args, leftover = parser.parse_known_args(argv)
    if leftover and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(leftover)}")
    if args.command == "env":
        for key, value in env_report().items():
            print(f"{key:16s} {value}")
        return 0
    if args.command == "list":
        for name, description in available_recipes().items():
            print(f"{name:24s} {description}")
        return 0
    try:
        overrides = args.overrides + leftover
        command = launch_command(args.recipe, args.config, overrides, args.accelerate_config)
    except ValueError as error:
        print(f"hf-ext run: {error}", file=sys.stderr)
        return 2
    print("+ " + " ".join(command), flush=True)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
