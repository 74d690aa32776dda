"""Accumulates placed workers and the device slots they occupy, then builds the Plan in one pass.

Why a builder: a worker's GPU fraction (1/k for k co-residents) and its bundle are only known once
every component has been placed, and a 4,096-node plan holds ~100k workers. So placement records
compact per-component blocks (one slot id per worker) and `finish` creates every Worker and Bundle
exactly once, without per-worker scans.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from itertools import chain, repeat
from operator import itemgetter
from typing import Protocol, TypeVar

from rlplace.model import ProcessShape
from rlplace.plan import (
    NO_ENV,
    NO_RESOURCES,
    Bundle,
    EffectiveSettings,
    GroupSummary,
    MixedGroup,
    Plan,
    PlanTopology,
    Worker,
)


@dataclass(slots=True)
class Block:
    """Workers of one component placed together: worker j has process rank `ranks[j]` (None: j),
    sits in slot `slots[j]` and was placed through `groups[j]` (or `group` for all)."""

    component: str
    slots: list[int]
    num_cpus: float
    group: str | None
    ranks: list[int] | None = None
    groups: list[str] | None = None
    env: list[dict[str, str]] | None = None  # per worker
    python: list[str | None] | None = None  # per worker
    hardware: list[dict[str, object] | None] | None = None
    #: per worker: every GPU of its node when it sees them without reserving any (RLinf semantics), else None
    node_gpus: list[tuple[int, ...] | None] | None = None


@dataclass(slots=True)
class Unpinned:
    """Workers left to Ray's scheduler (strategy default): no node, no bundle."""

    component: str
    count: int
    gpus_per_worker: float
    num_cpus: float


@dataclass(slots=True)
class InDriver:
    """Workers of a component that runs in the driver process (RLightning's `remote_<c>: false`): no node,
    no bundle, nothing reserved."""

    component: str
    count: int
    num_cpus: float


