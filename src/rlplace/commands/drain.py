"""`rlplace drain`: tell Ray that a node goes at a deadline, as a cloud's preemption notice or the autoscaler would.

A thin wrapper over Ray's drain (what `ray drain-node` does, by the node's rlplace rank rather than its Ray id), for
an operator taking a node away for maintenance. Ray then schedules nothing new there, and every rlplace job with
workers on it acts before the deadline: a hot spare or a free node takes them over, or elastic components shrink,
or the job says what the deadline will take (docs/guide.md, "Preemption notices"). Ray stops the node's raylet as
soon as nothing runs there; taking the machine away at the deadline is the operator's (or the cloud's) part.
"""

from __future__ import annotations

import argparse
import time

from rlplace.cli_types import positive_seconds
from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.printable import printable

REASONS = ("preemption", "maintenance")  # rlplace.ray._compat.DRAIN_REASONS, without importing Ray to parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "drain",
        help="tell Ray a node goes at a deadline: jobs move its workers to a spare or shrink first",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--node-rank",
        type=node_rank,
        required=True,
        metavar="N",
        help="the node started with `rlplace start --node-rank N`",
    )
    p.add_argument(
        "--deadline",
        type=positive_seconds,
        required=True,
        metavar="SECONDS",
        help="seconds from now until the node goes",
    )
    p.add_argument(
        "--address",
        metavar="HOST:PORT",
        default="auto",
        help="the Ray cluster's head (default: auto: $RAY_ADDRESS, else the cluster started on this machine)",
    )
    p.add_argument("--reason", choices=REASONS, default="maintenance", help="why the node goes (Ray records it)")
    p.set_defaults(func=run)


def node_rank(text: str) -> int:
    """An argparse type for `--node-rank`: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a node rank (a whole number >= 0), got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a node rank (a whole number >= 0), got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from rlplace.ray.join import join
    from rlplace.ray.ray_port import RAY

    connected_here = not RAY.connected()
    if connected_here:
        join(args.address)
    try:
        node = _ranked_node(RAY.nodes(), args.node_rank)
        deadline = time.time() + args.deadline
        try:
            RAY.drain_node(node["NodeID"], int(deadline * 1000), args.reason, "rlplace drain")
        except RuntimeError as e:
            raise RlplaceError(f"node {args.node_rank}: {e}") from None
    finally:
        if connected_here:
            RAY.disconnect()
    clock = time.strftime("%H:%M:%S", time.localtime(deadline))
    print(
        printable(
            f"node {args.node_rank} ({node.get('NodeManagerAddress', '?')}, id {node['NodeID'][:8]}) drains by {clock} "
            f"(in {args.deadline:g} s, {args.reason}): Ray schedules nothing new there, and rlplace jobs move its "
            "workers to a spare or shrink before then; `rlplace status` shows it DRAINING until it goes"
        )
    )
    return 0


def _ranked_node(raw_nodes: list[dict], rank: int) -> dict:
    """The live node labelled with `rank`; a ConfigError naming the live ranks when there is none."""
    from rlplace.ray.labels import NODE_RANK_LABEL
    from rlplace.ray.nodes import is_head

    ranked = [n for n in raw_nodes if n.get("Alive") and NODE_RANK_LABEL in (n.get("Labels") or {})]
    mine = [n for n in ranked if n["Labels"][NODE_RANK_LABEL] == str(rank)]
    if not mine:
        live = sorted({int(r) for n in ranked if (r := n["Labels"][NODE_RANK_LABEL]).isdigit()})
        listed = ", ".join(map(str, live)) or "none (no node was started with `rlplace start --node-rank N`)"
        raise ConfigError(
            Problem(path="--node-rank", value=rank, message=f"no live node has rank {rank}; live ranks: {listed}")
        )
    if is_head(mine[0]):
        raise ConfigError(
            Problem(
                path="--node-rank",
                value=rank,
                message=f"node {rank} is the head node: its GCS holds the cluster, and draining it ends every job; "
                "drain the other nodes (`rlplace stop` on the head stops the cluster)",
            )
        )
    return mine[0]
