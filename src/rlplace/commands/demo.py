"""`rlplace demo`: the whole system in one command, no GPU and no cluster needed (what `make demo` runs).

It starts an embedded Ray cluster simulating three nodes with two logical GPUs each and one CPU-only
node, places the CartPole PPO pipeline on it with the node-group config shipped in
`rlplace.examples.cartpole_ppo`, and then does everything `rlplace run` does.
"""

from __future__ import annotations

import argparse

from rlplace.commands.run import add_budget_arguments, execute


def register(sub: argparse._SubParsersAction) -> None:
    from rlplace.examples.cartpole_ppo import DEMO_CONFIG, DEMO_NODES

    p = sub.add_parser(
        "demo",
        help="train PPO on CartPole on an embedded simulated multi-node GPU cluster, showing where everything ran",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "--config",
        default=DEMO_CONFIG.stem,
        help="a cluster config, or the name of a shipped one (see --list-configs); default: %(default)s",
    )
    p.add_argument(
        "--nodes", default=DEMO_NODES, help="the simulated cluster (COUNTxGPUS groups); default: %(default)s"
    )
    p.add_argument("--list-configs", action="store_true", help="list the shipped configs and exit")
    add_budget_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace.examples.cartpole_ppo import CONFIGS, config_names

    if args.list_configs:
        for name in config_names():
            print(f"{name:20} {CONFIGS / (name + '.yaml')}")
        return 0
    config = CONFIGS / f"{args.config}.yaml" if args.config in config_names() else args.config
    return execute(config, simulate=args.nodes, address=None, args=args, picture_stem="demo_topology")
