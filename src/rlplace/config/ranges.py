"""Rank lists and placement strings: the two little languages inside a cluster config.

- Rank lists (`node_ranks: 0-7`, pool ranges `train: "0-7, 8-15"`, `node_ranks: [0, 1, "4-5"]`) become
  tuples of ints in written order.
- Placement strings (`placement: 0-1:0-199,2-3:200-399`, `all`) become `Segment`s, grammar
  ``resource_ranks[:process_ranks](,segment)*``.

Everything here is pure and knows nothing of key paths: errors are `RangeError` (a ValueError) with a
message that names the offending text and what would be valid; the loader adds the key path and line.
Rules that need no inventory are checked here, so every caller gets them: ranges run forwards, no rank
appears twice, process ranks continue 0, 1, 2, ... across segments, and n processes over m resources
need n % m == 0 or m % n == 0 (docs/decisions.md, "Workers over resources").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rlplace.model import Segment

#: Ranks above this are certainly typos, and expanding `0-99999999999` would exhaust memory.
MAX_RANK = (1 << 20) - 1

_SPAN = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")
_EXAMPLES = "a rank like 3, a range like 0-7, or a comma list like '0-7, 8-15'"


class RangeError(ValueError):
    """A rank list or placement string is malformed; the message says what and how to fix it."""


def _span(text: str) -> tuple[int, ...]:
    """One `a` or `a-b` term (inclusive)."""
    m = _SPAN.fullmatch(text)
    if not m:
        if text.strip().startswith("-"):
            raise RangeError(f"'{text.strip()}' is negative; ranks start at 0")
        raise RangeError(f"'{text.strip()}' is not {_EXAMPLES}")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if max(first, last) > MAX_RANK:
        raise RangeError(f"rank {max(first, last)} in '{text.strip()}' is too large (at most {MAX_RANK})")
    if last < first:
        raise RangeError(f"range '{text.strip()}' runs backwards; write {last}-{first}")
    return tuple(range(first, last + 1))


def _no_duplicates(ranks: Iterable[int], text: str) -> None:
    seen: set[int] = set()
    for r in ranks:
        if r in seen:
            raise RangeError(f"rank {r} appears twice in '{text}'; each rank may be listed once")
        seen.add(r)


def parse_ranks(value: object) -> tuple[int, ...]:
    """Parse a rank list: ``3``, ``"0-7"``, ``"0-7, 8-15"`` or ``[0, 1, "4-5"]``, in written order."""
    if isinstance(value, bool):
        raise RangeError(f"{value!r} is a boolean, not {_EXAMPLES}")
    if isinstance(value, int):
        return _span(str(value))
    if isinstance(value, str):
        if not value.strip():
            raise RangeError(f"the rank list is empty; write {_EXAMPLES}")
        parts = value.split(",")
        if any(not p.strip() for p in parts):
            raise RangeError(f"'{value}' has an empty part between commas; write {_EXAMPLES}")
        ranks = tuple(r for p in parts for r in _span(p))
        _no_duplicates(ranks, value)
        return ranks
    if isinstance(value, list | tuple):
        if not value:
            raise RangeError(f"the rank list is empty; write {_EXAMPLES}")
        ranks = tuple(r for item in value for r in _item(item))
        _no_duplicates(ranks, str(list(value))[:80])
        return ranks
    raise RangeError(f"{value!r} is a {type(value).__name__}, not {_EXAMPLES}")


def _item(item: object) -> tuple[int, ...]:
    """One element of a YAML rank list: an int or a single `a`/`a-b` term."""
    if isinstance(item, int) and not isinstance(item, bool):
        return _span(str(item))
    if isinstance(item, str) and "," not in item:
        return _span(item)
    raise RangeError(f"list element {item!r} is not a rank like 3 or a range like '0-7'")


def format_ranks(ranks: Iterable[int], *, block: int | None = None) -> str:
    """The inverse of `parse_ranks`: ``[0, ..., 15]`` -> ``"0-15"``, or ``"0-7, 8-15"`` with ``block=8``.

    Runs of consecutive ranks are compressed; `block` also breaks runs at multiples of it (one term per
    node in RLightning's pool-range style). Order is kept, so non-ascending input stays readable.
    """
    terms: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            terms.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run.clear()

    for r in ranks:
        if run and (r != run[-1] + 1 or (block and r % block == 0)):
            flush()
        run.append(r)
    flush()
    return ", ".join(terms)


def parse_placement(value: object) -> tuple[Segment, ...]:
    """Parse a placement: ``0-63``, ``0-1:0-199,2-3:200-399``, ``all``, ``all:0-7`` or an int like ``0``.

    A segment without process ranks holds one process per resource, numbered on from the previous
    segment; with process ranks, they must continue from the previous segment (the first starts at 0).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return (Segment(resources=_span(str(value))),)
    if not isinstance(value, str):
        raise RangeError(
            f"{value!r} is a {type(value).__name__}, not a placement string like '0-7', '0-3:0-7,4-7:8-15' or 'all'"
        )
    text = value.strip()
    if not text:
        raise RangeError("the placement is empty; write ranks like '0-7', '0-3:0-7' or 'all'")
    parts = text.split(",")
    if any(not p.strip() for p in parts):
        raise RangeError(f"placement '{text}' has an empty segment between commas")
    segments = tuple(_segment(p.strip(), text) for p in parts)
    if len(segments) > 1 and any(s.resources is None for s in segments):
        raise RangeError(f"'all' must be the whole placement, as 'all' or 'all:0-7', not a segment of '{text}'")
    _no_duplicates((r for s in segments for r in s.resources or ()), text)
    _check_process_numbering(segments, text)
    return segments


def _segment(part: str, whole: str) -> Segment:
    pieces = part.split(":")
    if len(pieces) > 2:
        raise RangeError(f"segment '{part}' of '{whole}' has more than one ':'; write resource_ranks:process_ranks")
    res_text = pieces[0].strip()
    if not res_text:
        raise RangeError(f"segment '{part}' of '{whole}' has no resource ranks before ':'")
    resources = None if res_text == "all" else _span(res_text)
    processes = None
    if len(pieces) == 2:
        if not pieces[1].strip():
            raise RangeError(f"segment '{part}' of '{whole}' has no process ranks after ':'")
        processes = _span(pieces[1])
    if resources is not None and processes is not None:
        n, m = len(processes), len(resources)
        if n % m and m % n:
            raise RangeError(
                f"segment '{part}' puts {n} processes on {m} resources; one count must divide the other "
                f"(several processes share a resource, or one process owns several), e.g. "
                f"{res_text}:0-{2 * m - 1} or {res_text}:0"
            )
    return Segment(resources=resources, processes=processes)


def _check_process_numbering(segments: tuple[Segment, ...], text: str) -> None:
    expected = 0
    for seg in segments:
        if seg.processes is not None:
            if seg.processes[0] != expected:
                raise RangeError(
                    f"process ranks in '{text}' must continue from {expected}, but a segment starts at "
                    f"{seg.processes[0]}; processes are numbered 0, 1, 2, ... across segments"
                )
            expected = seg.processes[-1] + 1
        elif seg.resources is not None:
            expected += len(seg.resources)
