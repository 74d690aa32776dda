"""`rlplace validate FILE...`: `FILE: ok` per valid file, else every problem as `file:line: key.path: message`."""

from __future__ import annotations

import argparse
import pathlib

from rlplace.errors import ConfigError

#: Exit status when any file is invalid (the CLI's config-error code).
EXIT_INVALID = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check cluster configs; print every problem with its file, line and key")
    p.add_argument("files", nargs="+", metavar="FILE", help="YAML config files (cluster: section, either dialect)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace.config import load

    status = 0
    for name in args.files:
        try:
            load(pathlib.Path(name))
        except ConfigError as e:
            status = EXIT_INVALID
            for problem in e.problems:
                print(problem)
        else:
            print(f"{name}: ok")
    return status
