"""`rlplace status`: the live jobs' workers, where each runs and in which state (read by `rlplace.ray.status`),
printed as tables or JSON, once or every few seconds."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rlplace.printable import printable
from rlplace.ray.status import NodeRow, SizeRow, WorkerRow, collect_all, sizes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="show the live job's workers: node, GPUs, state, restarts",
        description="The jobs running on a Ray cluster, as rlplace.connect() records them there: each "
        "component's workers, the node and GPUs each runs on, its state and restarts, lost nodes and the "
        "elastic components' sizes; once, or every --interval seconds with --watch. Reads only: starts and "
        "changes nothing.",
    )
    p.add_argument(
        "--address",
        metavar="HOST:PORT",
        default="auto",
        help="the Ray cluster's head (default: auto: $RAY_ADDRESS, else the cluster started on this machine)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="how the workers are printed")
    # -- following a failure (issue 11) --
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C (see --interval)")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="--watch refresh period")
    p.add_argument("--count", type=int, default=0, metavar="N", help="--watch: stop after N refreshes (0: never)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace.ray.auth import connected_access
    from rlplace.ray.join import join
    from rlplace.ray.ray_port import RAY

    connected_here = not RAY.connected()
    access = join(args.address) if connected_here else connected_access(RAY.gcs_address())
    shown = 0
    try:
        while True:
            nodes, rows = collect_all()
            elastic = sizes()
            if args.watch and args.format == "table" and sys.stdout.isatty():
                print("\033[H\033[2J", end="")  # clear the terminal between refreshes
            if args.format == "json":
                shown_tables = {
                    "nodes": [asdict(x) for x in nodes],
                    "workers": [asdict(x) for x in rows],
                    "elastic": [asdict(x) for x in elastic],
                }
                cluster = {
                    "address": access.address,
                    "requires_token": access.requires_token,
                    "simulated": _simulated(),
                }
                print(json.dumps({**shown_tables, "cluster": cluster}, indent=2))
            else:
                print(printable(f"cluster {access.address} {_describe(access)}\n"))
                print(printable(render(rows, nodes, elastic)))
            shown += 1
            if not args.watch or (args.count and shown >= args.count):
                break
            if args.format == "table":
                print(f"\n(every {args.interval:g} s, {time.strftime('%H:%M:%S')}; Ctrl-C to stop)", flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        if connected_here:
            RAY.disconnect()
    return 0


def _simulated() -> bool:
    """Whether every live node is one rlplace simulates on this machine (SIMULATED_LABEL)."""
    from rlplace.ray.labels import SIMULATED_LABEL
    from rlplace.ray.ray_port import RAY

    alive = [n for n in RAY.nodes() if n.get("Alive")]
    return bool(alive) and all(SIMULATED_LABEL in (n.get("Labels") or {}) for n in alive)


def _describe(access: Any) -> str:
    """What the cluster's access is: a token, none (OPEN, with what to do), or a cluster rlplace itself simulates
    here, which needs no token and is gone when the run that started it ends (no warning: nothing to do)."""
    if not access.requires_token and _simulated():
        return (
            "is simulated by rlplace on this machine (`rlplace run --simulate`, `rlplace demo`): an embedded cluster "
            "without a token, stopped when the run that started it ends"
        )
    return str(access.describe())


def render(rows: list[WorkerRow], nodes: Sequence[NodeRow] = (), elastic: Sequence[SizeRow] = ()) -> str:
    if not rows and not nodes:
        return "no rlplace workers on this cluster (no live job has launched any)"
    parts = []
    if elastic:
        parts.append(
            _table(
                ("ELASTIC", "WORKERS", "RANGE", "AIM"),
                [(e.component, str(e.workers), f"{e.min}-{e.max}", str(e.start)) for e in elastic],
            )
        )
    if nodes:
        now = time.time()
        parts.append(
            _table(
                ("NODE", "STATE", "SINCE", "DETAIL"), [(n.node, n.state, _ago(now - n.since), n.detail) for n in nodes]
            )
        )
    header = ("WORKER", "NODE", "GPUS", "STATE", "RESTARTS", "PID")
    table = [(r.name, r.node, r.gpus, r.state, str(r.restarts), "-" if r.pid is None else str(r.pid)) for r in rows]
    parts.append(_table(header, table) if rows else "no rlplace workers running")
    return "\n\n".join(parts)


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> str:
    table = [header, *body]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in table)


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago"
