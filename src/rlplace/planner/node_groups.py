"""The node-groups dialect (RLinf's; docs/planner.md, "Node-groups dialect"): placement strings over group-local
resource ranks.

A group's resources, counted node by node in node-rank order: its hardware units (robots) if it has
`hardware`; else the nodes' accelerators; else (no accelerator in the group, or `ignore_hardware`) the
nodes themselves. `node`: every node, ranks are node ranks, no GPUs. `cluster`: every node's GPUs.

Worker semantics follow RLinf's: a worker gets the env vars and interpreter of the group it was placed
through only (none through `node`/`cluster`); a worker placed on a robot, a node or a node of an
accelerator-less group sees all GPUs of its node without reserving any (`Worker.visible_gpus`). A
component with a `process_shape` (RLinf's rollout tensor parallelism) has processes of several GPUs,
packed or strided over its resource ranks as RLinf's PackedPlacementStrategy lays them out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import cast

from rlplace.config.hardware import kind_of
from rlplace.errors import ConfigError, PlanError, Problem
from rlplace.inventory import Inventory
from rlplace.model import CLUSTER_GROUP, NODE_GROUP, ComponentSpec, EnvConfigSpec, JobSpec, NodeGroupSpec, ProcessShape
from rlplace.plan import GroupSummary, hardware_resource_name
from rlplace.planner import parallel
from rlplace.planner.builder import Block, InDriver, PlanBuilder, gather, gpu_columns
from rlplace.planner.ranges import format_ranks
from rlplace.planner.robots import Robots, indexed, unit_int

EnvOf = tuple[dict[str, str], str | None]  # (env vars, interpreter) on one node


@dataclass
class Resources:
    """The resources of one group: parallel lists (columns), one entry per group-local rank.

    Columns rather than one record per rank: a component placed on all 32k GPUs of a 4,096-node group
    then reads its workers' slots, nodes and hardware with one C-speed gather each (see `_place`)."""

    label: str
    kind: str  # "gpu" | "hardware" | "node"
    node: list[int] = field(default_factory=list)
    gpus: list[tuple[int, ...]] = field(default_factory=list)  # kind gpu: (node-local index,), shared tuples; else ()
    unit: list[dict[str, object]] = field(default_factory=list)  # kind hardware: the worker's hardware info
    slot: list[int] = field(default_factory=list)  # rank -> its slot id; -1 until a process is placed on it

    def place(self, ranks: list[int], builder: PlanBuilder) -> None:
        """Give each of the distinct `ranks` a slot, new slots in `ranks` order. A GPU's slot is keyed
        by (node, GPUs), as `_gpus_slot` keys a multi-GPU process's, so every group covering that GPU (a
        user group and `cluster`) shares it; a node's by the node, a hardware unit's by its group and rank."""
        if not self.slot:
            self.slot = [-1] * len(self.node)
        todo = [i for i in ranks if self.slot[i] < 0]
        if not todo:
            return
        nodes = gather(self.node, todo)
        gpus = gather(self.gpus, todo)
        resources = None
        keys: list[tuple[object, ...]]
        if self.kind == "gpu":
            keys = list(zip(nodes, gpus, strict=True))
        elif self.kind == "node":
            keys = [("node", n) for n in nodes]
        else:
            keys = [("hw", self.label, i) for i in todo]
            units = gather(self.unit, todo)
            resources = [{hardware_resource_name(str(u["type"]), unit_int(u, "index")): 1.0} for u in units]
        for i, s in zip(todo, builder.slots(keys, nodes, gpus, self.label, resources), strict=True):
            self.slot[i] = s

    def describe(self) -> str:
        what = {"gpu": "GPUs", "hardware": "hardware units", "node": "nodes"}[self.kind]
        nodes = sorted(set(self.node))
        return f"{len(self.node)} {what} on {_which_nodes(nodes)}"


