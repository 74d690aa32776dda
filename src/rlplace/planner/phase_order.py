"""The order of an iteration's phases: which timed components take turns on the same GPUs and which run side by
side on GPUs of their own, and the seconds that order gives (docs/guide.md, "Choosing a placement").

The components' GPU sets form a tree of blocks: a block is a set of GPUs, its `members` are the components on
exactly those GPUs, and its `children` are blocks on disjoint parts of them. RLinf's placements are such trees:
collocated (one block, every component a member), disaggregated (blocks side by side) and hybrid (a block whose
member spans GPUs that its children split: RLinf's embodied actor on every GPU over env and rollout each on some).
Two components that share some GPUs but not all are taken as one block: they take turns.

The seconds of a block: its members take turns, so their times add; its children run side by side, then it:

    T(block) = sum of its members' seconds + side_by_side(T(child) for each child)

Side by side, with `streamed` stages (RLinf pipelines an iteration's B group batches: the slowest block sets the
pace, and every other block adds only its first batch, RLinf's warm-up), and with `sequential` ones (a synchronous
algorithm: each waits for the one before):

    streamed:    max T + (sum T - max T) / B
    sequential:  sum T

A member's seconds include, when its GPUs are shared with another component and offload is on, the offload and
reload of its memory over the host link (planner/timing.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    members: tuple[str, ...]
    children: tuple[Block, ...] = ()

    @property
    def stages(self) -> tuple[str, ...]:
        """Every component in the block, its children's included."""
        return (*self.members, *(s for c in self.children for s in c.stages))

    def to_dict(self) -> dict:
        return {"members": list(self.members), "children": [c.to_dict() for c in self.children]}


def side_by_side(times: Iterable[float], batches: int, streamed: bool) -> float:
    """Blocks on disjoint GPUs, each taking `times[i]` for the iteration."""
    times = list(times)
    if not times:
        return 0.0
    if not streamed:
        return sum(times)
    slowest = max(times)
    return slowest + (sum(times) - slowest) / batches


def block_seconds(block: Block, own: Mapping[str, float], batches: int, streamed: bool) -> float:
    inner = side_by_side((block_seconds(c, own, batches, streamed) for c in block.children), batches, streamed)
    return sum(own[m] for m in block.members) + inner


def iteration_seconds(roots: tuple[Block, ...], own: Mapping[str, float], batches: int, streamed: bool) -> float:
    """The compute part of an iteration: the root blocks side by side."""
    return side_by_side((block_seconds(b, own, batches, streamed) for b in roots), batches, streamed)


def shared(roots: tuple[Block, ...]) -> set[str]:
    """The components whose GPUs another component also uses (they are the ones offload swaps)."""
    out: set[str] = set()

    def visit(block: Block, nested: bool) -> None:
        if nested or len(block.members) > 1 or block.children:
            out.update(block.members)
        for c in block.children:
            visit(c, True)

    for b in roots:
        visit(b, False)
    return out


def mode(roots: tuple[Block, ...]) -> str:
    """collocated (one block holds every component as a member), disaggregated (only blocks side by side, each
    with one member), or hybrid."""
    if len(roots) == 1 and not roots[0].children:
        return "collocated"
    if all(len(b.members) == 1 and not b.children for b in roots):
        return "disaggregated"
    return "hybrid"


def blocks_of(sets: Mapping[str, frozenset]) -> tuple[Block, ...]:
    """The tree of blocks of components on these GPU sets (any hashable GPU ids), members, children and roots in
    the order of `sets`. Sets that overlap without one holding the other are merged (their components take turns
    on the union), until the sets nest."""
    groups: list[tuple[frozenset, list[str]]] = []
    for name, gpus in sets.items():
        groups.append((frozenset(gpus), [name]))
    merged = True
    while merged:
        merged = False
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                a, b = groups[i][0], groups[j][0]
                if a == b or (a & b and not (a <= b or b <= a)):
                    groups[i] = (a | b, groups[i][1] + groups[j][1])
                    del groups[j]
                    merged = True
                    break
            if merged:
                break
    groups.sort(key=lambda g: -len(g[0]))
    parent: dict[int, int | None] = {}
    for i, (gpus, _) in enumerate(groups):
        holders = [j for j in range(i) if gpus < groups[j][0]]
        parent[i] = min(holders, key=lambda j: len(groups[j][0])) if holders else None

    order = {name: k for k, name in enumerate(sets)}

    def first(i: int) -> int:
        return min(order[n] for n in groups[i][1])

    def build(i: int) -> Block:
        kids = sorted((j for j in parent if parent[j] == i), key=first)
        return Block(tuple(sorted(groups[i][1], key=order.__getitem__)), tuple(build(j) for j in kids))

    return tuple(build(i) for i in sorted((i for i in parent if parent[i] is None), key=first))
