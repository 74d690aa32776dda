"""One resize step (planner/resize.py): the plan being changed, seats and free capacity updated as workers come
and go, and what the step produced (`Resize`).

A growth tries the places `planner.growth` lists, first a free seat of a bundle the job holds there, else a new
bundle on the free capacity; a shrink takes workers out with their followers. `Step.finish` renumbers each
changed component 0..n-1 (survivors keep their actor names), releases the placement groups (node, reservation)
that hold no worker any more and builds the new plan once.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain

from rlplace.errors import PlanError
from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.plan import NO_ENV, Bundle, GroupSummary, Plan, Worker
from rlplace.planner.builder import gpu_columns
from rlplace.planner.capacity import EPS, NodeFree
from rlplace.planner.followers import followers
from rlplace.planner.growth import Place, places
from rlplace.planner.ranges import format_ranks
from rlplace.planner.settings import buffer_cpus

_SHOWN = 8  # nodes a PlanError describes


@dataclass(frozen=True)
class SizeChange:
    """One component's part of a resize step."""

    component: str
    old_size: int
    new_size: int
    #: The new workers, as in the new plan (ranks old_size.., node, GPUs, share, bundle, env, interpreter, name).
    added: tuple[Worker, ...]
    #: The workers taken out, as they were in the old plan (their old ranks and names).
    removed: tuple[Worker, ...]
    #: Old rank -> new rank of every worker kept (identity where nothing moved down).
    renumbered: dict[int, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Resize:
    """The result of one step: the new plan, per component what changed, and the bundles to reserve and free."""

    plan: Plan
    changes: tuple[SizeChange, ...]  # the component asked for first, then those that followed it
    #: New bundles, all of one `reservation` id: reserve them as one new placement group per node.
    reserve: tuple[Bundle, ...] = ()
    #: Bundles that left the plan: whole placement groups (node, reservation) that hold no worker any more.
    release: tuple[Bundle, ...] = ()

    def change(self, component: str) -> SizeChange | None:
        return next((c for c in self.changes if c.component == component), None)

    def reserve_by_node(self) -> dict[int, tuple[Bundle, ...]]:
        return _by_node(self.reserve)

    def release_by_node(self) -> dict[int, tuple[Bundle, ...]]:
        return _by_node(self.release)


def _by_node(bundles: Iterable[Bundle]) -> dict[int, tuple[Bundle, ...]]:
    out: dict[int, list[Bundle]] = {}
    for b in bundles:
        out.setdefault(b.node_rank, []).append(b)
    return {n: tuple(bs) for n, bs in sorted(out.items())}


@dataclass
class _Free:
    gpus: set[int]
    cpus: float
    accelerator: str
    num_gpus: int


@dataclass(frozen=True)
class _New:
    """A bundle to make for a place: its seats and CPUs."""

    seats: int
    cpus: float


_NO_BUNDLE = _New(0, 0.0)  # a worker pinned by node affinity (no placement groups): nothing to reserve


class Step:
    """A plan being changed by one resize step: worker lists, seats and free capacity, updated as workers come
    and go; `finish` builds the new plan once."""

    def __init__(self, plan: Plan, free: Mapping[int, NodeFree] | None = None):
        self.plan = plan
        self.workers: dict[str, list[Worker]] = {c: plan.by_component(c) for c in plan.components}
        self.bundles: dict[int, Bundle] = {b.index: b for b in plan.bundles}
        self.residents: Counter[int] = Counter(w.bundle for w in plan.workers if w.bundle is not None)
        self.cpus_in: dict[int, float] = defaultdict(float)
        for w in plan.workers:
            if w.bundle is not None:
                self.cpus_in[w.bundle] += w.num_cpus
        # spanning processes (RLinf's collocated rollout) hold a seat in each single-GPU bundle they cover
        self.spanning = Counter(
            (w.node_rank, g) for w in plan.workers if w.gpus and w.visible_gpus is not None for g in w.gpus
        )
        self.at_gpus = {(b.node_rank, b.gpus): b.index for b in plan.bundles if b.gpus}
        self.covered = {(b.node_rank, g) for b in plan.bundles for g in b.gpus}
        self.cpu_bundles: dict[int, list[int]] = defaultdict(list)
        for b in plan.bundles:
            if not b.gpus and not b.resources:
                self.cpu_bundles[b.node_rank].append(b.index)
        self.count_at = Counter((w.component, w.node_rank, w.gpus) for w in plan.workers if w.node_rank is not None)
        self.groups = {g.name: dataclasses.replace(g, components=dict(g.components)) for g in plan.groups}
        self.pool_nodes = {n: g.name for g in plan.groups for n in g.node_ranks}
        self.free = {r: _Free(set(f.gpus), f.cpus, f.accelerator, f.num_gpus) for r, f in (free or {}).items()}
        self.free_view: Mapping[int, NodeFree] = free or {}
        self.added: dict[str, list[Worker]] = defaultdict(list)
        self.removed: dict[str, list[Worker]] = defaultdict(list)
        self.touched: list[str] = []
        self.new: list[Bundle] = []
        self.next_index = self.first_new = max(self.bundles, default=-1) + 1
        self.reservation = max((b.reservation for b in plan.bundles), default=0) + 1

    # -- growing ----------------------------------------------------------------------------------------

    def grow(self, spec: JobSpec, live: Inventory, c: str, k: int, partial: bool) -> None:
        if k <= 0:
            return
        current = self.workers[c]
        sample = current[-1] if current else None
        cpus = sample.num_cpus if sample is not None else _cpus(spec, c)
        if sample is not None and sample.in_driver:
            for _ in range(k):
                self._add(c, self._unplaced(c, 0.0, cpus, in_driver=True))
            return
        if sample is not None and sample.node_rank is None:
            self._grow_unpinned(c, k, cpus, partial)
            return
        along = [f for f in followers(self.plan, c) if f != "buffer"]
        along_cpus = [self.workers[f][-1].num_cpus for f in along]
        shards = "buffer" in followers(self.plan, c)
        shard_cpus = self.workers["buffer"][-1].num_cpus if shards else 0.0
        candidates, where = places(spec, self.plan, live, self.free_view, c)
        placed, it = 0, iter(candidates)
        place = next(it, None)
        while placed < k and place is not None:
            extra = shard_cpus if shards and not self._has_shard(place.node) else 0.0
            fit = self._fit([c, *along], place, [cpus, *along_cpus], extra)
            if fit is None:
                place = next(it, None)
                continue
            bundle = self._reserve(place, fit)
            for name, n_cpus in zip([c, *along], [cpus, *along_cpus], strict=True):
                self._add(name, self._worker(name, place, bundle, n_cpus))
            if extra:
                self._add_shard(place.node, shard_cpus)
            placed += 1
        if placed < k and not partial:
            raise PlanError(self._missing(c, k - placed, k, where, candidates, cpus))

    def _grow_unpinned(self, c: str, k: int, cpus: float, partial: bool) -> None:
        """Strategy default: Ray places the workers; the demand must fit the live nodes' GPUs, as when planned."""
        g = self.workers[c][-1].gpu_fraction
        total = sum(f.num_gpus for f in self.free.values())
        biggest = max((f.num_gpus for f in self.free.values()), default=0)
        used = sum(w.num_gpus for ws in self.workers.values() for w in ws)
        fits = k if g <= 0 else max(0, min(k, int((total - used) / g + EPS)))
        if g > biggest:
            fits = 0
        if fits < k and not partial:
            raise PlanError(
                f"{c}: {k} more worker(s) of {g:g} GPU each do not fit: the job's workers ask for {used:g} of the "
                f"{total} GPU(s) of the live nodes ({len(self.free)} node(s), the largest with {biggest})"
            )
        for _ in range(fits):
            self._add(c, self._unplaced(c, g, cpus, in_driver=False))

    def _has_shard(self, node: int) -> bool:
        return any(w.node_rank == node for w in self.workers.get("buffer", ()))

    def _add_shard(self, node: int, cpus: float) -> None:
        group = self.workers["buffer"][-1].group
        place = Place(node, (), group)
        fit = self._fit(["buffer"], place, [cpus], 0.0)
        assert fit is not None  # the train worker's fit kept the shard's CPUs free
        self._add("buffer", self._worker("buffer", place, self._reserve(place, fit), cpus))

    def _fit(self, comps: list[str], place: Place, cpus: list[float], extra_cpus: float) -> int | _New | None:
        """How `comps` (a worker and those sharing its device with it) sit at `place`: an existing bundle's index,
        a bundle to make, or None when they do not fit there. `extra_cpus` must stay free on the node."""
        free = self.free.get(place.node)
        if free is None or any(self.count_at[(c, place.node, place.gpus)] >= place.cap for c in comps):
            return None
        if place.pool is not None and self.pool_nodes.get(place.node, place.pool) != place.pool:
            return None  # another pool took the node in this step (pools never share a node)
        total = sum(cpus)
        if not self.plan.uses_placement_groups:
            return _NO_BUNDLE if free.cpus >= total + extra_cpus - EPS else None
        if place.gpus:
            index = self.at_gpus.get((place.node, place.gpus))
            if index is not None:  # beyond the range, only a bundle made in this step
                usable = (not place.fresh_only or index >= self.first_new) and self._room(index, len(comps), total)
                return index if usable and free.cpus >= extra_cpus - EPS else None
            if any((place.node, g) in self.covered for g in place.gpus) or not free.gpus.issuperset(place.gpus):
                return None
        elif not place.fresh_only:
            index = next((i for i in self.cpu_bundles[place.node] if self._room(i, len(comps), total)), None)
            if index is not None and free.cpus >= extra_cpus - EPS:
                return index
        reserve = place.seats * total
        if free.cpus < reserve + extra_cpus - EPS:
            return None
        return _New(place.seats * len(comps), reserve)

    def _room(self, index: int, need: int, cpus: float) -> bool:
        """Whether bundle `index` has `need` free seats and `cpus` CPUs its residents do not use."""
        b = self.bundles[index]
        if b.node_rank not in self.free:
            return False  # on a node that is down
        taken = self.residents[index] + (self.spanning[(b.node_rank, b.gpus[0])] if len(b.gpus) == 1 else 0)
        return b.seats - taken >= need and b.num_cpus - self.cpus_in[index] >= cpus - EPS

    def _reserve(self, place: Place, fit: int | _New) -> int | None:
        """The bundle index the worker(s) sit in, making the bundle when `fit` says so."""
        if isinstance(fit, int):
            return fit
        if fit is _NO_BUNDLE:
            return None
        free = self.free[place.node]
        b = Bundle(
            self.next_index,
            place.node,
            place.gpus,
            fit.cpus,
            {},
            place.group,
            free.accelerator,
            fit.seats,
            self.reservation,
        )
        self.next_index += 1
        self.bundles[b.index] = b
        self.new.append(b)
        free.gpus.difference_update(place.gpus)
        free.cpus -= fit.cpus
        self.covered.update((place.node, g) for g in place.gpus)
        if place.gpus:
            self.at_gpus[(place.node, place.gpus)] = b.index
        else:
            self.cpu_bundles[place.node].append(b.index)
        return b.index

    def _worker(self, c: str, place: Place, bundle: int | None, cpus: float) -> Worker:
        b = self.bundles.get(bundle) if bundle is not None else None
        if b is None:  # pinned by node affinity: its CPUs come off the node
            self.free[place.node].cpus -= cpus
        self._record_range(c, place)
        return Worker(
            c,
            len(self.workers[c]),
            0,  # set by finish
            place.node,
            place.gpus,
            1.0 / b.seats if b is not None and b.gpus else 0.0,
            cpus,
            place.group,
            bundle,
            0,  # set by finish
            place.env or NO_ENV,
            place.python,
            None,
            place.visible is not None,
            place.visible,
            False,
            self._name(c, len(self.workers[c])),
        )

    def _unplaced(self, c: str, gpus: float, cpus: float, *, in_driver: bool) -> Worker:
        """A worker without a node: in the driver, or left to Ray's scheduler (requesting `gpus`)."""
        rank = len(self.workers[c])
        return Worker(c, rank, 0, None, (), gpus, cpus, None, None, in_driver=in_driver, actor_name=self._name(c, rank))

    def _record_range(self, c: str, place: Place) -> None:
        """A pool records the GPUs its component uses (extended by a node new to the pool)."""
        pool = self.groups.get(place.pool) if place.pool is not None else None
        if pool is None or not place.gpus:
            return
        if place.node not in pool.node_ranks:
            pool = GroupSummary(
                pool.name,
                (*pool.node_ranks, place.node),
                (*pool.gpus_per_node, self.free[place.node].num_gpus),
                dict(pool.components),
            )
            self.groups[pool.name] = pool
            self.pool_nodes[place.node] = pool.name
        at = pool.node_ranks.index(place.node)
        base = sum(pool.gpus_per_node[:at])  # pool-global index of the node's GPU 0
        indices = [base + g for g in place.gpus]
        have = pool.components.get(c, ())
        new = tuple(i for i in indices if i not in have)
        if new:
            pool.components[c] = (*have, *new)

    def _name(self, c: str, rank: int) -> str | None:
        """None (the name follows the rank) unless a renumbered worker holds that name already."""
        taken = {w.name for w in self.workers[c]}
        base = f"rlplace:{c}:{rank}"
        if base not in taken:
            return None
        return next(f"{base}.{n}" for n in range(1, len(taken) + 2) if f"{base}.{n}" not in taken)

    def _add(self, c: str, w: Worker) -> None:
        self.workers[c].append(w)
        self.added[c].append(w)
        self._touch(c)
        if w.bundle is not None:
            self.residents[w.bundle] += 1
            self.cpus_in[w.bundle] += w.num_cpus
        if w.node_rank is not None:
            self.count_at[(c, w.node_rank, w.gpus)] += 1

    def _touch(self, c: str) -> None:
        if c not in self.touched:
            self.touched.append(c)

    def _missing(self, c: str, missing: int, k: int, where: str, candidates: list[Place], cpus: float) -> str:
        nodes = list(dict.fromkeys(p.node for p in candidates))
        each = _need_text(self.workers[c][0] if self.workers[c] else None, cpus)
        state = "; ".join(self._node_text(n) for n in nodes[:_SHOWN]) or "no node to use"
        if len(nodes) > _SHOWN:
            state += f"; and {len(nodes) - _SHOWN} more node(s)"
        return f"{c}: {missing} of {k} more worker(s) do not fit ({each}) in {where}: {state}"

    def _node_text(self, node: int) -> str:
        f = self.free.get(node)
        if f is None:
            return f"node {node}: down"
        gpus = f"GPUs {format_ranks(sorted(f.gpus))} free" if f.gpus else f"no free GPU ({f.num_gpus} held by the job)"
        return f"node {node}: {gpus}, {f.cpus:g} CPU(s) free"

    # -- shrinking ------------------------------------------------------------------------------------------

    def shrink(self, gone: Mapping[str, set[int]]) -> None:
        """Remove the named ranks of each component, and the followers that go with them."""
        for c, ranks in gone.items():
            self._remove(c, ranks)
            if "env" in followers(self.plan, c):
                self._remove("env", ranks)
        if "train" in gone and "buffer" in followers(self.plan, "train"):
            held = {w.node_rank for w in self.workers["train"]}
            self._remove("buffer", {w.rank for w in self.workers["buffer"] if w.node_rank not in held})
        r = {c: self.plan.elastic.get(c) for c in gone}
        low = [
            f"{c} would keep {len(self.workers[c])} (min {x.min})"
            for c, x in r.items()
            if x and len(self.workers[c]) < x.min
        ]
        if low:
            raise PlanError(f"cannot shrink below the elastic minimum: {'; '.join(low)} (cluster.elastic)")

    def _remove(self, c: str, ranks: set[int]) -> None:
        out = [w for w in self.workers[c] if w.rank in ranks]
        if not out:
            return
        self.workers[c] = [w for w in self.workers[c] if w.rank not in ranks]
        self.removed[c].extend(out)
        self._touch(c)
        for w in out:
            if w.bundle is not None:
                self.residents[w.bundle] -= 1
                self.cpus_in[w.bundle] -= w.num_cpus
            if w.node_rank is not None:
                self.count_at[(c, w.node_rank, w.gpus)] -= 1

    def _released(self) -> list[Bundle]:
        """Bundles of placement groups (node, reservation) that no longer hold a worker."""
        held = [self.bundles[w.bundle] for w in chain.from_iterable(self.removed.values()) if w.bundle is not None]
        units = {(b.node_rank, b.reservation) for b in held}
        out = []
        for unit in sorted(units):
            members = [b for b in self.bundles.values() if (b.node_rank, b.reservation) == unit]
            if all(self.residents[b.index] == 0 and not self._spanned(b) for b in members):
                out.extend(members)
        return out

    def _spanned(self, b: Bundle) -> bool:
        return len(b.gpus) == 1 and self.spanning[(b.node_rank, b.gpus[0])] > 0

    # -- the new plan -------------------------------------------------------------------------------------------

    def finish(self) -> Resize:
        released = self._released()
        gone = {b.index for b in released}
        changes = []
        for c in self.touched:
            before = self.plan.by_component(c)
            kept, renumbered = self._renumber(c)
            added = tuple(kept[len(kept) - len(self.added[c]) :]) if self.added[c] else ()  # appended last
            changes.append(SizeChange(c, len(before), len(kept), added, tuple(self.removed[c]), renumbered))
        bundles = tuple(b for i, b in sorted(self.bundles.items()) if i not in gone)
        if released and self.plan.settings.mode == "auto" and self.plan.settings.dialect == "pools":
            self._trim_pools(bundles)
        settings = self.plan.settings
        if "buffer" in self.touched:
            settings = dataclasses.replace(settings, buffer_worker_num=len(self.workers["buffer"]))
        plan = dataclasses.replace(
            self.plan,
            workers=tuple(chain.from_iterable(self.workers.values())),
            bundles=bundles if self.plan.uses_placement_groups else (),
            groups=tuple(self.groups[g.name] for g in self.plan.groups),
            settings=settings,
        )
        return Resize(plan, tuple(changes), tuple(self.new), tuple(released))

    def _trim_pools(self, bundles: tuple[Bundle, ...]) -> None:
        """Auto pools drop what a release left empty at their end (nodes, then range entries), so that shrinking
        undoes the growth before it; manual pools stay as written."""
        held = {(b.node_rank, g) for b in bundles for g in b.gpus}
        busy = {b.node_rank for b in bundles}
        for name, pool in self.groups.items():
            nodes, counts = list(pool.node_ranks), list(pool.gpus_per_node)
            while len(nodes) > 1 and nodes[-1] not in busy:
                nodes.pop()
                counts.pop()
            at, local = gpu_columns(nodes, counts)
            ranges = {}
            for c, rng in pool.components.items():
                keep = list(rng)
                while keep and (keep[-1] >= len(at) or (at[keep[-1]], local[keep[-1]][0]) not in held):
                    keep.pop()
                ranges[c] = tuple(keep)
            self.groups[name] = GroupSummary(name, tuple(nodes), tuple(counts), ranges)

    def _renumber(self, c: str) -> tuple[list[Worker], dict[int, int]]:
        """The component's workers with ranks 0..n-1 in rank order, world size n and local ranks per node;
        (workers, old rank -> new rank of those that were there before the step)."""
        ws = self.workers[c]
        n = len(ws)
        fresh = {id(w) for w in self.added[c]}
        local: Counter[int] = Counter()
        out, renumbered = [], {}
        for i, w in enumerate(ws):
            lr = local[w.node_rank] if w.node_rank is not None else 0
            if w.node_rank is not None:
                local[w.node_rank] += 1
            name = w.actor_name if i == w.rank else (w.actor_name or w.name)
            if id(w) not in fresh:
                renumbered[w.rank] = i
            out.append(w._replace(rank=i, world_size=n, local_rank=lr, actor_name=name))
        self.workers[c] = out
        return out, renumbered


def _cpus(spec: JobSpec, c: str) -> float:
    if c == "buffer":
        return buffer_cpus(spec)
    comp = spec.component(c)
    return comp.cpus_per_worker if comp is not None else 1.0


def _need_text(w: Worker | None, cpus: float) -> str:
    if w is None or w.node_rank is None:
        return f"{cpus:g} CPU(s) each"
    if not w.gpus:
        return f"{cpus:g} CPU(s) each, no GPU"
    if len(w.gpus) > 1:
        return f"{len(w.gpus)} GPUs of one node and {cpus:g} CPU(s) each"
    return (
        f"a {w.gpu_fraction:g} share of a GPU and {cpus:g} CPU(s) each"
        if w.gpu_fraction < 1
        else f"1 GPU and {cpus:g} CPU(s) each"
    )