@dataclass
class PlanBuilder:
    """Slots are bundles: slot id == bundle index. A GPU slot is shared by every worker placed on the
    same (node, GPU set); a CPU slot belongs to whatever key the caller gives (a worker, a node)."""

    slot_of: dict[tuple, int] = field(default_factory=dict)
    slot_node: list[int] = field(default_factory=list)
    slot_gpus: list[tuple[int, ...]] = field(default_factory=list)
    slot_group: list[str | None] = field(default_factory=list)
    slot_resources: list[dict[str, float]] = field(default_factory=list)
    blocks: list[Block | Unpinned | InDriver] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[GroupSummary] = field(default_factory=list)
    process_shapes: dict[str, ProcessShape] = field(default_factory=dict)
    accelerators: dict[int, str] = field(default_factory=dict)  # node -> its accelerator resource, if not "GPU"
    topology: PlanTopology = field(default_factory=PlanTopology)
    split_groups: list[MixedGroup] = field(default_factory=list)
    _fraction: list[float] = field(default_factory=list)  # per slot: 1/k for k residents (GPU slots)
    _visible: list[tuple[int, ...] | None] = field(default_factory=list)  # per slot: GPUs of a spanning process
    _multi: bool = False  # has a slot of several GPUs been made? (only `slot` makes them)

    def slot(
        self,
        key: tuple,
        node_rank: int,
        gpus: tuple[int, ...],
        group: str | None,
        resources: dict[str, float] | None = None,
    ) -> int:
        """The id of the slot `key`, created on first use."""
        sid = self.slot_of.get(key)
        if sid is None:
            self._multi = self._multi or len(gpus) > 1
            sid = self.slot_of[key] = len(self.slot_node)
            self.slot_node.append(node_rank)
            self.slot_gpus.append(gpus)
            self.slot_group.append(group)
            self.slot_resources.append(resources or NO_RESOURCES)
        return sid

    def slots(
        self,
        keys: list[tuple],
        nodes: list[int],
        gpus: list[tuple[int, ...]],
        group: str | None,
        resources: list[dict[str, float]] | None = None,
    ) -> list[int]:
        """`slot` for many distinct keys at once: the ids of `keys`, the missing ones created in bulk, in
        the order given (key j: node `nodes[j]`, GPUs `gpus[j]`, custom `resources[j]`)."""
        ids = list(map(self.slot_of.get, keys, repeat(-1)))
        n_new = ids.count(-1)
        if not n_new:
            return ids
        new = range(len(self.slot_node), len(self.slot_node) + n_new)
        if n_new < len(keys):  # some exist already (another group covers these GPUs): create the others
            missing = [j for j, s in enumerate(ids) if s < 0]
            for j, s in zip(missing, new, strict=True):
                ids[j] = s
            keys, nodes, gpus = gather(keys, missing), gather(nodes, missing), gather(gpus, missing)
            resources = None if resources is None else gather(resources, missing)
        else:  # the usual first placement on these resources: all new, no per-key bookkeeping
            ids = list(new)
        self.slot_of.update(zip(keys, new, strict=True))
        self.new_slots(nodes, gpus, group, resources)
        return ids

    def new_slots(
        self,
        nodes: list[int],
        gpus: list[tuple[int, ...]],
        group: str | None,
        resources: list[dict[str, float]] | None = None,
    ) -> None:
        """Append one new slot per (node, GPUs), in bulk, without keys: the caller maps them (pools by
        pool-global index, `slots` by key)."""
        n = len(nodes)
        self.slot_node.extend(nodes)
        self.slot_gpus.extend(gpus)
        self.slot_group.extend([group] * n)
        self.slot_resources.extend(resources if resources is not None else [NO_RESOURCES] * n)

    def add_resource(self, slot: int, name: str, amount: float = 1.0) -> None:
        """Reserve `amount` of the custom resource `name` in `slot` too (a robot's unit resource). A new dict:
        slots without custom resources share one empty dict."""
        self.slot_resources[slot] = {**self.slot_resources[slot], name: amount}

    def add(self, block: Block | Unpinned | InDriver) -> None:
        """Record placed workers (created by `finish`, once every slot's residents are known)."""
        self.blocks.append(block)

    def _residents(self) -> tuple[list[int], list[float]]:
        """Workers and their summed CPUs per slot, counted once at the end (at C speed when, as usual,
        every component asks the same CPUs per worker)."""
        blocks = [b for b in self.blocks if isinstance(b, Block)]
        n = len(self.slot_node)
        counts = Counter(chain.from_iterable(b.slots for b in blocks))
        count = [counts[s] for s in range(n)]
        cpus_per_worker = {b.num_cpus for b in blocks}
        if len(cpus_per_worker) == 1:
            c = cpus_per_worker.pop()
            return count, [k * c for k in count]
        cpus = [0.0] * n
        for b in blocks:
            for s in b.slots:
                cpus[s] += b.num_cpus
        return count, cpus

    def finish(self, settings: EffectiveSettings, uses_placement_groups: bool = True) -> Plan:
        spanning = self._spanning()
        count, cpus = self._residents()
        bundle_gpus = self.slot_gpus
        if spanning:
            bundle_gpus = [() if s in spanning else g for s, g in enumerate(self.slot_gpus)]
        sharers = self._sharers(count, spanning)
        n = len(self.slot_node)
        accelerators = (
            [self.accelerators.get(a, "GPU") for a in self.slot_node] if self.accelerators else repeat("GPU", n)
        )
        columns = (range(n), self.slot_node, bundle_gpus, cpus, self.slot_resources, self.slot_group, accelerators)
        bundles = tuple(map(_new_bundle, zip(*columns, sharers, repeat(0, n), strict=True)))
        self._fraction = [1.0 / k if g and k else 0.0 for k, g in zip(sharers, bundle_gpus, strict=True)]
        workers: list[Worker] = []
        at_slots = _SlotColumns(self)
        for block in self.blocks:
            if isinstance(block, Unpinned):
                workers.extend(_unpinned(block))
            elif isinstance(block, InDriver):
                workers.extend(_in_driver(block))
            else:
                workers.extend(self._pinned(block, at_slots(block.slots), uses_placement_groups))
        return Plan(
            workers=tuple(workers),
            bundles=bundles if uses_placement_groups else (),
            settings=settings,
            groups=tuple(self.groups),
            warnings=tuple(self.warnings),
            uses_placement_groups=uses_placement_groups,
            notes=tuple(self.notes),
            process_shapes=dict(self.process_shapes),
            topology=self.topology,
            split_groups=tuple(self.split_groups),
        )

    def _spanning(self) -> set[int]:
        """Slots of processes spanning several GPUs that other processes also use (RLinf's rollout with tensor
        parallelism beside single-GPU actors). Ray cannot give an actor shares of several GPUs, so such a
        process asks Ray for no GPU: its slot becomes a CPU bundle on the node, each of its GPUs stays
        reserved once, in that GPU's own bundle (created here if no other process has one), and the process
        sees its GPUs through `Worker.visible_gpus`. Only plans with multi-GPU slots pay for the scan."""
        gpus, nodes = self.slot_gpus, self.slot_node
        self._visible = []
        if not self._multi:
            return set()
        multi = [s for s, g in enumerate(gpus) if len(g) > 1]
        holders: dict[tuple[int, int], list[int]] = {}
        for s, g in enumerate(gpus):
            for x in g:
                holders.setdefault((nodes[s], x), []).append(s)
        spanning = {s for s in multi if any(len(holders[(nodes[s], x)]) > 1 for x in gpus[s])}
        for s in sorted(spanning):
            for x in gpus[s]:
                if all(len(gpus[h]) > 1 for h in holders[(nodes[s], x)]):
                    self.slot((nodes[s], (x,)), nodes[s], (x,), self.slot_group[s])
        self._visible = [gpus[s] if s in spanning else None for s in range(len(nodes))]
        return spanning

    def _sharers(self, count: list[int], spanning: set[int]) -> list[int]:
        """Processes on each slot's GPU: its residents, plus those of spanning processes covering that GPU."""
        if not spanning:
            return count
        extra: Counter = Counter()
        for s in spanning:
            for x in self.slot_gpus[s]:
                extra[(self.slot_node[s], x)] += count[s]
        out = list(count)
        for s, g in enumerate(self.slot_gpus):
            if len(g) == 1 and (self.slot_node[s], g[0]) in extra:
                out[s] += extra[(self.slot_node[s], g[0])]
        return out

    def _pinned(self, b: Block, at: _Columns, with_bundles: bool) -> list[Worker]:
        """The block's workers; one map over the columns of its slots (the hot path at 100k workers)."""
        slots = b.slots
        n = len(slots)
        nodes, gpus, frac, visible, local = at
        if b.node_gpus is not None:
            visible = b.node_gpus if visible is None else [v or s for v, s in zip(b.node_gpus, visible, strict=True)]
        columns: list[Iterable[object]] = [
            repeat(b.component, n),
            b.ranks if b.ranks is not None else range(n),
            repeat(n, n),
            nodes,
            gpus,
            frac,
            repeat(b.num_cpus, n),
            b.groups if b.groups is not None else repeat(b.group, n),
            slots if with_bundles else repeat(None, n),
            local,
            b.env if b.env is not None else repeat(NO_ENV, n),
            b.python if b.python is not None else repeat(None, n),
            b.hardware if b.hardware is not None else repeat(None, n),
        ]
        sees = [v is not None for v in b.node_gpus] if b.node_gpus is not None else repeat(False, n)
        columns += [sees, visible if visible is not None else repeat(None, n), repeat(False, n), repeat(None, n)]
        return list(map(_new_worker, zip(*columns, strict=True)))


