"""Where an elastic component's new workers may go, in the order they are tried, following the strategy that
placed the component (docs/planner.md, "Incremental planning"). `planner.resize` takes the first place that
holds a worker: a free seat of a bundle the job already holds there, else a new bundle on free capacity.

- Pools (auto disaggregate/colocate, manual): the component's range in its pool, in packing order (whole GPUs one
  worker each, `g` GPUs of one node for `g`-GPU workers, `floor(1/g)` workers per GPU for fractions); in auto mode
  then the pool's other GPUs that no bundle holds, then nodes no pool uses (the pool takes them whole, as auto
  pools do; under env_strategy node-affinity eval takes the lower and env the upper part of such GPUs), the nodes
  nearest the component's workers first (the same NVLink domain, then rack, then zone). Manual ranges are fixed:
  growth stays inside them.
- Node groups: the component's written resource ranks, then the other resources of its group(s) that no bundle
  holds, nearest its workers first, else in group-rank order, with the devices per process and processes per
  device its workers have.
- Buffer shards under strategy default: round-robin over the GPU nodes, as planned.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain

from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.plan import NO_ENV, GroupSummary, Plan, Worker
from rlplace.planner.builder import gpu_columns
from rlplace.planner.capacity import NodeFree
from rlplace.planner.node_groups import GroupEnvs, Resources, group_resources
from rlplace.planner.pools import per_gpu
from rlplace.planner.ranges import format_ranks
from rlplace.planner.topology import Nearness, nearest, read_topology


@dataclass(frozen=True)
class Place:
    """A device (or a node's CPUs) a new worker may sit on, and how it sits there as the full planner would."""

    node: int
    gpus: tuple[int, ...]  # node-local GPUs; () for a CPU-only worker
    group: str | None  # the pool or node group the worker is placed through
    cap: int = 1  # most workers of the component here (1/g for fractional workers, processes per resource)
    seats: int = 1  # seats of a bundle made here (several workers share a device: each takes 1/seats)
    fresh_only: bool = False  # beyond the component's range: only a device no bundle of the job holds
    pool: str | None = None  # the pool whose range records the worker (extended by the node if new to it)
    env: dict[str, str] = field(default_factory=dict, hash=False)
    python: str | None = None
    visible: tuple[int, ...] | None = None  # placed on a node, not its GPUs: sees them all, reserves none


def places(
    spec: JobSpec, plan: Plan, live: Inventory, free: Mapping[int, NodeFree], component: str
) -> tuple[list[Place], str]:
    """(places in the order they are tried, where they are: for messages) for new workers of `component`."""
    if plan.settings.dialect == "node_groups":
        return _group_places(spec, plan, live, free, component)
    if component == "buffer":  # strategy default: shards pinned round-robin over the GPU nodes
        nodes = [n.rank for n in live.nodes if n.num_gpus > 0] or [n.rank for n in live.nodes]
        return _round_robin(plan.by_component("buffer"), nodes, None, None), f"nodes {format_ranks(nodes)}"
    return _pool_places(spec, plan, live, free, component)


def pool_of(plan: Plan, component: str) -> GroupSummary | None:
    return next((g for g in plan.groups if component in g.components), None)


# -- pools ------------------------------------------------------------------------------------------------


def _pool_places(
    spec: JobSpec, plan: Plan, live: Inventory, free: Mapping[int, NodeFree], c: str
) -> tuple[list[Place], str]:
    pool = pool_of(plan, c)
    if pool is None:
        return [], f"no pool holds {c}"
    rng = list(pool.components[c])
    nodes, gpus = gpu_columns(list(pool.node_ranks), list(pool.gpus_per_node))
    spec_c = spec.component(c)
    g = spec_c.gpus_per_worker if spec_c is not None else 1.0
    if g <= 0:  # CPU-only workers: round-robin over the nodes of the range, as planned
        on = list(dict.fromkeys(nodes[i] for i in rng)) or list(pool.node_ranks)
        return _round_robin(plan.by_component(c), on, pool.name, pool.name), f"the nodes of its range in {pool.name}"
    whole = max(1, round(g)) if g >= 1 else 1
    cap = per_gpu(g) if g < 1 else 1
    out = []
    for k in range(0, len(rng) - whole + 1, whole):  # the range in packing order
        chunk = rng[k : k + whole]
        if len({nodes[i] for i in chunk}) == 1:
            out.append(Place(nodes[chunk[0]], tuple(gpus[i][0] for i in chunk), pool.name, cap, cap, pool=pool.name))
    where = f"its range {format_ranks(rng)} in pool {pool.name} (nodes {format_ranks(pool.node_ranks)})"
    if plan.settings.mode == "manual":
        return out, where
    in_pools = {n for p in plan.groups for n in p.node_ranks}
    beyond = [(n, range(count)) for n, count in zip(pool.node_ranks, pool.gpus_per_node, strict=True)]
    new = [n.rank for n in live.nodes if n.rank not in in_pools and n.num_gpus > 0]
    joined = {w.node_rank for w in plan.by_component(c) if w.node_rank is not None} or set(pool.node_ranks)
    beyond += [(r, range(live.node(r).num_gpus)) for r in nearest(read_topology(spec.topology, live), joined, new)]
    side = _affinity_side(plan, c)
    for node, local in beyond:
        spare = [x for x in local if node in free and x in free[node].gpus and side(x, len(local))]
        for k in range(0, len(spare) - whole + 1, whole):
            out.append(Place(node, tuple(spare[k : k + whole]), pool.name, cap, cap, True, pool.name))
    return out, f"{where}, its pool's free GPUs, and nodes no pool uses"


def _affinity_side(plan: Plan, c: str):
    """Under env_strategy node-affinity, the GPUs of a node eval or env may grow onto beyond its range: eval the
    lower part and env the upper part of each node, split as the planner splits the rollout nodes (eval's share
    e / (e + v) of the starting sizes, rounded up), so that either can grow beside the other. Otherwise every GPU."""
    partner = {"eval": "env", "env": "eval"}.get(c)
    if plan.settings.env_strategy != "node-affinity" or partner is None or not plan.by_component(partner):
        return lambda x, n: True
    e, v = (plan.elastic[x].start if x in plan.elastic else len(plan.by_component(x)) for x in ("eval", "env"))
    if c == "eval":
        return lambda x, n: x < -(-n * e // (e + v))
    return lambda x, n: x >= -(-n * e // (e + v))


def _round_robin(workers: list[Worker], nodes: list[int], group: str | None, pool: str | None) -> list[Place]:
    """CPU places: the (j+1)-th worker of the component on each node in turn, as the planner deals them."""
    count = Counter(w.node_rank for w in workers)
    levels = max(count.values(), default=0) + len(nodes) + 1
    return [Place(n, (), group, level + 1, 1, pool=pool) for level in range(levels) for n in nodes]


# -- node groups ------------------------------------------------------------------------------------------


def _group_places(
    spec: JobSpec, plan: Plan, live: Inventory, free: Mapping[int, NodeFree], c: str
) -> tuple[list[Place], str]:
    comp = spec.component(c)
    assert comp is not None and comp.placement is not None  # an elastic component of a node-groups plan
    groups = {g.label: _on(g, live) for g in spec.node_groups}
    res = [group_resources(label, groups, live, spec) for label in comp.placement.groups]
    flat = [(r, i) for r in res for i in range(len(r.node))]
    workers = plan.by_component(c)
    per = max(1, max((len(w.gpus) for w in workers), default=1))
    cap = max(Counter((w.node_rank, w.gpus) for w in workers).values(), default=1)
    envs = GroupEnvs(spec, groups, live)
    written = list(
        chain.from_iterable(range(len(flat)) if s.resources is None else s.resources for s in comp.placement.segments)
    )
    out = [p for p in _chunks(flat, [j for j in written if j < len(flat)], per, cap, envs, free, False) if p]
    fresh = [p for p in _chunks(flat, range(len(flat)), per, cap, envs, free, True) if p]
    near = Nearness(read_topology(spec.topology, live), {w.node_rank for w in workers if w.node_rank is not None})
    out += sorted(fresh, key=lambda p: near(p.node))  # the same NVLink domain as its workers first, then rack, zone
    where = " + ".join(f"node group {r.label} ({r.describe()})" for r in res)
    return out, where


def _on(group, live: Inventory):
    """A node group restricted to the nodes the live inventory has."""
    return dataclasses.replace(group, node_ranks=tuple(r for r in group.node_ranks if r < len(live)))


def _chunks(
    flat, picks, per: int, cap: int, envs: GroupEnvs, free: Mapping[int, NodeFree], fresh: bool
) -> list[Place | None]:
    """Places of `per` resources each, cut from `picks` (flat resource indices) in order; a chunk whose resources
    are not GPUs of one node gives None. Fresh places skip GPUs a bundle holds."""
    if fresh:
        picks = [j for j in picks if _spare(flat[j], free)]
    out: list[Place | None] = []
    for k in range(0, len(picks) - per + 1, per):
        chunk = [flat[j] for j in picks[k : k + per]]
        r0, i0 = chunk[0]
        node = r0.node[i0]
        if per > 1 and (any(r.kind != "gpu" for r, _ in chunk) or len({r.node[i] for r, i in chunk}) > 1):
            out.append(None)
            continue
        env, python = envs.of(r0.label, node)
        visible = envs.node_gpus([node])[0] if r0.kind != "gpu" else None
        gpus = tuple(r.gpus[i][0] for r, i in chunk) if r0.kind == "gpu" else ()
        out.append(Place(node, gpus, r0.label, cap, cap, fresh, env=env or NO_ENV, python=python, visible=visible))
    return out


def _spare(item: tuple[Resources, int], free: Mapping[int, NodeFree]) -> bool:
    r, i = item
    node = r.node[i]
    return node in free and (r.kind != "gpu" or r.gpus[i][0] in free[node].gpus)
