"""argparse types for numbers, checked at parse time so a message names the flag as typed.

Shared by the CLI (`rlplace.commands`) and the example pipeline's own options (`rlplace.examples`), which sits
below the CLI and so cannot import it.
"""

from __future__ import annotations

import argparse


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
