"""`rlplace status` (placeholder until its issue lands)."""

from __future__ import annotations

import argparse

from rlplace.errors import RlplaceError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="(not built yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise RlplaceError("'rlplace status' is not built yet")
