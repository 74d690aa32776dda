"""`rlplace run CONFIG [OVERRIDE ...] [--simulate NODES | --address A] [-- COMMAND ...]`: run on the plan.

With `-- COMMAND` (`-- python train.py --lr 3e-4`) your command runs as the job's driver: inside it,
`rlplace.connect()` with no argument runs the plan shown here, on this cluster. Without it, the bundled CartPole
PPO pipeline runs, for a config that plans its components. Either way on an embedded simulated cluster
(`--simulate 2x8:A800,1x4`) or an existing one you name (`--address HOST:PORT`, `--address auto` for the one
running on this machine, or $RAY_ADDRESS; a cluster that merely runs here is not joined), and the plan is shown,
with its estimate line and picture, before anything starts.

The command's part is `rlplace.commands.driver`; the pipeline's is the example's,
`rlplace.examples.cartpole_ppo.command`.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex

from rlplace.commands.arguments import add_profile_out_arguments, nodes_argument
from rlplace.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    from rlplace.examples.cartpole_ppo.command import add_pipeline_arguments

    p = sub.add_parser(
        "run",
        help="run your command (-- python train.py) or the bundled CartPole pipeline on a config's plan, on an "
        "embedded simulated cluster or an existing one",
        description=__doc__.split("\n\n")[1],
        usage="rlplace run [-h] CONFIG [OVERRIDE ...] [--simulate NODES | --address HOST:PORT] [options] "
        "[-- COMMAND ...]",
        epilog="After `--`: the command to run as the job's driver (-- python train.py --lr 3e-4). It gets "
        "RAY_ADDRESS, the cluster's token mode, RLPLACE_CONFIG, RLPLACE_OVERRIDES and RLPLACE_PLAN, so that "
        "rlplace.connect() with no argument runs the plan shown there; its stdin, stdout, stderr and exit status "
        "are run's (127: it cannot be started).",
    )
    p.add_argument("config", help="cluster config YAML (either dialect), e.g. one of `rlplace demo --list-configs`")
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides, e.g. cluster.train_worker_num=2")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--simulate",
        metavar="NODES",
        type=nodes_argument,
        help="start an embedded cluster of these nodes (COUNTxGPUS[:MODEL][/LEVEL=N...] groups in node-rank order, "
        "e.g. 2x8,1x4 or 2x4:A800,1x0; `/rack=2`: every 2 nodes a rack, labelled as `rlplace start --rack` does), "
        "stopped when the run ends",
    )
    where.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="Ray address of an existing cluster; auto: the one running on this machine (default: $RAY_ADDRESS; "
        "without either, or --simulate, run joins no cluster)",
    )
    add_pipeline_arguments(p, "the bundled CartPole pipeline (without -- COMMAND)")
    add_profile_out_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace import config
    from rlplace.examples.cartpole_ppo.command import check_fits, execute

    spec = config.load(args.config, overrides=args.overrides)  # errors before any cluster starts
    command = getattr(args, "command_line", None)
    if command is not None:
        from rlplace.commands.driver import run_command

        return run_command(args, spec, command)
    try:
        check_fits(spec)  # so is a config that cannot run this pipeline
    except ConfigError as e:
        own = shlex.join(["rlplace", "run", args.config, *args.overrides, *_where(args), "--", "python", "train.py"])
        hint = f"; or run your own script on this plan: `{own}` (docs/guide.md, section 6)"
        raise ConfigError([dataclasses.replace(p, message=p.message + hint) for p in e.problems]) from None
    return execute(spec, simulate=args.simulate, address=args.address, args=args, picture_stem="topology")


def _where(args: argparse.Namespace) -> list[str]:
    if args.simulate:
        return ["--simulate", args.simulate]
    return ["--address", args.address] if args.address else []


def forgot_dashes(args: argparse.Namespace, at: int, extra: list[str]) -> str:
    """What to say when a word that is no Hydra override (`args.overrides[at]`) follows the config: a command
    written without `--` (`rlplace run job.yaml train.py --lr 3e-4`), shown as it should be written."""
    command = [*args.overrides[at:], *extra]
    if command[0].endswith(".py"):
        command.insert(0, "python")
    fixed = shlex.join(["rlplace", "run", args.config, *args.overrides[:at], *_where(args), "--", *command])
    return (
        f"{args.overrides[at]!r} is not a Hydra override (KEY=VALUE); to run a command as the job's driver, write "
        f"it after --: {fixed}"
    )