def plan_node_groups(builder: PlanBuilder, spec: JobSpec, inventory: Inventory) -> bool:
    """Place every component; returns whether workers of two components share a GPU (is_colocated)."""
    robots = Robots(spec, inventory)
    robots.check()  # RLinf enumerates robots on every node that joined, before num_nodes cuts the cluster
    inventory = within_num_nodes(spec, inventory, builder.warnings)
    _check_inventory(spec, inventory)
    groups = {g.label: g for g in spec.node_groups}
    envs = GroupEnvs(spec, groups, inventory)
    cache: dict[str, Resources] = {}
    placed: dict[str, set[int]] = {}  # component -> its slots
    colocated = False
    for c in spec.components:
        if c.placement is None:
            raise ConfigError(
                Problem(
                    path=c.path or f"cluster.component_placement.{c.name}",
                    value=None,
                    file=spec.written_at(c.path or f"cluster.component_placement.{c.name}"),
                    message=f"component {c.name} has no placement; give node_group and placement",
                )
            )
        if not c.remote:  # runs in the driver: as many workers as the placement gives, nothing reserved
            scratch = [group_resources(lb, groups, inventory, spec, robots) for lb in c.placement.groups]
            builder.add(InDriver(c.name, len(_place(PlanBuilder(), c, scratch, envs, spec).slots), c.cpus_per_worker))
            continue
        res = [
            cache[lb] if lb in cache else cache.setdefault(lb, group_resources(lb, groups, inventory, spec, robots))
            for lb in c.placement.groups
        ]
        block = _place(builder, c, res, envs, spec)
        builder.add(block)
        mine = set(block.slots)  # sets: C-speed intersections, not a loop over 80k workers
        colocated = colocated or any(
            builder.slot_gpus[s] for name, theirs in placed.items() if name != c.name for s in mine & theirs
        )
        placed[c.name] = placed.get(c.name, set()) | mine
        if c.process_shape is not None:
            builder.process_shapes[c.name] = c.process_shape
    builder.groups = [_summary(r) for r in cache.values()]
    return colocated or _share_gpus(builder, placed)


def _share_gpus(builder: PlanBuilder, placed: dict[str, set[int]]) -> bool:
    """Whether two components use a common GPU through different slots: only multi-GPU processes can (a
    strided rollout beside single-GPU actors); plans without them skip the per-GPU sets."""
    gpus, nodes = builder.slot_gpus, builder.slot_node
    if not any(len(gpus[s]) > 1 for slots in placed.values() for s in slots):
        return False
    seen: dict[tuple[int, int], str] = {}
    for name, slots in placed.items():
        for s in slots:
            for x in gpus[s]:
                if seen.setdefault((nodes[s], x), name) != name:
                    return True
    return False


def within_num_nodes(spec: JobSpec, inventory: Inventory, warnings: list[str]) -> Inventory:
    """The nodes the config's cluster has, as RLinf counts them (rlinf/scheduler/cluster: it waits until
    `num_nodes` nodes have joined, and with more uses the first `num_nodes` in rank order, with a warning)."""
    n = spec.num_nodes
    if n is None or n == len(inventory):
        return inventory
    where = _num_nodes_at(spec)
    if n > len(inventory):
        gpus = inventory.nodes[0].num_gpus if inventory.nodes else 8
        raise PlanError(
            f"num_nodes is {n} but the inventory has {len(inventory)} node(s){where}; RLinf waits until {n} nodes "
            f"have joined: plan on {n} nodes (--nodes {n}x{gpus}) or lower num_nodes"
        )
    warnings.append(
        f"num_nodes is {n} but the inventory has {len(inventory)} nodes{where}: as RLinf does, only the first {n} "
        f"(ranks {format_ranks(range(n))}) are used; nodes {format_ranks(range(n, len(inventory)))} stay idle"
    )
    return Inventory(inventory.nodes[:n])


def _num_nodes_at(spec: JobSpec) -> str:
    return f" (num_nodes is written at {spec.locations['num_nodes']})" if "num_nodes" in spec.locations else ""


def _num_nodes_limit(spec: JobSpec) -> str:
    """`; num_nodes: 1 at job.yaml:2 makes the cluster nodes 0`: why a range may end early."""
    if not spec.num_nodes:
        return ""
    at = f" at {spec.locations['num_nodes']}" if "num_nodes" in spec.locations else ""
    return f"; num_nodes: {spec.num_nodes}{at} makes the cluster {_which_nodes(range(spec.num_nodes))}"


