"""Rank lists written back as the range strings users write (`0-7, 16-23`), for messages and export.

The formatter itself is the config loader's inverse of `parse_ranks`; this module adds the per-node view.
"""

from __future__ import annotations

from collections.abc import Iterable

from rlplace.config.ranges import format_ranks

__all__ = ["format_ranks", "idle_by_node"]


def idle_by_node(slots: Iterable[tuple[int, int]]) -> str:
    """``[(0, 1), (0, 2), (1, 0)] -> "node 0 GPUs 1-2; node 1 GPU 0"``."""
    per: dict[int, list[int]] = {}
    for node, gpu in slots:
        per.setdefault(node, []).append(gpu)
    return "; ".join(f"node {n} GPU{'s' if len(g) > 1 else ''} {format_ranks(g)}" for n, g in per.items())
