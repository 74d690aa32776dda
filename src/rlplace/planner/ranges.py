"""Rank lists written back as the range strings users write (`0-7, 16-23`), for messages and export."""

from __future__ import annotations

from collections.abc import Iterable


def format_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"`` (runs of consecutive ranks, in the given order)."""
    parts: list[str] = []
    start = prev = None
    for r in ranks:
        if prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            parts.append(_run(start, prev))
        start = prev = r
    if start is not None:
        parts.append(_run(start, prev))
    return ", ".join(parts)


def _run(a: int, b: int | None) -> str:
    return str(a) if b is None or a == b else f"{a}-{b}"


def idle_by_node(slots: Iterable[tuple[int, int]]) -> str:
    """``[(0, 1), (0, 2), (1, 0)] -> "node 0 GPUs 1-2; node 1 GPU 0"``."""
    per: dict[int, list[int]] = {}
    for node, gpu in slots:
        per.setdefault(node, []).append(gpu)
    return "; ".join(f"node {n} GPU{'s' if len(g) > 1 else ''} {format_ranks(g)}" for n, g in per.items())
