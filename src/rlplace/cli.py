"""The `rlplace` command line: one subcommand per module in `rlplace.commands`.

Each command module defines `register(subparsers)` (adds its parser and sets `func`) and keeps heavy
imports (Ray) inside its `run` function, so `rlplace validate` and `rlplace plan` start fast.
Every deliberate failure is an `RlplaceError`: printed without a traceback, with a stable exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rlplace import __version__
from rlplace.errors import ConfigError, PlacementError, PlanError, RlplaceError

COMMANDS = ("validate", "schema", "plan", "start", "run", "demo", "status")

EXIT_OK, EXIT_CONFIG, EXIT_PLAN, EXIT_PLACEMENT = 0, 2, 3, 4


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlplace", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rlplace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"rlplace.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return EXIT_CONFIG
    except PlanError as e:
        print(f"plan: {e}", file=sys.stderr)
        return EXIT_PLAN
    except PlacementError as e:
        print(f"placement: {e}", file=sys.stderr)
        return EXIT_PLACEMENT
    except RlplaceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
