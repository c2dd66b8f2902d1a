"""The ``hf-ext`` command: ``env`` (versions and devices), ``list`` (recipes), ``run`` (a recipe)."""

import argparse
import ast
import contextlib
import ctypes
import dataclasses
import difflib
import enum
import importlib.util
import io
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import typing
from pathlib import Path

import yaml

from hf_ext._cache import cached_text, installed_version, source_stamp
from hf_ext._checks import check_count
from hf_ext.recipes import (
    available_recipes,
    load_recipe,
    recipe_docstring,
    recipe_parser,
    recipe_script,
    recipes_dir,
    shipped_config,
    shipped_configs,
)

_PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "triton")
ACCELERATE_CONFIGS = ("cpu", "cpu_2proc", "fsdp2_cpu_2proc", "fsdp2_gpu")
_RUN_USAGE = "hf-ext run RECIPE [key=value ...] [--config FILE] [--accelerate-config NAME] [-h]"
# --quiet: a recipe that fails says why itself (a refused resume in one line); accelerate's CalledProcessError
# traceback around it, repeating the recipe's stderr, would bury that line.
_ACCELERATE_LAUNCH = (sys.executable, "-m", "accelerate.commands.launch", "--quiet")


def env_report() -> dict[str, str]:
    """Versions of the stack, whether CUDA is available and whether Triton kernels will run.

    torch (seconds to import) is asked only where it may find a GPU, see :func:`_torch_finds_no_gpu`.
    """
    report = {"python": platform.python_version()}
    report.update({package: installed_version(package) for package in _PACKAGES})
    cuda = False
    if not _torch_finds_no_gpu():
        import torch

        cuda = torch.cuda.is_available()
    report["cuda available"] = str(cuda)
    report["triton kernels"] = "yes" if cuda and _triton_available() else "no (torch reference kernels)"
    return report


def _triton_available() -> bool:
    """:func:`hf_ext.kernels.triton_available`, imported only once a GPU is found: importing it takes seconds."""
    from hf_ext.kernels import triton_available

    return triton_available()


def _torch_build() -> dict[str, object]:
    """The constants of torch's generated ``torch/version.py`` (``cuda`` and ``hip``, None in a build without them),
    read without importing torch; empty where the file is missing or unreadable."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    try:
        tree = ast.parse((Path(next(iter(spec.submodule_search_locations))) / "version.py").read_bytes())
    except (OSError, SyntaxError):
        return {}
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            constants.update({target.id: node.value.value for target in targets if isinstance(target, ast.Name)})
    return constants


def _torch_finds_no_gpu() -> bool:
    """True where ``torch.cuda.is_available()`` is certainly False, told without importing torch: a build without
    CUDA and ROCm, or a CUDA build on Linux without the NVIDIA driver (``libcuda.so.1``). False where unsure."""
    build = _torch_build()
    if not {"cuda", "hip"} <= build.keys():
        return False
    if build["cuda"] is None and build["hip"] is None:
        return True
    if build["hip"] is None and sys.platform == "linux":
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            return True
    return False


def overrides_to_flags(overrides: list[str]) -> list[str]:
    """``["lr=1e-4", "seeds=0 1"]`` -> ``["--lr", "1e-4", "--seeds", "0", "1"]``.

    A value with spaces gives the flag several values, which is how list fields are set.
    """
    flags, given = [], {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key or key.startswith("-"):
            raise ValueError(f"overrides must look like key=value, got {override!r}")
        if key in given:  # argparse would keep the last one silently
            raise ValueError(f"setting {key!r} is given twice ({given[key]}, {override}): give it once")
        given[key] = override
        flags += [f"--{key}", *value.split()]
    return flags


def read_yaml(path: Path, option: str) -> dict:
    """The ``key: value`` settings in the YAML file ``path`` (given as ``option``); a ``ValueError`` of one line
    names the file and the problem if it is not valid YAML or not a mapping."""
    try:
        settings = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ValueError(f"{option} {path}: not valid YAML ({_one_line(str(error))})") from None
    if not isinstance(settings, dict | None):
        raise ValueError(f"{option} {path}: must hold `key: value` settings, got a {type(settings).__name__}")
    return settings or {}


def resolve_config(recipe: str, config: str | None) -> Path | None:
    """The YAML file a run reads: ``config`` as a path or a shipped config's name, else the recipe's own (if any)."""
    if config is None:
        return shipped_config(recipe) if recipe in shipped_configs() else None
    if Path(config).is_file():
        return Path(config)
    if config not in shipped_configs():
        raise ValueError(f"--config: no such file or shipped config {config!r}; shipped: {shipped_configs()}")
    return shipped_config(config)


def recipe_argv(recipe: str, config: str | None, overrides: list[str]) -> list[str]:
    """The arguments the recipe's ``main`` receives: ``--config FILE`` and the overrides as flags."""
    path = resolve_config(recipe, config)
    return (["--config", str(path)] if path else []) + overrides_to_flags(overrides)


