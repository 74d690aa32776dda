"""argparse types shared by the commands: checked at parse time, so a message names the flag as typed (numbers:
`rlplace.cli_types`, which the example pipeline's options share)."""

from __future__ import annotations

import argparse
import pathlib
import shlex
from typing import TYPE_CHECKING

from rlplace.errors import ConfigError, Problem

if TYPE_CHECKING:
    from rlplace.inventory import Inventory


def nodes_argument(text: str) -> str:
    """An argparse type for a simulated cluster (`--simulate`, `demo --nodes`): checked at parse time, so the
    message names the flag as typed."""
    declared_nodes(text)
    return text


def declared_nodes(text: str) -> Inventory:
    """An argparse type for `--nodes COUNTxGPUS,...`: the inventory, or argparse's one-line error naming the term."""
    from rlplace.inventory import parse_nodes

    try:
        return parse_nodes(text)
    except ConfigError as e:
        shown = (p.message if str(p.value) in p.message else f"{p.value!r}: {p.message}" for p in e.problems)
        raise argparse.ArgumentTypeError("; ".join(shown)) from None


def inventory_file(path: str) -> Inventory:
    """An argparse type for `--inventory FILE`: the inventory, or argparse's one-line error naming the file (a
    missing one: `FILE: no such file`), the line and the key."""
    from rlplace.inventory import load_inventory

    try:
        return load_inventory(path)
    except ConfigError as e:
        raise argparse.ArgumentTypeError("; ".join(_one_line(p) for p in e.problems)) from None


def _one_line(problem: object) -> str:
    """A problem without the `<config>` a ConfigError names when there is no file."""
    text = str(problem)
    return text.removeprefix("<config>: ")


def add_show_env_argument(p: argparse.ArgumentParser) -> None:
    """`--show-env` (`validate`, `plan`): values read from the environment are shown as written unless given."""
    p.add_argument(
        "--show-env",
        action="store_true",
        help="show the values the config reads from the environment (${oc.env:VAR}); without it they are shown "
        "as written, since such variables often hold secrets",
    )


def invoked(args: argparse.Namespace) -> str:
    """The command line as typed (`rlplace plan job.yaml --export pools.yaml`), for a file that names its writer."""
    return shlex.join(["rlplace", *getattr(args, "argv", ())])


def add_entry_arguments(p: argparse.ArgumentParser) -> None:
    """`--config-name`/`--config-path` (`validate`, `plan`), as Hydra reads them on a framework's command line: with
    a verl entry module in place of FILE (`rlplace plan verl.trainer.main_ppo --config-name ppo_megatron_trainer`)."""
    p.add_argument(
        "--config-name",
        "-cn",
        metavar="NAME",
        help="with a verl entry module as FILE: the config it composes instead of its @hydra.main's config_name",
    )
    p.add_argument(
        "--config-path",
        "-cp",
        metavar="DIR",
        help="with a verl entry module as FILE: the config folder, relative to the module's folder (as Hydra reads it)",
    )


def config_file(name: str, args: argparse.Namespace) -> pathlib.Path:
    """The config file FILE names: a path, or the config a verl entry module (`verl.trainer.main_ppo`) composes."""
    from rlplace.config.verl.entry import config_file as entry_config
    from rlplace.config.verl.entry import is_entry

    config_name, config_path = getattr(args, "config_name", None), getattr(args, "config_path", None)
    if is_entry(name):
        return entry_config(name, config_name, config_path)
    if config_name is not None or config_path is not None:
        raise ConfigError(
            Problem(
                "",
                "--config-name/--config-path apply to a verl entry module given as FILE (verl.trainer.main_ppo); "
                f"{name} is a file: pass the file you mean instead",
                file=name,
            )
        )
    return pathlib.Path(name)


def add_profile_out_arguments(p: argparse.ArgumentParser) -> None:
    """`--profile-out FILE` and `--profile-phase PHASE=COMPONENT` (`run`, with or without a command, and `demo`):
    the run's phases as a profile for `rlplace tune --profile` (planner/profile_record.py)."""
    g = p.add_argument_group("measuring a profile (docs/guide.md, 'Measuring a profile')")
    g.add_argument(
        "--profile-out",
        metavar="FILE",
        help="write what each component's phases took on this run to FILE, as the profile `rlplace tune --profile` "
        'reads (your command\'s `with job.phase("rollout")` / `job.phase("train")` blocks; the bundled pipeline\'s '
        "own)",
    )
    g.add_argument(
        "--profile-phase",
        metavar="PHASE=COMPONENT",
        type=phase_component,
        action="append",
        default=[],
        help="count a phase as this component's cost (default: a phase named like a component is its; rollout is "
        "eval's or rollout's, train is train's or actor's; sync and evaluate no component's); repeatable",
    )


def phase_component(text: str) -> tuple[str, str]:
    """An argparse type for `--profile-phase PHASE=COMPONENT`: the pair, PHASE one a job times."""
    from rlplace.planner.profile_record import PHASES

    phase, _, component = text.partition("=")
    phase, component = phase.strip(), component.strip()
    if not component:
        raise argparse.ArgumentTypeError(f"{text!r}: write PHASE=COMPONENT, e.g. rollout=eval")
    if phase not in PHASES:
        known = ", ".join(PHASES)
        raise argparse.ArgumentTypeError(f"{text!r}: unknown phase {phase!r}; the phases a job times: {known}")
    return phase, component
