"""The node-groups dialect (spec/heterogeneous-cluster): placement strings over group-local resource ranks.

A group's resources, counted node by node in node-rank order: its hardware units (robots) if it has
`hardware`; else the nodes' accelerators; else (no accelerator in the group, or `ignore_hardware`) the
nodes themselves. `node`: every node, ranks are node ranks, no GPUs. `cluster`: every node's GPUs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from rlplace.errors import ConfigError, PlanError, Problem
from rlplace.inventory import Inventory
from rlplace.model import CLUSTER_GROUP, NODE_GROUP, ComponentSpec, EnvConfigSpec, JobSpec, NodeGroupSpec
from rlplace.plan import GroupSummary, hardware_resource_name
from rlplace.planner.builder import Block, PlanBuilder, gather
from rlplace.planner.ranges import format_ranks

EnvOf = tuple[dict[str, str], str | None]  # (env vars, interpreter) on one node


@dataclass
class Resources:
    """The resources of one group: parallel lists, one entry per group-local rank."""

    label: str
    kind: str  # "gpu" | "hardware" | "node"
    node: list[int] = field(default_factory=list)
    gpu: list[int] = field(default_factory=list)  # kind gpu: node-local index
    unit: list[dict[str, object]] = field(default_factory=list)  # kind hardware: the worker's hardware info
    resolved: list[tuple | None] = field(default_factory=list)  # rank -> (slot, label, env, python, hw), once

    def resolve(self, ranks: list[int], builder: PlanBuilder, c: ComponentSpec, envs: _Envs, where: str) -> None:
        """Fill `resolved` for `ranks`; GPUs in bulk (the hot path: one slot per GPU, shared by every
        group and component placed on it), other resources one by one."""
        if not self.resolved:
            self.resolved = [None] * len(self.node)
        done = self.resolved
        todo = [i for i in ranks if done[i] is None]
        if not todo:
            return
        if self.kind != "gpu":
            for i in todo:
                done[i] = _resolve(builder, c, [(self, i)], envs, where)
            return
        nodes = gather(self.node, todo)
        keys = list(zip(nodes, gather(self.gpu, todo), strict=True))
        ids = list(map(builder.slot_of.get, keys, repeat(-1)))
        missing = [j for j, s in enumerate(ids) if s < 0]
        if missing:
            new = gather(keys, missing)
            base = len(builder.slot_node)
            builder.gpu_slots([n for n, _ in new], [(g,) for _, g in new], self.label)
            builder.slot_of.update(zip(new, range(base, base + len(new)), strict=True))
            for j, s in zip(missing, range(base, base + len(new)), strict=True):
                ids[j] = s
        on = {n: envs.of(self.label, n) for n in dict.fromkeys(nodes)}  # per node, then gathered per GPU
        env = gather({n: e for n, (e, _) in on.items()}, nodes)
        python = gather({n: p for n, (_, p) in on.items()}, nodes)
        values = list(zip(ids, repeat(self.label), env, python, repeat(None), strict=False))
        if todo == list(range(todo[0], todo[0] + len(todo))):
            done[todo[0] : todo[0] + len(todo)] = values
        else:
            for i, v in zip(todo, values, strict=True):
                done[i] = v

    def describe(self) -> str:
        what = {"gpu": "GPUs", "hardware": "hardware units", "node": "nodes"}[self.kind]
        nodes = sorted(set(self.node))
        return f"{len(self.node)} {what} on nodes {format_ranks(nodes) or 'none'}"


def plan_node_groups(builder: PlanBuilder, spec: JobSpec, inventory: Inventory) -> bool:
    """Place every component; returns whether workers of two components share a GPU (is_colocated)."""
    _check_inventory(spec, inventory, builder.warnings)
    groups = {g.label: g for g in spec.node_groups}
    envs = _Envs(spec, groups)
    cache: dict[str, Resources] = {}
    owner: dict[int, str] = {}
    colocated = False
    for c in spec.components:
        if c.placement is None:
            raise ConfigError(
                Problem(
                    path=c.path or f"cluster.component_placement.{c.name}",
                    value=None,
                    file=spec.source,
                    message=f"component {c.name} has no placement; give node_group and placement",
                )
            )
        res = [cache.setdefault(lb, _resources(lb, groups, inventory, spec)) for lb in c.placement.groups]
        block = _place(builder, c, res, envs, spec)
        builder.add(block)
        for s in block.slots:
            if builder.slot_gpus[s] and owner.setdefault(s, c.name) != c.name:
                colocated = True
    builder.groups = [_summary(r) for r in cache.values()]
    return colocated


def _check_inventory(spec: JobSpec, inventory: Inventory, warnings: list[str]) -> None:
    if spec.num_nodes is not None and spec.num_nodes > len(inventory):
        raise PlanError(f"num_nodes is {spec.num_nodes} but the inventory has {len(inventory)} node(s)")
    if spec.num_nodes is not None and spec.num_nodes < len(inventory):
        warnings.append(
            f"num_nodes is {spec.num_nodes} but the inventory has {len(inventory)} nodes; "
            f"nodes {spec.num_nodes}-{len(inventory) - 1} are not in any group but `node`/`cluster`"
        )
    for g in spec.node_groups:
        missing = [r for r in g.node_ranks if r >= len(inventory)]
        if missing:
            raise PlanError(
                f"node group {g.label} names node ranks {format_ranks(missing)}, but the inventory has "
                f"{len(inventory)} node(s) (ranks 0-{len(inventory) - 1})"
            )


def _resources(label: str, groups: dict[str, NodeGroupSpec], inventory: Inventory, spec: JobSpec) -> Resources:
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
        r = Resources(label, "hardware")
        for i, u in enumerate(sorted(g.hardware, key=lambda u: u.node_rank)):
            r.node.append(u.node_rank)
            r.gpu.append(-1)
            config = {k: list(v) if isinstance(v, tuple) else v for k, v in u.config.items()}  # as JSON shows it
            r.unit.append({"type": u.type, "index": i, "node_rank": u.node_rank, **config})
        return r
    if g.ignore_hardware:
        return _nodes(label, ranks)
    return _gpus_or_nodes(label, ranks, inventory)


def _nodes(label: str, ranks: list[int]) -> Resources:
    return Resources(label, "node", node=list(ranks), gpu=[-1] * len(ranks))


def _gpus_or_nodes(label: str, ranks: list[int], inventory: Inventory) -> Resources:
    if not any(inventory.node(r).num_gpus for r in ranks):
        return _nodes(label, ranks)
    r = Resources(label, "gpu")
    for n in ranks:
        k = inventory.node(n).num_gpus
        r.node.extend([n] * k)
        r.gpu.extend(range(k))
    return r


def _place(builder: PlanBuilder, c: ComponentSpec, res: list[Resources], envs: _Envs, spec: JobSpec) -> Block:
    """Expand the segments: n processes on m resources share (n % m == 0) or own m/n each (m % n == 0)."""
    starts = list(accumulate((len(r.node) for r in res), initial=0))  # first flat rank of each group
    total = starts[-1]

    def locate(k: int) -> tuple[Resources, int]:
        j = bisect_right(starts, k) - 1
        return res[j], k - starts[j]

    where = c.path or f"cluster.component_placement.{c.name}"
    ranks: list[int] = []
    picks: list[int | tuple[int, ...]] = []  # per process: the flat resource index (indices) it sits on
    next_rank = 0
    for seg in c.placement.segments:
        idx = range(total) if seg.resources is None else seg.resources
        bad = [i for i in idx if i >= total]
        if bad:
            have = "; ".join(f"{r.label}: {r.describe()}" for r in res)
            raise PlanError(
                f"{c.name}: placement asks for resource rank {bad[0]} in {'+'.join(r.label for r in res)}, "
                f"which has ranks 0-{total - 1} ({have})"
            )
        procs = range(next_rank, next_rank + len(idx)) if seg.processes is None else seg.processes
        n, m = len(procs), len(idx)
        if n % m and m % n:
            raise ConfigError(
                Problem(
                    path=where,
                    value=format_ranks(procs),
                    file=spec.source,
                    message=(
                        f"{n} processes on {m} resources: the process count must be a multiple of the resource count "
                        "(processes share a resource) or divide it (each process owns several)"
                    ),
                )
            )
        share, own = max(n // m, 1), max(m // n, 1)
        one = list(idx) if own == 1 else [tuple(idx[k : k + own]) for k in range(0, m, own)]
        if share > 1:
            picks.extend(one[j // share] for j in range(n))
        else:
            picks.extend(one)
        ranks.extend(procs)
        next_rank = max(procs) + 1 if procs else next_rank
    _check_ranks(c, ranks, where, spec)
    unique = list(dict.fromkeys(picks))  # resolved once per distinct resource (set), not per process
    singles = [p for p in unique if not isinstance(p, tuple)]
    if len(res) == 1 and len(singles) == len(unique):  # the usual case: flat rank == group rank
        res[0].resolve(singles, builder, c, envs, where)
        per = gather(res[0].resolved, picks)
    else:
        info: dict[int | tuple[int, ...], tuple] = {}
        for pick in unique:
            if isinstance(pick, tuple):
                info[pick] = _resolve(builder, c, [locate(k) for k in pick], envs, where)
            else:
                r, i = locate(pick)
                r.resolve([i], builder, c, envs, where)
                info[pick] = r.resolved[i]
        per = gather(info, picks)
    slots, groups, env, python, hardware = ([x[k] for x in per] for k in range(5))  # not zip(*per): 80k iterators
    return Block(c.name, slots, c.cpus_per_worker, None, ranks, groups, env, python, hardware)


def _resolve(
    builder: PlanBuilder, c: ComponentSpec, mine: list[tuple[Resources, int]], envs: _Envs, where: str
) -> tuple:
    """(slot, group, env vars, interpreter, hardware info) of a process on resources `mine`."""
    r0, i0 = mine[0]
    hardware = r0.unit[i0] if r0.kind == "hardware" else None
    env, python = envs.of(r0.label, r0.node[i0])
    return _slot(builder, c, mine, where, envs.spec), r0.label, env, python, hardware


def _slot(builder: PlanBuilder, c: ComponentSpec, mine: list[tuple[Resources, int]], where: str, spec: JobSpec) -> int:
    r0, i0 = mine[0]
    node = r0.node[i0]
    if len(mine) > 1:
        if any(r.kind != "gpu" for r, _ in mine) or len({r.node[i] for r, i in mine}) > 1:
            raise ConfigError(
                Problem(
                    path=where,
                    value=None,
                    file=spec.source,
                    message=(
                        f"a {c.name} process would own {len(mine)} resources that are not GPUs of one node; "
                        "several resources per process must be GPUs on the same node"
                    ),
                )
            )
        gpus = tuple(r.gpu[i] for r, i in mine)
        return builder.slot((node, gpus), node, gpus, r0.label)
    if r0.kind == "gpu":
        gpu = r0.gpu[i0]
        return builder.slot((node, gpu), node, (gpu,), r0.label)
    if r0.kind == "hardware":
        unit = r0.unit[i0]
        name = hardware_resource_name(str(unit["type"]), int(unit["index"]))
        return builder.slot(("hw", r0.label, i0), node, (), r0.label, {name: 1.0})
    return builder.slot(("node", node), node, (), r0.label)


def _check_ranks(c: ComponentSpec, ranks: list[int], where: str, spec: JobSpec) -> None:
    if sorted(ranks) != list(range(len(ranks))):
        seen: set[int] = set()
        dup = next((r for r in ranks if r in seen or seen.add(r)), None)
        what = (
            f"process rank {dup} appears twice"
            if dup is not None
            else (f"process ranks {format_ranks(sorted(ranks))} leave gaps")
        )
        raise ConfigError(
            Problem(
                path=where,
                value=format_ranks(ranks),
                file=spec.source,
                message=(f"{what}; the processes of {c.name} must be numbered 0-{len(ranks) - 1}, each once"),
            )
        )


class _Envs:
    """Env vars and interpreter per (group, node), built once and shared by the workers there."""

    def __init__(self, spec: JobSpec, groups: dict[str, NodeGroupSpec]):
        self.spec, self.groups = spec, groups
        self._cache: dict[tuple[str, int], EnvOf] = {}
        self._groups_of: dict[int, list[str]] = {}  # node -> user groups holding it, in config order
        for g in groups.values():
            for n in g.node_ranks:
                self._groups_of.setdefault(n, []).append(g.label)
        self._configs: dict[str, dict[int, list[EnvConfigSpec]]] = {}  # group -> node -> its env configs

    def of(self, label: str, node: int) -> EnvOf:
        key = (label, node)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._build(label, node)
        return got

    def _build(self, label: str, node: int) -> EnvOf:
        if label in (NODE_GROUP, CLUSTER_GROUP):
            return self._merged(node)
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

    def _merged(self, node: int) -> EnvOf:
        """Placed through node/cluster: the env of every user group holding the node; disagreement is an error."""
        env: dict[str, str] = {}
        src: dict[str, str] = {}
        python, py_src = None, None
        for label in self._groups_of.get(node, ()):
            e, p = self.of(label, node)
            for k, v in e.items():
                if k in env and env[k] != v:
                    self._clash(node, k, src[k], env[k], label, v)
                env[k], src[k] = v, label
            if p is not None:
                if python is not None and python != p:
                    self._clash(node, "python_interpreter_path", py_src, python, label, p)
                python, py_src = p, label
        return env, python

    def _clash(self, node: int, key: str, g1: str | None, v1: str, g2: str, v2: str) -> None:
        raise ConfigError(
            Problem(
                path="cluster.node_groups",
                value=key,
                file=self.spec.source,
                message=(
                    f"node {node} is in groups {g1} ({key}={v1!r}) and {g2} ({key}={v2!r}); a worker placed through "
                    "`node`/`cluster` there cannot get both; make them agree or place it through one of the groups"
                ),
            )
        )


def _summary(r: Resources) -> GroupSummary:
    per = Counter(r.node)
    nodes = sorted(per)
    return GroupSummary(r.label, tuple(nodes), tuple(per[n] if r.kind == "gpu" else 0 for n in nodes))