def check_accelerate_config(path: Path) -> None:
    """Refuse, in one line, an accelerate config of the user's that ``accelerate launch`` would refuse in a
    traceback: its ``distributed_type`` picks the launcher here, and accelerate's own loader checks the rest."""
    from accelerate.commands.config.config_args import load_config_from_file  # imports torch: a user's file only
    from accelerate.utils import DistributedType

    kinds = [kind.value for kind in DistributedType]
    settings = read_yaml(path, "--accelerate-config")
    kind = settings.get("distributed_type", DistributedType.NO.value)
    if kind not in kinds:
        raise ValueError(f"--accelerate-config {path}: `distributed_type` must be one of {kinds}, got {kind!r}")
    try:  # the launcher reads it as an int: "zero" failed there naming no setting
        check_count(f"--accelerate-config {path}", "num_processes", settings.get("num_processes", 1), least=1)
    except TypeError as error:  # the command's one-line errors are ValueErrors
        raise ValueError(str(error)) from None
    try:
        load_config_from_file(str(path))
    except (TypeError, ValueError) as error:
        raise ValueError(f"--accelerate-config {path}: {_one_line(str(error))}") from None


def _resolve_accelerate_config(name_or_path: str | None) -> str | None:
    if name_or_path is None:
        import torch

        name_or_path = None if torch.cuda.is_available() else "cpu"
    if name_or_path is not None and Path(name_or_path).is_file():
        check_accelerate_config(Path(name_or_path))
    if name_or_path is None or Path(name_or_path).is_file():
        return name_or_path
    if name_or_path not in ACCELERATE_CONFIGS:
        raise ValueError(
            f"--accelerate-config must be a file or one of {list(ACCELERATE_CONFIGS)}, got {name_or_path!r}"
        )
    return str(recipes_dir() / "accelerate" / f"{name_or_path}.yaml")


def _launcher(accelerate_config: str | None) -> list[str]:
    """``accelerate launch`` with the config, or ``torchrun`` for several processes on one machine's CPU.

    accelerate 1.16 starts a MULTI_CPU config's processes only through mpirun; without it, it runs
    a single process. torchrun starts them, and ``ACCELERATE_USE_CPU`` makes accelerate (and the
    Trainer) join them over gloo as that config would. An FSDP config on CPU (which accelerate would
    start as unjoined processes) gets the settings ``accelerate launch`` would give and runs through
    ``python -m hf_ext.distributed``, with which accelerate shards on CPU as on GPUs. torchrun runs as
    ``python -m hf_ext._torchrun``, which ends a failed launch with the failed rank's status and words only.
    """
    if accelerate_config is None:
        return list(_ACCELERATE_LAUNCH)
    settings = read_yaml(Path(accelerate_config), "--accelerate-config")
    processes = int(settings.get("num_processes", 1))
    kind = settings.get("distributed_type")
    on_cpu = kind == "MULTI_CPU" or (kind == "FSDP" and settings.get("use_cpu", False))
    if on_cpu and settings.get("num_machines", 1) == 1 and processes > 1:
        port = settings.get("main_process_port", 29500)
        torchrun = [sys.executable, "-m", "hf_ext._torchrun", f"--nproc_per_node={processes}"]
        torchrun.append(f"--master_port={port}")
        if kind == "MULTI_CPU":
            return ["env", "ACCELERATE_USE_CPU=true", *torchrun]
        from hf_ext.distributed import fsdp_launch_env  # imports torch: only for a launch

        variables = [f"{key}={value}" for key, value in fsdp_launch_env(accelerate_config).items()]
        return ["env", *variables, *torchrun, "-m", "hf_ext.distributed"]
    return [*_ACCELERATE_LAUNCH, "--config_file", accelerate_config, *_cpu_threads(settings, processes)]


def _cpu_threads(settings: dict, processes: int) -> list[str]:
    """accelerate's own thread count for a CPU run, passed explicitly: left to accelerate, it comes with a warning
    on stderr (where a refused resume must be the only line) whenever ``OMP_NUM_THREADS`` is unset."""
    if not settings.get("use_cpu", False) or "OMP_NUM_THREADS" in os.environ:
        return []
    import psutil  # accelerate's dependency, as in its launcher

    threads = (psutil.cpu_count(logical=False) or 1) // max(processes // settings.get("num_machines", 1), 1)
    return ["--num_cpu_threads_per_process", str(max(threads, 1))]