def _which_nodes(ranks: Sequence[int]) -> str:
    """`node 0`, `nodes 0-3`, `no node`."""
    if not ranks:
        return "no node"
    return f"node {ranks[0]}" if len(ranks) == 1 else f"nodes {format_ranks(ranks)}"


def _check_inventory(spec: JobSpec, inventory: Inventory) -> None:
    for g in spec.node_groups:
        missing = [r for r in g.node_ranks if r >= len(inventory)]
        if missing:
            raise PlanError(
                f"node group {g.label} names node ranks {format_ranks(missing)}, but the inventory has "
                f"{len(inventory)} node(s) (ranks 0-{len(inventory) - 1})"
            )


def group_resources(
    label: str, groups: dict[str, NodeGroupSpec], inventory: Inventory, spec: JobSpec, robots: Robots | None = None
) -> Resources:
    """The resources of group `label` (`node`, `cluster` or a user group) on `inventory`, in group-rank order."""
    if label == NODE_GROUP:
        return _nodes(label, [n.rank for n in inventory.nodes])
    if label == CLUSTER_GROUP:
        return _gpus_or_nodes(label, [n.rank for n in inventory.nodes], inventory)
    g = groups.get(label)
    if g is None:
        known = ", ".join([*groups, NODE_GROUP, CLUSTER_GROUP])
        raise ConfigError(
            Problem(
                path="cluster.component_placement",
                value=label,
                file=spec.source,
                message=f"unknown node group {label!r}; known: {known}",
            )
        )
    ranks = sorted(g.node_ranks)
    if g.hardware_type is not None:
        robots = robots or Robots(spec, inventory)
        r = Resources(label, "hardware")
        r.unit = indexed(u for n in ranks for u in robots.on(n, g.hardware_type))
        r.node = [unit_int(u, "node_rank") for u in r.unit]
        r.gpus = [()] * len(r.unit)
        return r
    if g.ignore_hardware:
        return _nodes(label, ranks)
    return _gpus_or_nodes(label, ranks, inventory)


def _nodes(label: str, ranks: list[int]) -> Resources:
    return Resources(label, "node", node=list(ranks), gpus=[()] * len(ranks))


def _gpus_or_nodes(label: str, ranks: list[int], inventory: Inventory) -> Resources:
    counts = [inventory.node(r).num_gpus for r in ranks]
    if not any(counts):
        return _nodes(label, ranks)
    nodes, gpus = gpu_columns(ranks, counts)
    return Resources(label, "gpu", node=nodes, gpus=gpus)


