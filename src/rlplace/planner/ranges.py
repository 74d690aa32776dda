"""Rank lists written back as the range strings users write (`0-7, 16-23`), for messages and export.

The formatter itself is the config loader's inverse of `parse_ranks`; this module adds the per-node view.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise

from rlplace.config.ranges import format_ranks

__all__ = ["format_ranks", "idle_by_node", "ranks_brief"]


def ranks_brief(ranks: Iterable[int]) -> str:
    """As `format_ranks`, but a run of equal ranges equally apart (the same nodes or ranks in alike racks) reads
    `0-15, 18-33, …, 1008-1023`: its first two ranges and its last."""
    text = format_ranks(ranks)
    parts = text.split(", ")
    if len(parts) <= 3:
        return text
    bounds = [tuple(int(x) for x in part.split("-")) for part in parts]
    sizes = {b[-1] - b[0] for b in bounds}
    steps = {b[0] - a[0] for a, b in pairwise(bounds)}
    return f"{', '.join(parts[:2])}, …, {parts[-1]}" if len(sizes) == 1 and len(steps) == 1 else text


def idle_by_node(slots: Iterable[tuple[int, int]]) -> str:
    """``[(0, 1), (0, 2), (1, 0)] -> "node 0 GPUs 1-2; node 1 GPU 0"``."""
    per: dict[int, list[int]] = {}
    for node, gpu in slots:
        per.setdefault(node, []).append(gpu)
    return "; ".join(f"node {n} GPU{'s' if len(g) > 1 else ''} {format_ranks(g)}" for n, g in per.items())
