"""`rlplace run CONFIG`: the CartPole PPO pipeline placed by CONFIG, on a cluster, end to end.

On an existing cluster (`--address`, or one this machine is already part of) or on an embedded simulated
one (`--simulate 3x2,1x0`); the pipeline itself and its report are the example's
(`rlplace.examples.cartpole_ppo.command`).
"""

from __future__ import annotations

import argparse

from rlplace.commands.arguments import nodes_argument


def register(sub: argparse._SubParsersAction) -> None:
    from rlplace.examples.cartpole_ppo.command import add_pipeline_arguments

    p = sub.add_parser(
        "run",
        help="run the CartPole PPO pipeline with a cluster config (embedded simulated cluster or existing one)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("config", help="cluster config YAML (either dialect), e.g. one of `rlplace demo --list-configs`")
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides, e.g. cluster.train_worker_num=2")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--simulate",
        metavar="NODES",
        type=nodes_argument,
        help="start an embedded cluster of these nodes (COUNTxGPUS groups in node-rank order, e.g. 2x4 or 3x2,1x0)",
    )
    where.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="Ray address of an existing cluster (default: $RAY_ADDRESS, else the cluster started on this machine)",
    )
    add_pipeline_arguments(p, "the bundled CartPole pipeline")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace import config
    from rlplace.examples.cartpole_ppo.command import check_fits, execute

    spec = config.load(args.config, overrides=args.overrides)  # errors before any cluster starts
    check_fits(spec)  # so is a config that cannot run this pipeline
    return execute(spec, simulate=args.simulate, address=args.address, args=args, picture_stem="topology")
