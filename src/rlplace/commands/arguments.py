"""argparse types of the commands: checked at parse time, so a message names the flag as typed (numbers:
`rlplace.cli_types`)."""

from __future__ import annotations

import argparse

from rlplace.errors import ConfigError


def nodes_argument(text: str) -> str:
    """An argparse type for a simulated cluster (`--simulate`, `demo --nodes`): checked at parse time, so the
    message names the flag as typed."""
    from rlplace.inventory import parse_nodes

    try:
        parse_nodes(text)
    except ConfigError as e:
        shown = (p.message if str(p.value) in p.message else f"{p.value!r}: {p.message}" for p in e.problems)
        raise argparse.ArgumentTypeError("; ".join(shown)) from None
    return text