def _place(builder: PlanBuilder, c: ComponentSpec, res: list[Resources], envs: GroupEnvs, spec: JobSpec) -> Block:
    """Expand the segments: n processes on m resources share (n % m == 0) or own m/n each (m % n == 0)."""
    starts = list(accumulate((len(r.node) for r in res), initial=0))  # first flat rank of each group
    total = starts[-1]

    def locate(k: int) -> tuple[Resources, int]:
        j = bisect_right(starts, k) - 1
        return res[j], k - starts[j]

    assert c.placement is not None, c.name  # plan_node_groups refuses a component without one
    where = c.path or f"cluster.component_placement.{c.name}"
    ranks: list[int] = []
    picks: list[int | tuple[int, ...]] = []  # per process: the flat resource index (indices) it sits on
    shaped: list[int] = []  # with a process shape: the resources, in order (the shape makes the processes)
    next_rank = 0
    several = False  # does any process own several resources?
    for seg in c.placement.segments:
        idx = range(total) if seg.resources is None else seg.resources
        if idx and max(idx) >= total:
            bad = next(i for i in idx if i >= total)
            have = "; ".join(f"{r.label}: {r.describe()}" for r in res)
            span = f"which has ranks 0-{total - 1}" if total else "which has none"
            raise PlanError(
                f"{spec.written_at(where)}: {where}: placement asks for resource rank {bad} in "
                f"{'+'.join(r.label for r in res)}, {span} ({have}{_num_nodes_limit(spec)}){_robots_hint(res, spec)}"
            )
        if c.process_shape is not None:
            shaped.extend(idx)  # resources only: the shape decides the processes (below), as RLinf does
            continue
        procs = range(next_rank, next_rank + len(idx)) if seg.processes is None else seg.processes
        n, m = len(procs), len(idx)
        if n % m and m % n:
            raise ConfigError(
                Problem(
                    path=where,
                    value=format_ranks(procs),
                    file=spec.written_at(where),
                    message=(
                        f"{n} processes on {m} resources: the process count must be a multiple of the resource count "
                        "(processes share a resource) or divide it (each process owns several)"
                    ),
                )
            )
        share, own = max(n // m, 1), max(m // n, 1)
        several = several or own > 1
        one = list(idx) if own == 1 else [tuple(idx[k : k + own]) for k in range(0, m, own)]
        if share > 1:
            picks.extend(one[j // share] for j in range(n))
        else:
            picks.extend(one)
        ranks.extend(procs)
        next_rank = max(procs) + 1 if procs else next_rank
    if c.process_shape is not None:
        picks = _shaped(c, c.process_shape, shaped, where, spec)
        ranks = list(range(len(picks)))
        several = c.process_shape.devices_per_process > 1
    # Each process on one resource (not `several`): every pick is one flat rank, read at C speed below (a check
    # of each pick would cost a pass over 32k of them).
    flat = None if several else cast(list[int], picks)
    if c.model_parallel is not None and c.chosen and flat is not None:  # rlplace's choice: whole groups per domain
        flat = parallel.choose(c, flat, [_node_at(locate, k) for k in flat], builder.topology, builder.warnings)
        ranks = list(range(len(flat)))
    _check_ranks(c, ranks, where, spec)
    if c.model_parallel is not None and flat is not None:
        by_rank = sorted(zip(ranks, flat, strict=True))
        nodes = [_node_at(locate, k) for _, k in by_rank]
        capacity = parallel.domain_gpus(builder.topology, envs.inventory)

        def available() -> list[tuple[int, int]]:  # every GPU of its node groups, for a split group's suggestion
            return [(k, _node_at(locate, k)) for k in range(total) if locate(k)[0].kind == "gpu"]

        parallel.check(
            c,
            nodes,
            [k for _, k in by_rank],
            builder.topology,
            capacity,
            builder.warnings,
            builder.split_groups,
            available,
        )
    if len(res) == 1 and flat is not None:  # the usual case: flat rank == group rank, one resource per process
        r = res[0]
        r.place(list(dict.fromkeys(flat)), builder)
        nodes = gather(r.node, flat)
        env, python = envs.columns(r.label, nodes)
        hardware: list[dict[str, object] | None] | None = gather(r.unit, flat) if r.kind == "hardware" else None
        seen = envs.node_gpus(nodes) if r.kind != "gpu" else None
        return Block(c.name, gather(r.slot, flat), c.cpus_per_worker, r.label, ranks, None, env, python, hardware, seen)
    processes: Sequence[int | tuple[int, ...]] = picks if flat is None else flat
    info = {pick: _resolve(builder, c, pick, locate, envs, where) for pick in dict.fromkeys(processes)}  # once each
    per = gather(info, processes)
    slots, groups, env, python, hardware, seen = ([x[k] for x in per] for k in range(6))  # not zip(*per): 80k iterators
    return Block(c.name, slots, c.cpus_per_worker, None, ranks, groups, env, python, hardware, seen)


def _robots_hint(res: list[Resources], spec: JobSpec) -> str:
    """Where more robots come from: the config, or the environment of nodes it lists none for (RLinf's)."""
    for r in res:
        g = spec.group(r.label)
        if r.kind != "hardware" or g is None or g.hardware_type is None:
            continue
        kind = kind_of(g.hardware_type)
        bare = sorted(set(g.node_ranks) - {u.node_rank for u in g.hardware})
        if bare and kind.count_keys:
            var, n = " and ".join(k.upper() for k in kind.count_keys), bare[0]
            return (
                f"; a node the config lists no {kind.name} for has one per comma-separated value of its {var}, set "
                f"where the node starts ({var.split()[0]}=... rlplace start) or given for an offline plan "
                f"(--node-env {n}:{var.split()[0]}=..., or env: in an --inventory file)"
            )
    return ""


def _node_at(locate: Callable[[int], tuple[Resources, int]], k: int) -> int:
    r, i = locate(k)
    return r.node[i]


def _shaped(
    c: ComponentSpec, shape: ProcessShape, flat: list[int], where: str, spec: JobSpec
) -> list[int | tuple[int, ...]]:
    """Processes of `devices_per_process` resources each, taken in order; with stride s, each run of d * s
    resources holds s processes, process o of a run taking resources o, o + s, ..., o + (d - 1) s (RLinf's
    packed placement: 8 GPUs, 2 a process, stride 2 -> [0, 2], [1, 3], [4, 6], [5, 7])."""
    d, st = shape.devices_per_process, shape.stride
    if d < 1 or st < 1 or len(flat) % (d * st):
        origin = f" ({shape.origin})" if shape.origin else ""
        raise ConfigError(
            Problem(
                path=where,
                value=len(flat),
                file=spec.written_at(where),
                message=f"{c.name} has {len(flat)} resource(s), which do not split into processes of {d} device(s) "
                f"with stride {st}{origin}; the resource count must be a multiple of {d * st}",
            )
        )
    if d == 1:  # one device a process: a stride changes nothing (RLinf's packed placement agrees)
        return list(flat)
    return [tuple(flat[base + o + k * st] for k in range(d)) for base in range(0, len(flat), d * st) for o in range(st)]


def _resolve(
    builder: PlanBuilder,
    c: ComponentSpec,
    pick: int | tuple[int, ...],
    locate: Callable[[int], tuple[Resources, int]],
    envs: GroupEnvs,
    where: str,
) -> tuple:
    """(slot, group, env vars, interpreter, hardware info, node GPUs seen) of a process on flat rank(s) `pick`."""
    mine = [locate(k) for k in pick] if isinstance(pick, tuple) else [locate(pick)]
    r0, i0 = mine[0]
    node = r0.node[i0]
    env, python = envs.of(r0.label, node)  # first: an env clash is reported before a bad GPU set
    hardware = r0.unit[i0] if r0.kind == "hardware" else None
    if len(mine) == 1:
        r0.place([i0], builder)
        slot = r0.slot[i0]
    elif r0.kind == "hardware":
        slot, hardware = _units_slot(builder, c, mine, where, envs.spec)
    else:
        slot = _gpus_slot(builder, c, mine, where, envs.spec)
    seen = envs.node_gpus([node])[0] if r0.kind != "gpu" else None
    return slot, r0.label, env, python, hardware, seen


def _several(c: ComponentSpec, mine: list[tuple[Resources, int]], where: str, spec: JobSpec) -> None:
    """A process owning several resources: of one kind (and hardware type) on one node, as RLinf requires."""
    kinds = {r.kind if r.kind != "hardware" else r.unit[i]["type"] for r, i in mine}
    if len(kinds) > 1 or any(r.kind == "node" for r, _ in mine) or len({r.node[i] for r, i in mine}) > 1:
        nodes = format_ranks(sorted({r.node[i] for r, i in mine}))
        raise ConfigError(
            Problem(
                path=where,
                value=None,
                file=spec.written_at(where),
                message=(
                    f"a {c.name} process would own {len(mine)} resources ({', '.join(sorted(map(str, kinds)))} on "
                    f"nodes {nodes}); several resources of one process must be GPUs of one node, or robots of one "
                    "type on one node, as RLinf requires"
                ),
            )
        )


def _gpus_slot(
    builder: PlanBuilder, c: ComponentSpec, mine: list[tuple[Resources, int]], where: str, spec: JobSpec
) -> int:
    """The slot of a process owning several resources, which must be GPUs of one node."""
    _several(c, mine, where, spec)
    r0, i0 = mine[0]
    node = r0.node[i0]
    gpus = tuple(r.gpus[i][0] for r, i in mine)
    return builder.slot((node, gpus), node, gpus, r0.label)


def _units_slot(
    builder: PlanBuilder, c: ComponentSpec, mine: list[tuple[Resources, int]], where: str, spec: JobSpec
) -> tuple[int, dict[str, object]]:
    """(slot, hardware record) of a process owning several hardware units of one type on one node (a dual-arm
    controller on robots 0-1). Each unit is reserved once: units no process holds yet join the process's
    slot (the first of its units that has one, else a new one), so its bundle holds every robot it owns; a
    unit another process already sits on stays in that bundle. The worker's record lists them all."""
    _several(c, mine, where, spec)
    held = [r.slot[i] for r, i in mine if r.slot and r.slot[i] >= 0]
    r0, i0 = mine[0]
    if held:
        slot = held[0]
    else:
        r0.place([i0], builder)
        slot = r0.slot[i0]
    for r, i in mine:
        if not r.slot or r.slot[i] < 0:
            if not r.slot:
                r.slot = [-1] * len(r.node)
            unit = r.unit[i]
            builder.add_resource(slot, hardware_resource_name(str(unit["type"]), unit_int(unit, "index")))
            builder.slot_of[("hw", r.label, i)] = slot
            r.slot[i] = slot
    units = [r.unit[i] for r, i in mine]
    return slot, {"type": units[0]["type"], "node_rank": units[0]["node_rank"], "units": units}


def _check_ranks(c: ComponentSpec, ranks: list[int], where: str, spec: JobSpec) -> None:
    if sorted(ranks) != list(range(len(ranks))):
        dup = _first_repeat(ranks)
        what = (
            f"process rank {dup} appears twice"
            if dup is not None
            else (f"process ranks {format_ranks(sorted(ranks))} leave gaps")
        )
        raise ConfigError(
            Problem(
                path=where,
                value=format_ranks(ranks),
                file=spec.written_at(where),
                message=(f"{what}; the processes of {c.name} must be numbered 0-{len(ranks) - 1}, each once"),
            )
        )


def _first_repeat(ranks: list[int]) -> int | None:
    """The first rank that appears a second time, reading in order."""
    seen: set[int] = set()
    for r in ranks:
        if r in seen:
            return r
        seen.add(r)
    return None


class GroupEnvs:
    """Env vars and interpreter per (group, node), built once and shared by the workers there; and the GPUs a
    worker placed on a node (not on its GPUs) sees there."""

    def __init__(self, spec: JobSpec, groups: dict[str, NodeGroupSpec], inventory: Inventory):
        self.spec, self.groups, self.inventory = spec, groups, inventory
        self._cache: dict[tuple[str, int], EnvOf] = {}
        self._configs: dict[str, dict[int, list[EnvConfigSpec]]] = {}  # group -> node -> its env configs
        self._seen: dict[int, tuple[int, ...] | None] = {}

    def of(self, label: str, node: int) -> EnvOf:
        key = (label, node)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._build(label, node)
        return got

    def columns(self, label: str, nodes: list[int]) -> tuple[list[dict[str, str]] | None, list[str | None] | None]:
        """Env vars and interpreters of workers on `nodes` (one entry each), built once per distinct node;
        (None, None), meaning none, without per-node work when no env config reaches the group's nodes."""
        group = self.groups.get(label)
        if group is None or not group.env_configs:  # `node`, `cluster`, or a group without env configs
            return None, None
        on = {n: self.of(label, n) for n in dict.fromkeys(nodes)}
        return gather({n: e for n, (e, _) in on.items()}, nodes), gather({n: p for n, (_, p) in on.items()}, nodes)

    def node_gpus(self, nodes: list[int]) -> list[tuple[int, ...] | None]:
        """Per node: all of its GPUs, which a worker placed on the node (not on its GPUs) sees; None without."""
        seen = self._seen
        for n in dict.fromkeys(nodes):
            if n not in seen:
                count = self.inventory.node(n).num_gpus
                seen[n] = tuple(range(count)) if count else None
        return gather(seen, nodes)

    def _build(self, label: str, node: int) -> EnvOf:
        """The env of group `label` on `node`; a worker placed through `node` or `cluster` gets none (RLinf)."""
        if label not in self.groups:
            return {}, None
        configs = self._configs.get(label)
        if configs is None:
            configs = self._configs[label] = {}
            for ec in self.groups[label].env_configs:
                for n in ec.node_ranks:
                    configs.setdefault(n, []).append(ec)
        env: dict[str, str] = {}
        python = None
        for ec in configs.get(node, ()):
            env.update(ec.env_vars)
            python = ec.python or python
        return env, python


def _summary(r: Resources) -> GroupSummary:
    per = Counter(r.node)
    nodes = sorted(per)
    return GroupSummary(r.label, tuple(nodes), tuple(per[n] if r.kind == "gpu" else 0 for n in nodes))
