"""`rlplace validate FILE... [OVERRIDE...]`: `FILE: ok` per valid file (and its warnings), else every problem as
`file:line: key.path: message`. Hydra overrides (`key=value`) apply to every file."""

from __future__ import annotations

import argparse

from rlplace.commands.arguments import add_entry_arguments, add_show_env_argument, config_file
from rlplace.errors import ConfigError
from rlplace.printable import printable

#: Exit status when any file is invalid (the CLI's config-error code).
EXIT_INVALID = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check cluster configs; print every problem with its file, line and key",
        usage="rlplace validate [-h] FILE [FILE ...] [OVERRIDE ...]",
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="YAML config files (cluster: section, either dialect; Hydra primary or group files), then Hydra "
        "overrides like cluster=4t4e cluster.train_worker_num=8",
    )
    add_entry_arguments(p)
    add_show_env_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace.config import load
    from rlplace.config.hydra_compose import split_arguments

    files, overrides = split_arguments(args.files)
    status = 0
    for name in files:
        try:
            spec = load(config_file(name, args), overrides=overrides, show_env=args.show_env)
        except ConfigError as e:
            status = EXIT_INVALID
            for problem in e.problems:
                print(printable(problem))
        else:
            print(printable(f"{name}: ok"))
            for warning in spec.warnings:
                print(printable(f"  warning: {warning}"))
    return status
