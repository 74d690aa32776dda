"""argparse types shared by the commands: checked at parse time, so a message names the flag as typed."""

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


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def non_negative_seconds(text: str) -> float:
    if text.strip() in ("0", "0.0"):
        return 0.0
    return positive_seconds(text)