def launch_command(
    recipe: str, config: str | None, overrides: list[str], accelerate_config: str | None = None
) -> list[str]:
    """The command line that runs ``recipe``: ``accelerate launch``, or ``torchrun`` (see :func:`_launcher`)."""
    script = recipe_script(recipe)
    launcher = _launcher(_resolve_accelerate_config(accelerate_config))
    return [*launcher, str(script), *recipe_argv(recipe, config, overrides)]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _settings(dataclass_type: type) -> list[dataclasses.Field]:
    """The fields of a recipe's dataclass that its parser takes as settings (as HfArgumentParser does)."""
    return [field for field in dataclasses.fields(dataclass_type) if field.init]


def _unknown_settings_message(leftover: list[str], known: list[str], recipe: str) -> str:
    keys = [item[2:] for item in leftover if item.startswith("--")]
    if not keys:
        return f"unexpected values {leftover}: only list settings take several values"
    parts = []
    for key in keys:
        matches = difflib.get_close_matches(key, known, n=3)
        hint = f"close matches: {', '.join(matches)}" if matches else f"see `hf-ext run {recipe} --help`"
        parts.append(f"unknown setting {key!r}; {hint}")
    return "; ".join(parts)


def _settings_taken(recipe: str, argv: list[str]) -> dict[str, list[str]]:
    """The settings recipe's parser takes for ``argv``, and those whose values choose that parser's dataclasses
    (the recipe's ``PARSER_FOLLOWS``: dpo_regularized's ``algorithm``)."""
    module = load_recipe(recipe)
    settings = [field.name for dtype in module.parser(argv).dataclass_types for field in _settings(dtype)]
    return {"settings": settings, "follows": list(getattr(module, "PARSER_FOLLOWS", ()))}


def known_settings(recipe: str, config: str | None, overrides: list[str]) -> dict[str, list[str]]:
    """:func:`_settings_taken` for a run, cached as a help page is: once cached, no recipe is imported."""
    path = resolve_config(recipe, config)
    key = [_stamp(), recipe, str(path), path.read_bytes() if path else b"", *overrides]
    argv = recipe_argv(recipe, config, overrides)
    return json.loads(cached_text("recipe_settings", key, lambda: json.dumps(_settings_taken(recipe, argv))))


def check_known_settings(recipe: str, config: str | None, overrides: list[str]) -> None:
    """Refuse a malformed or repeated override, or a key of the overrides or the config file that the recipe does
    not take (with its close matches), in one line and from the cached list of its settings: a misspelled key took
    8-80 s of imports to refuse."""
    overrides_to_flags(overrides)
    path = resolve_config(recipe, config)
    keys = [key for key in (read_yaml(path, "--config") if path else {}) if key != "env"]  # TrlParser's own key
    keys += [override.partition("=")[0] for override in overrides]
    known = known_settings(recipe, config, [])
    if follows := [override for override in overrides if override.partition("=")[0] in known["follows"]]:
        known = known_settings(recipe, config, follows)
    if unknown := [key for key in keys if key not in known["settings"]]:
        raise ValueError(_unknown_settings_message([f"--{key}" for key in unknown], known["settings"], recipe))


def check_writable(output_dir: str) -> None:
    """Refuse an ``output_dir`` that cannot be made or written to, before the run spends its time."""
    path = Path(output_dir).resolve()
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir() or not _can_write_in(existing):
        raise ValueError(f"output_dir: cannot write to {output_dir!r}: {existing} is not a writable folder")


def _can_write_in(folder: Path) -> bool:
    """Whether a folder can be made (and removed) in ``folder``: permission bits do not tell for root, /proc or a
    read-only mount, where the run failed once done, in a traceback."""
    try:
        tempfile.TemporaryDirectory(dir=folder).cleanup()
    except OSError:
        return False
    return True


def check_settings(recipe: str, argv: list[str]) -> None:
    """Parse ``argv`` as the recipe's ``main`` will, here: a ``ValueError`` of one line if it would fail.

    An unknown key (with its close matches), a value of the wrong type or one a dataclass refuses, or an
    ``output_dir`` that cannot be written to is reported before ``accelerate launch`` spends seconds starting a
    run that fails.
    """
    argparse_output = io.StringIO()
    try:
        with contextlib.redirect_stderr(argparse_output):
            parser = recipe_parser(recipe, argv)
            *parsed, leftover = parser.parse_args_and_config(argv, return_remaining_strings=True)
    except SystemExit:  # argparse printed its usage, then `PROG: error: MESSAGE`
        raise ValueError(argparse_output.getvalue().strip().splitlines()[-1].partition("error: ")[2]) from None
    except (TypeError, ValueError) as error:
        raise ValueError(_one_line(str(error))) from None
    if leftover:
        known = [field.name for dtype in parser.dataclass_types for field in _settings(dtype)]
        raise ValueError(_unknown_settings_message(leftover, known, recipe))
    for output_dir in {config.output_dir for config in parsed if hasattr(config, "output_dir")}:
        check_writable(output_dir)


