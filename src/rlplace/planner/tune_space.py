"""The placements `rlplace tune` searches, and a lower bound of each one's predicted time that costs microseconds.

A placement of the timed components (stages) is
- a structure: a forest of blocks (planner/phase_order.py) over the stages: which take turns on the same GPUs,
  which run side by side, which split the GPUs of another (hybrid);
- a GPU count for every block (its members each use that many GPUs), children within their parent, roots within
  the GPUs tuned (the "line": the GPUs of the group the stages are placed in, node by node in rank order);
- an arrangement: the order of sibling blocks along the line, each packed from its parent's first GPU.
So every component gets one contiguous range of the line's GPUs, as RLinf's model-parallel placement requires
and RLightning's pools write naturally. Counts are multiples of every member's unit (model-parallel or engine
size) where the member's curve has a time. Above `EXHAUSTIVE_POSITIONS` count steps, blocks of several nodes take
whole nodes and the last of a group of siblings, when it has no children, takes its best count in what is left
(the fastest for its members, which no other block's time depends on).

The lower bound is the compute part of `timing.predict` (the same block equations, stage times and offload
costs), with transfers counted as 0: `predict` adds them. On a line of one GPU model it does not depend on the
arrangement, which is then chosen when the placement is planned (planner/tune.py).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from rlplace.planner.figures import GpuModel
from rlplace.planner.phase_order import Block, iteration_seconds, shared
from rlplace.planner.workload import Stage, Workload

#: Up to this many GPUs on the line, every count of every block is tried (the search is exhaustive).
EXHAUSTIVE_GPUS = 32
#: Above it, a first pass tries about this many counts a block (whole nodes), a second refines the best.
COARSE_POSITIONS = 32


@dataclass(frozen=True)
class Line:
    """The GPUs `tune` distributes, in order: (node, local GPU) of each, its GPU model's figures, and where the
    unbroken run of GPUs a model-parallel group may span ends (its node, or its NVLink domain)."""

    gpus: tuple[tuple[int, int], ...]
    models: tuple[GpuModel, ...]
    node_end: tuple[int, ...]  # index after the last GPU of this GPU's node
    domain_end: tuple[int, ...]  # index after the last GPU of this GPU's run of one NVLink domain

    def __len__(self) -> int:
        return len(self.gpus)

    @functools.cached_property
    def uniform(self) -> bool:
        """One GPU model and one node size all along: a placement's time does not depend on where it lies."""
        return len({m.name for m in self.models}) <= 1 and len(set(self.node_sizes)) <= 1

    @functools.cached_property
    def node_sizes(self) -> list[int]:
        out, i = [], 0
        while i < len(self.gpus):
            out.append(self.node_end[i] - i)
            i = self.node_end[i]
        return out


@dataclass(frozen=True)
class Shape:
    """A structure with counts: `roots` (blocks), and the GPU count of each block by its position in DFS order."""

    roots: tuple[Block, ...]
    counts: tuple[int, ...]

    def blocks(self) -> list[Block]:
        return dfs(self.roots)

    def gpus(self) -> dict[str, int]:
        """Each stage's GPU count."""
        return {m: n for b, n in zip(self.blocks(), self.counts, strict=True) for m in b.members}


def dfs(roots: Sequence[Block]) -> list[Block]:
    out: list[Block] = []
    for b in roots:
        out.append(b)
        out.extend(dfs(b.children))
    return out


def forests(names: tuple[str, ...]) -> list[tuple[Block, ...]]:
    """Every forest of blocks over `names` (each name a member of exactly one block), each once: the root that
    holds the first name (as a member or inside) comes first, members keep `names` order."""
    if not names:
        return [()]
    first = names[0]
    out = []
    for members in _subsets(names):
        if not members:
            continue
        left = tuple(n for n in names if n not in members)
        for inside in _subsets(left):
            if first not in members and first not in inside:
                continue
            others = tuple(n for n in left if n not in inside)
            for kids in forests(inside):
                for siblings in forests(others):
                    out.append((Block(members, kids), *siblings))
    return out


