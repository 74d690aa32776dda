"""Pools (the `resource_pool` dialect): bind each pool to nodes, then pack counted workers onto the
pool-global GPU indices of each component's range.

Auto mode builds the same `Pool` objects (see `auto.py`), so manual and auto plans go through one
packing routine, and an exported auto plan re-plans in manual mode to the identical placement.

Node binding rules (docs/planner.md, "Manual mode: resource pools"); pools never share a node, and a pool uses local
GPUs 0..num_gpus-1 of each of its nodes:
- with `node_ids`: the named nodes, `num_gpus[i]` GPUs on node i;
- without `node_ids`: the next `num_node` nodes with GPUs that no pool has taken, in rank order;
  they must have equal GPU counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rlplace.errors import ConfigError, PlanError, Problem
from rlplace.inventory import Inventory
from rlplace.model import JobSpec, NodeGroupSpec
from rlplace.plan import GroupSummary
from rlplace.planner.builder import Block, PlanBuilder, gather, gpu_columns
from rlplace.planner.ranges import format_ranks, idle_by_node
from rlplace.planner.settings import Counted

EPS = 1e-9
Binding = tuple[list[int], list[int]]  # node ranks, GPUs per node


@dataclass
class Pool:
    """A pool bound to nodes: pool-global GPU index i is local GPU `gpu_of(i)` of node `node_of(i)`."""

    name: str
    nodes: list[int]
    num_gpus: list[int]  # the pool's GPUs on each node
    ranges: dict[str, list[int]] = field(default_factory=dict)  # component -> pool-global GPU indices
    paths: dict[str, str] = field(default_factory=dict)  # component -> key path, for messages
    _flat: tuple[list[int], list[tuple[int, ...]]] | None = None
    _slot: list[int] | None = None  # pool-global index -> slot id (-1: no worker yet)
    _multi: dict[int, int] = field(default_factory=dict)  # index -> slot of a multi-GPU worker owning it

    @property
    def size(self) -> int:
        return len(self.flat()[0])

    def flat(self) -> tuple[list[int], list[tuple[int, ...]]]:
        """(node rank, (local GPU,)) of every pool-global index, built once."""
        if self._flat is None:
            self._flat = gpu_columns(self.nodes, self.num_gpus)
        return self._flat

    def summary(self) -> GroupSummary:
        return GroupSummary(
            self.name,
            tuple(self.nodes),
            tuple(self.num_gpus),
            {c: tuple(r) for c, r in self.ranges.items()},
        )


def bind_manual_pools(spec: JobSpec, inventory: Inventory) -> list[Pool]:
    """Resolve every `resource_pool` entry to nodes of the inventory, with the component ranges."""
    pools = list(spec.node_groups)
    bound: dict[str, Binding] = {}
    owner: dict[int, str] = {}
    for g in pools:
        if g.node_ids is not None:
            bound[g.label] = _bind_named(g, inventory, owner)
    taken = set(owner)
    free = [n.rank for n in inventory.nodes if n.num_gpus > 0 and n.rank not in taken]
    cursor = 0
    out = []
    for g in pools:
        if g.label not in bound:
            bound[g.label] = _bind_next(g, inventory, free, cursor)
            cursor += len(bound[g.label][0])
        nodes, num = bound[g.label]
        out.append(Pool(g.label, nodes, num))
    by_name = {p.name: p for p in out}
    for c in spec.components:
        if c.placement is None:
            continue
        pool = by_name[c.placement.groups[0]]
        ranks: list[int] = []
        size = pool.size
        for seg in c.placement.segments:
            ranks.extend(range(size) if seg.resources is None else seg.resources)
        if ranks and (min(ranks) < 0 or max(ranks) >= size):
            bad = next(r for r in ranks if not 0 <= r < size)
            raise ConfigError(
                Problem(
                    path=c.path or f"resource_pool.{pool.name}.{c.name}",
                    value=format_ranks(ranks),
                    file=spec.source,
                    message=f"GPU index {bad} is outside pool {pool.name}, whose pool-global GPU indices are "
                    f"0-{pool.size - 1} ({len(pool.nodes)} node(s), num_gpus {_gpus_text(pool.num_gpus)})",
                )
            )
        pool.ranges[c.name] = ranks
        pool.paths[c.name] = c.path
    return out


def _gpus_text(num: list[int]) -> str:
    return str(num[0]) if len(set(num)) == 1 else str(num)


def _declared(g: NodeGroupSpec, inventory: Inventory) -> tuple[int, ...]:
    if g.gpus_per_node is not None:
        return g.gpus_per_node
    return tuple(inventory.node(r).num_gpus if r < len(inventory) else 0 for r in g.node_ranks)


def _bind_named(g: NodeGroupSpec, inventory: Inventory, owner: dict[int, str]) -> Binding:
    declared = _declared(g, inventory)
    ids = g.node_ids or ()
    if len(ids) != len(declared):
        raise ConfigError(
            Problem(
                path=f"{g.path or g.label}.node_ids",
                value=list(ids),
                message=f"pool {g.label} names {len(ids)} node(s) but num_gpus lists {len(declared)}; "
                "give one num_gpus entry per node id",
            )
        )
    nodes = []
    for node_id, want in zip(ids, declared, strict=True):
        rank = _resolve_node_id(node_id, inventory, g)
        if rank in owner:
            raise PlanError(f"pool {g.label}: node_ids entry {node_id!r} is node {rank}, already in pool {owner[rank]}")
        have = inventory.node(rank).num_gpus
        if want > have:
            raise PlanError(f"pool {g.label}: node {rank} ({node_id!r}) has {have} GPU(s), the pool wants {want}")
        owner[rank] = g.label
        nodes.append(rank)
    return nodes, list(declared)


def _resolve_node_id(node_id: int | str, inventory: Inventory, g: NodeGroupSpec) -> int:
    """A node id is a node rank, or a live node's Ray id, address or hostname label."""
    if isinstance(node_id, int) or (isinstance(node_id, str) and node_id.isdigit()):
        rank = int(node_id)
        if rank < len(inventory):
            return rank
    else:
        for n in inventory.nodes:
            if node_id in (n.node_id, n.address) or node_id in n.labels.values():
                return n.rank
    raise PlanError(
        f"pool {g.label}: node_ids entry {node_id!r} matches no node of the inventory "
        f"(node ranks 0-{len(inventory) - 1}, or a node's Ray id / address)"
    )