#: A Worker (Bundle) from a tuple of all its fields, without a Python-level `__new__` (C speed; see `Worker`).
_new_worker = partial(tuple.__new__, Worker)
_new_bundle = partial(tuple.__new__, Bundle)

_Columns = tuple[list[int], list[tuple[int, ...]], list[float], list[tuple[int, ...] | None] | None, list[int]]


class _SlotColumns:
    """Per worker of a block: the node, GPUs, GPU fraction, visible GPUs and local rank of its slot.

    Remembers the last block's: colocated components usually sit on the same slots in the same order (train,
    eval and env on every GPU), and gathering five columns of 32k entries three times cost 8% of a 4,096 x 8
    colocate plan."""

    def __init__(self, builder: PlanBuilder) -> None:
        self._builder = builder
        self._slots: list[int] | None = None
        self._columns: _Columns | None = None

    def __call__(self, slots: list[int]) -> _Columns:
        if self._columns is None or slots != self._slots:
            b = self._builder
            nodes = gather(b.slot_node, slots)
            visible = gather(b._visible, slots) if b._visible else None
            gpus, fraction = gather(b.slot_gpus, slots), gather(b._fraction, slots)
            self._slots, self._columns = slots, (nodes, gpus, fraction, visible, _local_ranks(nodes))
        return self._columns


