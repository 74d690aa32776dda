"""`rlplace demo`: the whole system in one command, no GPU and no cluster needed (what `make demo` runs).

It starts an embedded Ray cluster simulating two nodes of four A800s, one of two RTX 4090s and a CPU-only
node (logical GPUs), places the CartPole PPO pipeline on it with the node-group config shipped in
`rlplace.examples.cartpole_ppo`, and then does everything `rlplace run` does with it; the example also holds the
demo's node-loss options (`--kill-node`, `--spare`, `--elastic`).
"""

from __future__ import annotations

import argparse
import difflib
import pathlib

from rlplace.commands.arguments import add_profile_out_arguments, nodes_argument


def register(sub: argparse._SubParsersAction) -> None:
    from rlplace.examples.cartpole_ppo import DEMO_CONFIG, DEMO_NODES
    from rlplace.examples.cartpole_ppo.command import add_pipeline_arguments
    from rlplace.examples.cartpole_ppo.node_loss import add_node_loss_arguments

    p = sub.add_parser(
        "demo",
        help="train PPO on CartPole on an embedded simulated multi-node GPU cluster, showing where everything ran",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "--config",
        default=DEMO_CONFIG.stem,
        type=config_argument,
        metavar="NAME|FILE",
        help="a cluster config file, or the name of a shipped one (see --list-configs); default: %(default)s",
    )
    p.add_argument(
        "--nodes",
        default=DEMO_NODES,
        type=nodes_argument,
        help="the simulated cluster (COUNTxGPUS[:MODEL] groups); default: %(default)s",
    )
    p.add_argument("--list-configs", action="store_true", help="list the shipped configs and exit")
    add_pipeline_arguments(p, "the pipeline")
    add_profile_out_arguments(p)
    add_node_loss_arguments(p)  # --kill-node 1 --kill-after 5: a node lost mid-training, a hot spare takes over
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace import config
    from rlplace.examples.cartpole_ppo import CONFIGS, config_names
    from rlplace.examples.cartpole_ppo.command import check_fits, execute

    if args.list_configs:
        for name in config_names():
            print(f"{name:20} {CONFIGS / (name + '.yaml')}")
        return 0
    spec = config.load(args.config)
    check_fits(spec)  # before any cluster starts
    return execute(
        spec, simulate=args.nodes, address=None, args=args, picture_stem="demo_topology", simulate_flag="--nodes"
    )


def config_argument(text: str) -> pathlib.Path:
    """An argparse type for `--config`: a shipped config's name, or an existing file; else did-you-mean and the list."""
    from rlplace.examples.cartpole_ppo import CONFIGS, config_names

    names = config_names()
    if text in names:
        return CONFIGS / f"{text}.yaml"
    path = pathlib.Path(text)
    if path.is_file():
        return path
    close = difflib.get_close_matches(path.stem, names, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a shipped config nor a file{guess}. Shipped configs: {', '.join(names)} "
        "(`rlplace demo --list-configs` shows their paths)"
    )