def _bind_next(g: NodeGroupSpec, inventory: Inventory, free: list[int], cursor: int) -> Binding:
    declared = _declared(g, inventory)
    nodes = free[cursor : cursor + len(declared)]
    if len(nodes) < len(declared):
        raise PlanError(
            f"pool {g.label} needs {len(declared)} node(s) with GPUs (num_node: {len(declared)}) but only "
            f"{len(nodes)} {'is' if len(nodes) == 1 else 'are'} left after earlier pools "
            f"(GPU nodes {format_ranks(free) or 'none'}; earlier pools took {format_ranks(free[:cursor]) or 'none'})"
        )
    counts = [inventory.node(n).num_gpus for n in nodes]
    if len(set(counts)) > 1:
        raise PlanError(
            f"pool {g.label} takes nodes {format_ranks(nodes)}, which have {counts} GPUs: without node_ids all "
            f"nodes of a pool must have the same GPU count; bind them with node_ids: {nodes} and num_gpus: {counts}"
        )
    for n, want in zip(nodes, declared, strict=True):
        if want > inventory.node(n).num_gpus:
            raise PlanError(
                f"pool {g.label}: node {n} has {inventory.node(n).num_gpus} GPU(s), the pool wants num_gpus {want}"
            )
    return nodes, list(declared)


def per_gpu(gpus: float) -> int:
    """How many workers of `gpus` GPUs each fit on one GPU (fractions) -- 1 for whole GPUs."""
    return max(1, math.floor(1.0 / gpus + EPS)) if gpus < 1 else 1


def gpus_needed(count: int, gpus: float) -> int:
    """GPU positions `count` workers of `gpus` GPUs each take when packed in index order."""
    if gpus <= 0:
        return 0
    if gpus < 1:
        return math.ceil(count / per_gpu(gpus))
    return count * round(gpus)


def default_count(range_size: int, gpus: float) -> int:
    """Manual mode, count not written: one worker per GPU of the range (fractions fill the range)."""
    if gpus <= 0:
        return range_size
    if gpus < 1:
        return range_size * per_gpu(gpus)
    return range_size // round(gpus)