def gpu_columns(nodes: list[int], counts: list[int]) -> tuple[list[int], list[tuple[int, ...]]]:
    """(node rank, (local GPU,)) of every GPU of `nodes`, node by node, node i having `counts[i]` GPUs.

    Built per node, not per GPU: each node's run is replicated at C speed (chain of repeats), and the
    one-GPU tuples are shared by every node with as many GPUs (a 4,096 x 8 plan would otherwise hold 32k
    equal tuples, each scanned by the garbage collector)."""
    return list(chain.from_iterable(map(repeat, nodes, counts))), list(chain.from_iterable(map(_single_gpus, counts)))


@cache
def _single_gpus(n: int) -> tuple[tuple[int], ...]:
    """``((0,), (1,), ..., (n - 1,))``, built once per GPU count."""
    return tuple((g,) for g in range(n))


Key = TypeVar("Key")
Value = TypeVar("Value")
_KeyIn = TypeVar("_KeyIn", contravariant=True)
_ValueOut = TypeVar("_ValueOut", covariant=True)


class Indexed(Protocol[_KeyIn, _ValueOut]):
    """What `gather` reads from: a list by index, a dict by key."""

    def __getitem__(self, key: _KeyIn, /) -> _ValueOut: ...


def gather(seq: Indexed[Key, Value], idx: Sequence[Key]) -> list[Value]:
    """``[seq[i] for i in idx]``, at C speed (itemgetter) for the long lists of big plans."""
    if len(idx) < 2:
        return [seq[i] for i in idx]
    return list(itemgetter(*idx)(seq))


def _local_ranks(nodes: list[int]) -> list[int]:
    """Index of each entry among the entries of the same node; per node run when nodes come sorted."""
    if nodes == sorted(nodes):  # insertion order of the Counter == node order here
        return list(chain.from_iterable(map(range, Counter(nodes).values())))
    seen: dict[int, int] = {}
    local = []
    for node in nodes:
        k = seen.get(node, 0)
        seen[node] = k + 1
        local.append(k)
    return local


def _in_driver(b: InDriver) -> list[Worker]:
    return [
        Worker(b.component, r, b.count, None, (), 0.0, b.num_cpus, None, None, 0, NO_ENV, None, None, in_driver=True)
        for r in range(b.count)
    ]


def _unpinned(b: Unpinned) -> list[Worker]:
    return [
        Worker(b.component, r, b.count, None, (), b.gpus_per_worker, b.num_cpus, None, None, 0, NO_ENV, None, None)
        for r in range(b.count)
    ]
