"""`rlplace stop`: stop the Ray nodes that `rlplace start` started on this machine, and nothing else.

Unlike `ray stop`, which ends every Ray process of the machine (other users' nodes, a test's simulated
cluster), it ends only the processes of the nodes it recorded at start (commands/local_nodes.py), in Ray's
order: raylet, then the rest, then the GCS.
"""

from __future__ import annotations

import argparse
import sys

from rlplace.cli_types import positive_seconds
from rlplace.commands import local_nodes
from rlplace.printable import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stop",
        help="stop the Ray nodes `rlplace start` started on this machine (not every Ray process, as `ray stop`)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--grace",
        type=positive_seconds,
        default=local_nodes.GRACE_S,
        metavar="SECONDS",
        help="how long the processes may take to end after SIGTERM, in all, before they get SIGKILL",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    records, ignored = local_nodes.read_records()
    for line in ignored:  # never acted on: a record rlplace did not write could name anything
        print(printable(f"warning: {line}"), file=sys.stderr)
    if not records:
        print(
            f"nothing to stop: no node started by `rlplace start` is recorded on this machine "
            f"({local_nodes.records_dir()}); Ray processes started otherwise are left alone (`ray stop` ends "
            "every Ray process of the machine)"
        )
        return 0
    for record in records:
        stopped = local_nodes.stop(record, args.grace)
        if not stopped.processes:
            print(printable(f"{record.describe()}: already stopped (no process of it was left)"))
            continue
        names = ", ".join(f"{name} {pid}" for pid, name in stopped.processes)
        forced = f"; {len(stopped.killed)} needed SIGKILL" if stopped.killed else ""
        count = f"{len(stopped.processes)} process{'es' if len(stopped.processes) != 1 else ''}"
        print(printable(f"stopped {record.describe()}: {count} ({names}){forced}"))
    return 0
