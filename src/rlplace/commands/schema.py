"""`rlplace schema [--output PATH]`: the JSON Schema of the config, for editors to complete and check YAML."""

from __future__ import annotations

import argparse
import json
import pathlib

from rlplace.output_files import write_file
from rlplace.printable import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the cluster config (both dialects)")
    p.add_argument("--output", "-o", type=pathlib.Path, help="write the schema to this file instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace.config import config_schema

    text = json.dumps(config_schema(), indent=2) + "\n"
    if args.output is None:
        print(text, end="")
    else:
        print(printable(f"wrote {write_file(args.output, text)}"))
    return 0