def _type_name(annotation) -> str:
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        return annotation.__name__
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", repr(annotation))


def _default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _show(value) -> str:
    return repr(value.value if isinstance(value, enum.Enum) else value)


def _field_help(field: dataclasses.Field, configured: dict, config_name: str) -> list[str]:
    default = _default(field)
    line = f"  {field.name}: {_type_name(field.type)}"
    if field.name in configured and (default is dataclasses.MISSING or configured[field.name] != default):
        shown_default = "required" if default is dataclasses.MISSING else f"default {_show(default)}"
        line += f" = {_show(configured[field.name])} (set by {config_name}; {shown_default})"
    else:
        line += " (required)" if default is dataclasses.MISSING else f" = {_show(default)}"
    text = _one_line(field.metadata.get("help", ""))
    return [line] + textwrap.wrap(text, width=100, initial_indent=" " * 6, subsequent_indent=" " * 6)


def recipe_help(recipe: str, config: str | None, overrides: list[str]) -> str:
    """``hf-ext run RECIPE --help``: what the recipe does, then every setting with its type, value and help.

    Building it imports the recipe and the training stack (5-50 s), so a page is cached until the code, the
    config or the versions of the libraries the settings come from change: asked again, it is instant.
    """
    path = resolve_config(recipe, config)
    key = [_stamp(), recipe, str(path), path.read_bytes() if path else b"", *overrides]
    return cached_text("recipe_help", key, lambda: _build_recipe_help(recipe, config, overrides, path))


def _stamp() -> str:
    """What a cached help page or list of settings is valid for: the code of hf_ext and the recipes, the libraries'
    versions."""
    return source_stamp([Path(__file__).resolve().parent, recipes_dir()])


def _build_recipe_help(recipe: str, config: str | None, overrides: list[str], path: Path | None) -> str:
    configured = read_yaml(path, "--config") if path else {}
    parser = recipe_parser(recipe, recipe_argv(recipe, config, overrides))
    summary = _one_line(recipe_docstring(recipe).split("\n\n")[0])
    where = f"; {path.name} sets the values marked so" if path else ""
    lines = [f"usage: {_RUN_USAGE.replace('RECIPE', recipe)}", "", summary, "", f"settings (key=value{where}):"]
    for dtype in parser.dataclass_types:
        lines += ["", f"{dtype.__name__}:"]
        for field in _settings(dtype):
            lines += _field_help(field, configured, path.name if path else "")
    return "\n".join(lines)


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The ``hf-ext`` parser and its ``run`` sub-parser (whose ``--help`` depends on the recipe)."""
    parser = argparse.ArgumentParser(prog="hf-ext", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env", help="print versions, CUDA availability and the kernel backend")
    commands.add_parser("list", help="list recipes with a one-line description")
    run = commands.add_parser(
        "run", help="run a recipe through `accelerate launch`", usage=_RUN_USAGE, add_help=False
    )
    run.add_argument("recipe", nargs="?", help="recipe name, see `hf-ext list`")
    run.add_argument("overrides", nargs="*", help="key=value settings that override the config file")
    run.add_argument("--config", help="YAML file, or the name of one in recipes/configs/ (default: the recipe's own)")
    run.add_argument(
        "--accelerate-config",
        help=f"accelerate config file or one of {list(ACCELERATE_CONFIGS)} "
        "(default: cpu without a GPU, accelerate's own default with one)",
    )
    run.add_argument(
        "-h", "--help", action="store_true", help="show this help, or with RECIPE the recipe's settings, and exit"
    )
    return parser, run


def _run(args: argparse.Namespace, overrides: list[str], run_parser: argparse.ArgumentParser) -> int:
    if args.recipe is None:
        if args.help:
            run_parser.print_help()
            return 0
        run_parser.error("the following arguments are required: recipe")
    try:
        if args.help:
            print(recipe_help(args.recipe, args.config, overrides))
            return 0
        check_known_settings(args.recipe, args.config, overrides)
        command = launch_command(args.recipe, args.config, overrides, args.accelerate_config)
        check_settings(args.recipe, recipe_argv(args.recipe, args.config, overrides))
    except ValueError as error:
        print(f"hf-ext run {args.recipe}: {error}", file=sys.stderr)
        return 2
    print("+ " + " ".join(command), flush=True)
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    parser, run_parser = _parser()
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
    return _run(args, args.overrides + leftover, run_parser)


if __name__ == "__main__":
    sys.exit(main())
