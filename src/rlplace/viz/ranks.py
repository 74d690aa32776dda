"""Compact rank lists ("0-99,120"), the form users write placements in, so pictures read like configs."""

from __future__ import annotations

from collections.abc import Iterable


def format_ranks(ranks: Iterable[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` -> `"0-2,5,7-8"` (sorted, duplicates dropped; empty -> `""`)."""
    runs: list[list[int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def fraction_label(fraction: float) -> str:
    """A GPU share as users think of it: `1/3` for one of three co-residents, `""` for a whole GPU."""
    if fraction >= 1 - 1e-9:
        return ""
    k = round(1 / fraction) if fraction > 0 else 0
    if k and abs(1 / k - fraction) < 1e-6:
        return f"1/{k}"
    return f"{fraction:.2f}"
