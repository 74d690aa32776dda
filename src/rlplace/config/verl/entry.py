"""A verl entry point (`verl.trainer.main_ppo`) -> the config file it composes, without importing verl.

verl users launch `python3 -m verl.trainer.main_ppo OVERRIDES`, from the root of verl's checkout or with verl
installed; `rlplace plan verl.trainer.main_ppo OVERRIDES --nodes 2x8` reads the same config. The module is found
as `python -m` finds it: in `./verl` when the current folder holds the package (the checkout's root: `python -m`
puts it first on the path), else on `sys.path` (an installed verl), each located as a folder
(`search_path.package_folder`), so no verl code runs (importing verl needs torch and a GPU stack). The config is
what the module's `@hydra.main(config_path=..., config_name=...)` names, read from its source with `ast`;
`--config-path` / `--config-name` replace them as they do on verl's command line (a relative path is relative to
the module's folder, as Hydra reads it).

Only verl's RL trainers are taken as entry modules: verl's other entry points compose the same trainer config
(`verl.trainer.main_generation_server` composes `ppo_trainer`) but place their workers their own way, so planning
them as a trainer would show a placement verl never makes. Such a module is refused (a config file passed as
FILE is planned as the trainer its keys name).
"""

from __future__ import annotations

import ast
import os
import pathlib
import re

from rlplace.config.search_path import package_folder
from rlplace.config.verl.layout import FULLY_ASYNC, MAIN_PPO, ONE_STEP_OFF
from rlplace.errors import ConfigError, Problem

_MODULE = re.compile(r"^verl(\.[A-Za-z_]\w*)+$")
#: The entry modules whose placement rlplace reads (config/verl/layout.py).
TRAINERS = (MAIN_PPO, ONE_STEP_OFF, FULLY_ASYNC)


def is_entry(name: str) -> bool:
    """`verl.trainer.main_ppo` and the like: a dotted module of the verl package that is not a file here."""
    return bool(_MODULE.match(name)) and not os.path.exists(name)


def config_file(module: str, config_name: str | None = None, config_path: str | None = None) -> pathlib.Path:
    """The config file `python -m MODULE [--config-path P] [--config-name N]` composes."""
    source = _module_file(module)
    if module not in TRAINERS:
        raise ConfigError(
            Problem(
                "",
                f"{module} is not one of the verl RL trainers whose placement rlplace reads ({', '.join(TRAINERS)}): "
                "its workers are not placed as a trainer's are, so rlplace does not plan it (a config file passed "
                "as FILE is planned as the trainer its keys name)",
                file=source,
            )
        )
    path, name = _hydra_main(source, module)
    folder = pathlib.Path(source).parent / (config_path if config_path is not None else path or "")
    name = config_name or name
    if name is None:
        raise ConfigError(
            Problem("", f"{module} names no config_name in its @hydra.main; pass --config-name NAME", file=source)
        )
    file = folder / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if not file.is_file():
        raise ConfigError(
            Problem(
                "", f"{module} composes {file}, which does not exist; check --config-path/--config-name", file=source
            )
        )
    return file


def _module_file(module: str) -> str:
    """The source file of `module`, as `python -m` from this folder would find it (no code runs)."""
    top, *rest = module.split(".")
    here = os.path.join(os.curdir, top)
    folder = here if os.path.isfile(os.path.join(here, "__init__.py")) else package_folder(top)
    if folder is None:
        raise ConfigError(
            Problem(
                "",
                "no verl package found: run from the root of verl's checkout (where ./verl is), or install "
                "verl in this Python environment (rlplace finds it without importing it), or pass the config file "
                "itself (verl/trainer/config/ppo_trainer.yaml)",
                file=module,
            )
        )
    file = os.path.join(folder, *rest) + ".py"
    if not os.path.isfile(file):
        raise ConfigError(Problem("", f"no such module in the verl package at {folder} ({file})", file=module))
    return os.path.normpath(file)


def _hydra_main(source: str, module: str) -> tuple[str | None, str | None]:
    """(config_path, config_name) of the `@hydra.main(...)` in `source`, as written (literals only)."""
    try:
        tree = ast.parse(pathlib.Path(source).read_text(encoding="utf-8"), source)
    except (OSError, SyntaxError, ValueError) as e:
        raise ConfigError(Problem("", f"cannot read {module}'s source: {e}", file=source)) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _is_hydra_main(deco.func):
                    found = {k.arg: k.value.value for k in deco.keywords if isinstance(k.value, ast.Constant)}
                    path, name = found.get("config_path"), found.get("config_name")
                    return (path if isinstance(path, str) else None, name if isinstance(name, str) else None)
    raise ConfigError(Problem("", f"{module} has no @hydra.main entry point: it is not a verl trainer", file=source))


def _is_hydra_main(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "main"
        and isinstance(func.value, ast.Name)
        and func.value.id == "hydra"
    )