def _subsets(names: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for k in range(len(names) + 1):
        yield from itertools.combinations(names, k)


@dataclass(frozen=True)
class SyncBound:
    """The least a weight sync can take, by the GPU counts of the train stage (actor) and the stage that receives
    its weights (rollout): every node of the receiver's range but the one it may share with the trainer's range
    pulls `model_bytes` (the estimate's rule, planner/estimate.py), from at most `sources` nodes, at the fastest
    link a node has. `timing.predict` counts at least that; it may count more."""

    train: str
    receiver: str
    model_bytes: int
    node_gpus: int  # the most GPUs a node of the line has
    fastest_gb_s: float
    spread: bool  # the topology lets receivers pull from several trainer nodes (else all from train rank 0's)

    def seconds(self, roots: tuple[Block, ...], gpus: dict[str, int]) -> float:
        train, receiver = gpus[self.train], gpus[self.receiver]
        inside = _within(roots, self.receiver, self.train)
        if inside:
            return 0.0
        nodes = -(-receiver // self.node_gpus)
        around = -(-train // self.node_gpus) + 1 if _within(roots, self.train, self.receiver) else 1
        pulls = max(0, nodes - around)
        if not pulls:
            return 0.0
        sources = -(-train // self.node_gpus) + 1 if self.spread else 1
        return max(1.0, pulls / sources) * self.model_bytes / (self.fastest_gb_s * 1e9)


def _within(roots: Sequence[Block], inner: str, outer: str) -> bool:
    """Whether `inner`'s GPUs lie within `outer`'s: the same block, or a block inside `outer`'s."""
    for b in dfs(roots):
        if outer in b.members:
            return inner in b.stages
    return False


class RangeMin:
    """The least of `values[lo:hi]` in constant time (a sparse table: the least of every run of 2^k values)."""

    def __init__(self, values: Sequence[float]):
        self.levels = [list(values)]
        k = 1
        while 2 * k <= len(values):
            last = self.levels[-1]
            self.levels.append([min(last[i], last[i + k]) for i in range(len(last) - k)])
            k *= 2

    def __call__(self, lo: int, hi: int) -> float:
        k = (hi - lo).bit_length() - 1
        row = self.levels[k]
        return min(row[lo], row[hi - (1 << k)])


@dataclass(frozen=True)
class Grid:
    """The counts a search pass tries: any count up to `node` GPUs, multiples of `fine` up to `coarse`, then
    multiples of `coarse`; `best_last`: the last childless sibling of a group takes its best count in what is left
    (the fewest seconds for its members, of equal ones the most GPUs) instead of every count."""

    node: int
    fine: int = 1
    coarse: int = 1
    best_last: bool = False

    def allows(self, c: int) -> bool:
        return c <= self.node or (c % self.fine == 0 and (c <= self.coarse or c % self.coarse == 0))


class Space:
    """The search space of one workload on one line, and the lower bound of each placement in it."""

    def __init__(
        self,
        workload: Workload,
        line: Line,
        allowed: Callable[[tuple[Block, ...]], bool] | None = None,
        sync: SyncBound | None = None,
    ):
        self.workload = workload
        self.line = line
        self.sync = sync
        self.stages = {s.name: s for s in workload.stages}
        n = len(line)
        #: seconds[name][c]: the stage's compute on c GPUs of the reference model (None: not a count it takes).
        self.seconds = {s.name: [None, *(_time(s, c) for c in range(1, n + 1))] for s in workload.stages}
        self._least: tuple[RangeMin, RangeMin, RangeMin] | None = None  # speed, host link, memory over ranges
        self._start_list: list[int] | None = None  # where a block may start after idle GPUs (mixed lines)
        self._valid: dict[tuple[tuple[str, ...], Grid], list[int]] = {}
        self._best: dict[tuple[tuple[str, ...], Grid], list[int]] = {}
        self.structures = [
            f for f in forests(tuple(self.stages)) if self._runs_as_written(f) and (allowed is None or allowed(f))
        ]

    def _runs_as_written(self, roots: tuple[Block, ...]) -> bool:
        """A stage that must span every GPU (RLinf's embodied actor) is a member of the one root."""
        spans = [s.name for s in self.stages.values() if s.spans_all]
        return not spans or (len(roots) == 1 and all(n in roots[0].members for n in spans))

    # --- counts ---------------------------------------------------------------------------------------------

    def shapes(
        self, roots: tuple[Block, ...], grid: Grid, windows: tuple[tuple[int, int], ...] | None = None
    ) -> Iterator[Shape]:
        """The count assignments of a structure on `grid`; `windows`: each block's counts kept within (lo, hi)."""
        blocks = dfs(roots)
        parent = _parents(blocks)
        counts = [0] * len(blocks)
        whole = len(self.line)
        last = [
            grid.best_last and not b.children and not any(parent[j] == parent[i] for j in range(i + 1, len(blocks)))
            for i, b in enumerate(blocks)
        ]
        alone = [p is not None and len(blocks[p].children) == 1 for p in parent]

        def assign(i: int) -> Iterator[tuple[int, ...]]:
            if i == len(blocks):
                yield tuple(counts)
                return
            p = parent[i]
            budget = (counts[p] if p is not None else whole) - sum(counts[j] for j in range(i) if parent[j] == p)
            if alone[i]:
                budget -= 1  # all of its parent's GPUs would make it a member of the parent
            members = blocks[i].members
            lo, hi = windows[i] if windows is not None else (1, budget)
            budget = min(budget, hi)
            if last[i]:
                best = self._best_upto(members, grid)[max(budget, 0)]
                options = [best] if best >= lo else []
            else:
                valid = self._valid_counts(members, grid)
                options = valid[bisect.bisect_left(valid, lo) : bisect.bisect_right(valid, budget)]
            for c in options:
                counts[i] = c
                yield from assign(i + 1)
            counts[i] = 0

        for c in assign(0):
            yield Shape(roots, c)

    def _valid_counts(self, members: tuple[str, ...], grid: Grid) -> list[int]:
        """The counts a block of `members` may take on `grid`, sorted: every member has a time there; a member
        that spans every GPU takes them all."""
        key = (members, grid)
        found = self._valid.get(key)
        if found is None:
            n = len(self.line)
            options = [n] if any(self.stages[m].spans_all for m in members) else range(1, n + 1)
            found = [c for c in options if grid.allows(c) and all(self.seconds[m][c] is not None for m in members)]
            self._valid[key] = found
        return found

    def _best_upto(self, members: tuple[str, ...], grid: Grid) -> list[int]:
        """For each budget, the count within it that gives the members the least time (0: none fits); of equal
        times, the larger count."""
        key = (members, grid)
        found = self._best.get(key)
        if found is None:
            valid = set(self._valid_counts(members, grid))
            found, best, best_t = [0], 0, float("inf")
            for c in range(1, len(self.line) + 1):
                if c in valid:
                    t = sum(s for m in members if (s := self.seconds[m][c]) is not None)  # each is, c being valid
                    if t <= best_t:
                        best, best_t = c, t
                found.append(best)
            self._best[key] = found
        return found

    # --- lower bounds ---------------------------------------------------------------------------------------

    def scorer(self, roots: tuple[Block, ...], offload: bool) -> Callable[[tuple[int, ...]], float] | None:
        """The lower bound of the structure's count assignments on a line of one GPU model, as a function of the
        counts (None: its memory does not fit, whatever the counts)."""
        model = self.line.models[0]
        blocks = dfs(roots)
        parent = _parents(blocks)
        if not self._fits_blocks(blocks, parent, offload, [model.memory_gb or math.inf] * len(blocks)):
            return None
        swapping = shared(roots) if offload else set()
        factor = self.workload.reference_speed / model.speed
        own = {}
        for name, stage in self.stages.items():
            memory = stage.memory_gb if name in swapping else None
            swap = 2 * memory / model.pcie_gb_s if memory else 0.0
            # inf: a count the stage does not take, which no shape scored has (they take valid counts)
            own[name] = [math.inf if t is None else t * factor + swap for t in self.seconds[name]]
        arrays = [[own[m] for m in b.members] for b in blocks]
        kids = [[j for j in range(len(blocks)) if parent[j] == i] for i in range(len(blocks))]
        roots_at = [i for i in range(len(blocks)) if parent[i] is None]
        batches, streamed = self.workload.batches, self.workload.streamed
        order = list(range(len(blocks) - 1, -1, -1))

        def side(times: list[float]) -> float:
            if not times:
                return 0.0
            if not streamed:
                return sum(times)
            top = max(times)
            return top + (sum(times) - top) / batches

        sync = self.sync
        at = {m: i for i, b in enumerate(blocks) for m in b.members}

        def score(counts: tuple[int, ...]) -> float:
            t = [0.0] * len(counts)
            for i in order:
                c = counts[i]
                t[i] = sum(a[c] for a in arrays[i]) + side([t[j] for j in kids[i]])
            moved = 0.0
            if sync is not None:
                moved = sync.seconds(
                    roots, {sync.train: counts[at[sync.train]], sync.receiver: counts[at[sync.receiver]]}
                )
            return side([t[i] for i in roots_at]) + moved

        return score

    def lower_bound(self, shape: Shape, offload: bool, starts: dict[str, int]) -> float | None:
        """The compute seconds of `shape` arranged with each stage's first GPU at `starts` (a line of several GPU
        models), or None where memory does not fit."""
        if self._least is None:
            models = self.line.models
            self._least = (
                RangeMin([m.speed for m in models]),
                RangeMin([m.pcie_gb_s for m in models]),
                RangeMin([m.memory_gb or math.inf for m in models]),
            )
        speed, pcie, memory = self._least
        gpus = shape.gpus()
        swapping = shared(shape.roots) if offload else set()
        own = {}
        for name, c in gpus.items():
            lo, hi = starts[name], starts[name] + c
            seconds = self.seconds[name][c]
            assert seconds is not None, (name, c)  # a shape's counts are ones its stages take
            t = seconds * self.workload.reference_speed / speed(lo, hi)
            stage = self.stages[name]
            if name in swapping and stage.memory_gb:
                t += 2 * stage.memory_gb / pcie(lo, hi)
            own[name] = t
        blocks = shape.blocks()
        weakest = [
            memory(starts[b.members[0]], starts[b.members[0]] + c) for b, c in zip(blocks, shape.counts, strict=True)
        ]
        if not self._fits_blocks(blocks, _parents(blocks), offload, weakest):
            return None
        moved = self.sync.seconds(shape.roots, gpus) if self.sync is not None else 0.0
        return iteration_seconds(shape.roots, own, self.workload.batches, self.workload.streamed) + moved

    def _fits_blocks(self, blocks: list[Block], parent: list[int | None], offload: bool, weakest: list[float]) -> bool:
        """Memory: on every GPU the stages covering it fit (together, or each alone with offload): each block's
        members and its ancestors' within the least memory among its GPUs (`weakest`, GB; inf: unknown). A GPU of a
        block that a child also covers holds more, so checking each block over its whole range is exact."""
        need = {n: s.memory_gb for n, s in self.stages.items() if s.memory_gb}
        if not need:
            return True
        for i in range(len(blocks)):
            held = [need[m] for j in _ancestors(parent, i) for m in blocks[j].members if m in need]
            amount = (max(held) if offload else sum(held)) if held else 0.0
            if amount > weakest[i]:
                return False
        return True

    # --- arrangements ---------------------------------------------------------------------------------------

    def arrangements(self, shape: Shape) -> Iterator[dict[str, tuple[int, int]]]:
        """Each stage's [first, last + 1) on the line, for every order of sibling blocks; on a line of one kind of
        node packed from their parent's first GPU, else also after idle GPUs (a block may start at any GPU of a
        small line, at a change of node kind on a large one: so a block can take the nodes it runs fastest on)."""
        blocks = shape.blocks()
        index = {id(b): i for i, b in enumerate(blocks)}
        if self._start_list is None:
            allowed = self._starts()
            self._start_list = [] if allowed is None else [i for i, ok in enumerate(allowed) if ok]
        starts = None if self.line.uniform else self._start_list

        def place(group: tuple[Block, ...], lo: int, hi: int) -> Iterator[dict[str, tuple[int, int]]]:
            for order in _orders(group):
                yield from laid(order, lo, hi)

        def laid(order: tuple[Block, ...], lo: int, hi: int) -> Iterator[dict[str, tuple[int, int]]]:
            if not order:
                yield {}
                return
            b, rest = order[0], order[1:]
            c = shape.counts[index[id(b)]]
            room = hi - sum(shape.counts[index[id(o)]] for o in rest)
            if starts is None:
                options = [lo]
            else:
                later = starts[bisect.bisect_right(starts, lo) : bisect.bisect_right(starts, room - c)]
                options = [lo, *later] if lo <= room - c else []
            for start in options:
                mine = {m: (start, start + c) for m in b.members}
                for inner in place(b.children, start, start + c):
                    for after in laid(rest, start + c, hi):
                        yield {**mine, **inner, **after}

        yield from place(shape.roots, 0, len(self.line))

    def _starts(self) -> list[bool] | None:
        """Where a block may start after idle GPUs: None on a line of one kind of node (packed only)."""
        if self.line.uniform:
            return None
        n = len(self.line)
        if n <= EXHAUSTIVE_GPUS:
            return [True] * n
        ends = self.line.node_end
        out: list[bool] = []
        kind: tuple[str, int] | None = None
        for i, model in enumerate(self.line.models):
            if i == 0 or ends[i - 1] == i:  # a node's first GPU
                previous, kind = kind, (model.name, ends[i] - i)
                out.append(kind != previous)
            else:
                out.append(False)
        return out

    def unbroken(self, ranges: dict[str, tuple[int, int]]) -> str | None:
        """Why a range would split a model-parallel group or a process across nodes (or NVLink domains), else None."""
        for name, (lo, hi) in ranges.items():
            stage = self.stages[name]
            if stage.unit <= 1:
                continue
            ends = self.line.domain_end if stage.name in ("actor", "inference") else self.line.node_end
            for first in range(lo, hi, stage.unit):
                if first + stage.unit > ends[first]:
                    where = "NVLink domain" if ends is self.line.domain_end else "node"
                    return f"{name}'s group of {stage.unit} GPUs from line GPU {first} would span more than one {where}"
        return None


def _time(stage: Stage, c: int) -> float | None:
    return stage.curve.seconds(c) if c % stage.unit == 0 else None


def _parents(blocks: list[Block]) -> list[int | None]:
    """The index of each block's parent in `blocks` (DFS order), None for a root."""
    index = {id(b): i for i, b in enumerate(blocks)}
    out: list[int | None] = [None] * len(blocks)
    for i, b in enumerate(blocks):
        for c in b.children:
            out[index[id(c)]] = i
    return out


def _ancestors(parent: list[int | None], i: int) -> list[int]:
    out = [i]
    while (p := parent[out[-1]]) is not None:
        out.append(p)
    return out


def _orders(group: tuple[Block, ...]) -> list[tuple[Block, ...]]:
    return list(itertools.permutations(group)) if len(group) > 1 else [group]