def pack(
    builder: PlanBuilder, pool: Pool, c: Counted, source: str | None = None, partners: Block | None = None
) -> Block:
    """Pack `c.count` workers in index order onto the GPUs of `c.name`'s range in `pool`; CPU-only workers go
    beside the worker of `partners` each steps with (`_cpu_slots`)."""
    rng = pool.ranges[c.name]
    path = pool.paths.get(c.name) or f"resource_pool.{pool.name}.{c.name}"
    g = c.gpus
    if g >= 1 and abs(g - round(g)) > EPS:
        raise ConfigError(
            Problem(
                path=f"cluster.{c.name}_each_gpu_num",
                value=g,
                file=source,
                message="GPUs per worker must be a fraction below 1 (shared GPU) or a whole number",
            )
        )
    need = gpus_needed(c.count, g)
    if need > len(rng):
        raise ConfigError(
            Problem(
                path=f"cluster.{c.name}_worker_num",
                value=c.count,
                file=source,
                message=f"{c.count} {c.name} worker(s) of {g:g} GPU each need {need} GPU(s) but the range of "
                f"{c.name} in pool {pool.name} ({path}) holds {len(rng)}; lower the count or widen the range",
            )
        )
    if g <= 0:
        slots = _cpu_slots(builder, pool, c, rng, partners)
    elif g < 1:
        k = per_gpu(g)
        slots = _single(builder, pool, [rng[i // k] for i in range(c.count)], c)
    elif round(g) == 1:
        slots = _single(builder, pool, rng[: c.count], c)
    else:
        slots = _multi(builder, pool, c, rng, round(g), path)
    if 0 < need < len(rng):
        builder.warnings.append(_idle_warning(pool, c, rng, need))
    block = Block(c.name, slots, c.cpus, pool.name)
    builder.add(block)
    return block


def _single(builder: PlanBuilder, pool: Pool, pos: list[int], c: Counted) -> list[int]:
    """Slot ids of single-GPU positions; new slots are created in bulk, in first-use order."""
    if pool._slot is None:
        pool._slot = [-1] * pool.size
    ps, multi = pool._slot, pool._multi
    out = gather(ps, pos)
    if -1 in out:
        new = [p for p in dict.fromkeys(pos) if ps[p] < 0]  # positions without a slot, in first-use order
        for s, p in enumerate(new, len(builder.slot_node)):
            ps[p] = s
        nodes, gpus = pool.flat()
        builder.new_slots(gather(nodes, new), gather(gpus, new), pool.name)
        out = gather(ps, pos)
    if multi:
        _exclusive(pool, c, [p for p in pos if p in multi])
    return out


def _multi(builder: PlanBuilder, pool: Pool, c: Counted, rng: list[int], g: int, path: str) -> list[int]:
    """Each worker owns `g` whole GPUs of one node, shared only with workers of exactly the same GPUs."""
    nodes, gpus = pool.flat()
    if pool._slot is None:
        pool._slot = [-1] * pool.size
    out = []
    for i in range(c.count):
        pos = rng[i * g : (i + 1) * g]
        on = {nodes[p] for p in pos}
        if len(on) > 1:
            raise PlanError(
                f"{c.name} worker {i} needs {g} GPUs on one node, but its share of the range ({path}: "
                f"{format_ranks(pos)}) spans nodes {format_ranks(sorted(on))} of pool {pool.name}; "
                f"give each node of the range a multiple of {g} GPUs"
            )
        node, local = nodes[pos[0]], tuple(gpus[p][0] for p in pos)
        owners = {pool._multi.get(p, -1) for p in pos}
        if len(owners) > 1 or any(pool._slot[p] >= 0 and p not in pool._multi for p in pos):
            _exclusive(pool, c, pos)
        sid = builder.slot((pool.name, node, local), node, local, pool.name)
        for p in pos:
            pool._multi[p] = pool._slot[p] = sid
        out.append(sid)
    return out


def _exclusive(pool: Pool, c: Counted, clash: list[int]) -> None:
    if clash:
        nodes, gpus = pool.flat()
        raise ConfigError(
            Problem(
                path=pool.paths.get(c.name) or f"resource_pool.{pool.name}.{c.name}",
                value=format_ranks(clash),
                message=f"{c.name} shares GPUs {idle_by_node([(nodes[p], gpus[p][0]) for p in clash])} of pool "
                f"{pool.name} with a worker that owns several GPUs; a multi-GPU worker shares its GPUs only with "
                "workers of exactly the same GPUs",
            )
        )


def _cpu_slots(builder: PlanBuilder, pool: Pool, c: Counted, rng: list[int], partners: Block | None) -> list[int]:
    """CPU-only workers (0 GPUs) on the nodes of the range (or of the pool): worker i on the node of the partner
    it steps with, partner i * partners / workers (the estimate's pairing, `rlplace.planner.estimate`: an env worker
    and its eval worker exchange every step's observations and actions), where that node is one of them; else
    round-robin over them."""
    nodes, _ = pool.flat()
    on = list(dict.fromkeys(nodes[p] for p in rng)) or pool.nodes
    beside = [builder.slot_node[s] for s in partners.slots] if partners is not None and partners.slots else []
    allowed = set(on)

    def node(i: int) -> int:
        if beside:
            partner = beside[i * len(beside) // c.count]
            if partner in allowed:
                return partner
        return on[i % len(on)]

    return [builder.slot(("cpu", c.name, i), node(i), (), pool.name) for i in range(c.count)]


def _idle_warning(pool: Pool, c: Counted, rng: list[int], need: int) -> str:
    nodes, gpus = pool.flat()
    where = idle_by_node([(nodes[p], gpus[p][0]) for p in rng[need:]])
    full = len(rng) * per_gpu(c.gpus) if c.gpus < 1 else len(rng) // round(c.gpus)
    # env workers of a whole RLightning config are counted by its `env:` groups (num_workers), not a cluster key
    fix = (
        f"Give the env groups {full} workers in all (num_workers)"
        if c.spec.path.startswith("env")
        else (f"Set {c.name}_worker_num: {full}")
    )
    return (
        f"{c.name}: {c.count} worker(s) use {need} of the {len(rng)} GPUs of its range in {pool.name} "
        f"({format_ranks(rng)}); idle: {where}. {fix} to use them, or shrink the range "
        f'to "{format_ranks(rng[:need])}"'
    )
