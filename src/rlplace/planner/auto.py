"""Auto mode: turn worker counts and the inventory into pools (disaggregate, colocate) or leave the
workers to Ray (default). Pools are then packed by `pools.pack`, exactly as manual pools are.

Nodes are used in rank order, GPU nodes only, as few as possible (docs/planner.md).
"""

from __future__ import annotations

from itertools import groupby

from rlplace.errors import ConfigError, PlanError, Problem
from rlplace.inventory import Inventory
from rlplace.model import COUNTED_COMPONENTS, NVLINK_DOMAIN, RACK, ZONE
from rlplace.plan import PlanTopology
from rlplace.planner.builder import PlanBuilder, Unpinned
from rlplace.planner.pools import Pool, gpus_needed
from rlplace.planner.ranges import format_ranks
from rlplace.planner.settings import Counted


def default_strategy(builder: PlanBuilder, counts: dict[str, Counted], inventory: Inventory) -> None:
    """No placement groups: check the total demand, then leave train/eval/env to Ray's scheduler."""
    demand = sum(c.count * c.gpus for c in counts.values())
    if demand > inventory.total_gpus + 1e-9:
        raise PlanError(
            f"strategy default: train, eval and env ask for {demand:g} GPU(s) "
            f"({_demand_text(counts.values())}) but the inventory has {inventory.total_gpus} ({_supply(inventory)})"
        )
    biggest = max((n.num_gpus for n in inventory.nodes), default=0)
    for c in counts.values():
        if c.count and c.gpus > biggest:
            raise PlanError(
                f"strategy default: each {c.name} worker needs {c.gpus:g} GPUs on one node; the largest node has "
                f"{biggest} ({_supply(inventory)})"
            )
    for c in counts.values():
        if c.count:
            builder.add(Unpinned(c.name, c.count, c.gpus, c.cpus))


def disaggregate(
    counts: dict[str, Counted],
    env_strategy: str,
    inventory: Inventory,
    warnings: list[str],
    topology: PlanTopology | None = None,
) -> list[Pool]:
    """train_pool (train + buffer) and rollout_pool (eval + env), on disjoint nodes when they fit. With
    env_strategy device-colocate, env i shares eval i's GPU in the rollout pool (as RLightning plans it), so
    the rollout pool needs max(eval, env) GPUs instead of eval + env. On a cluster whose nodes carry racks (or
    zones, or NVLink domains of several nodes), every rack of the nodes used holds train and rollout nodes in
    proportion, so that weight sync and experience stay inside racks (`_by_unit`); else train takes the first
    nodes and rollout the next ones."""
    t, e, v = (gpus_needed(counts[k].count, counts[k].gpus) for k in COUNTED_COMPONENTS)
    rollout = max(e, v) if env_strategy == "device-colocate" else e + v
    gpu_nodes = [(n.rank, n.num_gpus) for n in inventory.nodes if n.num_gpus > 0]
    if t + rollout > inventory.total_gpus:
        how = "max(eval, env): device-colocate" if env_strategy == "device-colocate" else "eval + env"
        raise PlanError(
            f"strategy disaggregate needs {t + rollout} GPU(s): train_pool {t} ({_demand_text([counts['train']])}) + "
            f"rollout_pool {rollout} = {how} ({_demand_text([counts['eval'], counts['env']])}); the inventory has "
            f"{inventory.total_gpus} ({_supply(inventory)})"
        )
    k = _nodes_for(gpu_nodes, t)
    rest = gpu_nodes[k:]
    if sum(g for _, g in rest) >= rollout:
        train_nodes, rollout_nodes = gpu_nodes[:k], rest[: _nodes_for(rest, rollout)]
        level = _unit_level(topology)
        if level is not None and topology is not None and t and rollout:  # a level: topology is not None
            split = _by_unit(train_nodes + rollout_nodes, t, rollout, topology, level)
            train_nodes, rollout_nodes = split or (train_nodes, rollout_nodes)
        pools = [] if not t else [_pool("train_pool", train_nodes)]
        if pools:
            pools[0].ranges["train"] = list(range(t))
        if rollout:
            pools.append(_pool("rollout_pool", rollout_nodes))
            chunks = _unit_sizes(rollout_nodes, topology, level) if level is not None else None
            _rollout_ranges(pools[-1], e, v, env_strategy, 0, _split_chunks(counts, env_strategy, chunks))
        return pools
    pool = _pool("global_pool", gpu_nodes[: _nodes_for(gpu_nodes, t + rollout)])
    warnings.append(
        f"strategy disaggregate: the inventory cannot hold train_pool ({t} GPUs) and rollout_pool ({rollout} GPUs) "
        f"on disjoint nodes, so one global_pool on nodes {format_ranks(pool.nodes)} holds both, train and rollout "
        "on separate GPUs. Add a node to keep them apart"
    )
    pool.ranges["train"] = list(range(t))
    _rollout_ranges(pool, e, v, env_strategy, t)
    return [pool]


#: The levels whose units a disaggregated plan fills in proportion, in order of preference: weight sync and
#: experience should stay inside a rack, else a zone; an inventory with NVLink domains only spreads over those.
_SPREAD_LEVELS = (RACK, ZONE, NVLINK_DOMAIN)


def _unit_level(topology: PlanTopology | None) -> str | None:
    return next((lv for lv in _SPREAD_LEVELS if topology is not None and lv in topology.units), None)


def _units(nodes: list[tuple[int, int]], topology: PlanTopology, level: str) -> list[list[tuple[int, int]]]:
    """`nodes` (rank, GPUs) in runs of consecutive nodes of one unit at `level` (a unit whose nodes are not
    consecutive gives several runs: each is filled in proportion on its own)."""
    values = topology.units[level]
    return [list(run) for _, run in groupby(nodes, key=lambda node: values[node[0]] or node[0])]


def _by_unit(
    nodes: list[tuple[int, int]], t: int, rollout: int, topology: PlanTopology, level: str
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """(train nodes, rollout nodes) of `nodes` with every unit holding train GPUs in proportion to its size: after
    each unit, train holds at least its share t * (GPUs so far) / (all GPUs), whole nodes first in rank order. None
    when whole nodes cannot give train `t` and rollout `rollout` GPUs that way (the caller keeps the contiguous
    split)."""
    total = sum(g for _, g in nodes)
    train: list[tuple[int, int]] = []
    other: list[tuple[int, int]] = []
    have = so_far = 0
    for members in _units(nodes, topology, level):
        so_far += sum(g for _, g in members)
        target = -(-t * so_far // total)
        for node in members:
            if have < target:
                train.append(node)
                have += node[1]
            else:
                other.append(node)
    if have < t or sum(g for _, g in other) < rollout:
        return None
    return sorted(train), sorted(other)


def _unit_sizes(nodes: list[tuple[int, int]], topology: PlanTopology | None, level: str) -> list[int]:
    """GPUs of each run of one unit's nodes at `level`, in pool order: consecutive pool GPU indices each."""
    assert topology is not None
    return [sum(g for _, g in members) for members in _units(nodes, topology, level)]


def _split_chunks(counts: dict[str, Counted], env_strategy: str, chunks: list[int] | None) -> list[int] | None:
    """Chunks of the rollout pool that eval and env share in proportion under env_strategy default (a rack each):
    only for workers of at most one GPU, whose ranges may end anywhere inside a node."""
    if chunks is None or env_strategy != "default" or max(counts["eval"].gpus, counts["env"].gpus) > 1:
        return None
    return chunks


def colocate(counts: dict[str, Counted], env_strategy: str, inventory: Inventory) -> list[Pool]:
    """One global_pool: train i, eval i (and env i under device-colocate) on pool GPU i."""
    _check_shareable(counts)
    t, e, v = (gpus_needed(counts[k].count, counts[k].gpus) for k in COUNTED_COMPONENTS)
    rollout = max(e, v) if env_strategy == "device-colocate" else e + v
    need = max(t, rollout)
    if need > inventory.total_gpus:
        how = "max(eval, env)" if env_strategy == "device-colocate" else "eval + env"
        raise PlanError(
            f"strategy colocate: global_pool needs {need} GPU(s) = max(train {t}, rollout {rollout} = {how}) "
            f"({_demand_text(counts.values())}); the inventory has {inventory.total_gpus} ({_supply(inventory)})"
        )
    gpu_nodes = [(n.rank, n.num_gpus) for n in inventory.nodes if n.num_gpus > 0]
    pool = _pool("global_pool", gpu_nodes[: _nodes_for(gpu_nodes, need)])
    pool.ranges["train"] = list(range(t))
    _rollout_ranges(pool, e, v, env_strategy, 0)
    return [pool]


def _check_shareable(counts: dict[str, Counted]) -> None:
    """Colocated workers share GPUs; a multi-GPU worker can share only with workers of the same GPU count
    (its bundle holds all its GPUs), so colocate needs one GPU count per worker once any exceeds 1."""
    used = {c.name: c.gpus for c in counts.values() if c.count and c.gpus > 0}
    if max(used.values(), default=0) > 1 and len(set(used.values())) > 1:
        written = ", ".join(f"{name}_each_gpu_num: {g:g}" for name, g in used.items())
        raise ConfigError(
            Problem(
                path="cluster.train_each_gpu_num",
                value=used.get("train"),
                message=f"strategy colocate puts train, eval and env on the same GPUs, so with several GPUs per "
                f"worker they must all ask the same number ({written}); make them equal or use disaggregate",
            )
        )


def _rollout_ranges(pool: Pool, e: int, v: int, env_strategy: str, start: int, chunks: list[int] | None = None) -> None:
    """eval then env on their own GPUs from pool GPU `start` on; device-colocate starts both at `start`, so
    env i shares eval i's GPU; node-affinity splits every node between them instead, so env workers sit on
    the nodes of the eval workers they serve; `chunks` (GPUs per rack of the pool) splits every rack so."""
    if env_strategy == "device-colocate":
        pool.ranges["eval"] = list(range(start, start + e))
        pool.ranges["env"] = list(range(start, start + v))
        return
    if env_strategy == "node-affinity" and e and v:
        if not _split(pool, e, v, start, pool.num_gpus):
            raise PlanError(
                f"env_strategy node-affinity: the pool's nodes ({format_ranks(pool.nodes)}) cannot split into "
                f"{e} eval GPU(s) and {v} env GPU(s) per node; add a node or use env_strategy default"
            )
        return
    if chunks is not None and e and v and _split(pool, e, v, start, chunks):
        return
    pool.ranges["eval"] = list(range(start, start + e))
    pool.ranges["env"] = list(range(start + e, start + e + v))


def _split(pool: Pool, e: int, v: int, start: int, chunks: list[int]) -> bool:
    """Split each chunk of the pool (a node, a rack) between eval (lower part) and env in proportion; False when
    the chunks cannot hold them so."""
    ev: list[int] = []
    en: list[int] = []
    end = 0
    for n in chunks:
        lo, end = max(start, end), end + n
        free = end - lo
        if free <= 0:
            continue
        take_e = min(e - len(ev), -(-free * e // (e + v)))
        take_v = min(v - len(en), free - take_e)
        ev.extend(range(lo, lo + take_e))
        en.extend(range(lo + take_e, lo + take_e + take_v))
    if len(ev) < e or len(en) < v:
        return False
    pool.ranges["eval"], pool.ranges["env"] = ev, en
    return True


def _nodes_for(nodes: list[tuple[int, int]], gpus: int) -> int:
    """How many of `nodes` (in order) hold `gpus` GPUs; len(nodes) + 1 when they cannot."""
    if gpus <= 0:
        return 0
    total = 0
    for i, (_, g) in enumerate(nodes):
        total += g
        if total >= gpus:
            return i + 1
    return len(nodes) + 1


def _pool(name: str, nodes: list[tuple[int, int]]) -> Pool:
    return Pool(name, [r for r, _ in nodes], [g for _, g in nodes])


def _demand_text(cs) -> str:
    return ", ".join(f"{c.name} {c.count} x {c.gpus:g}" for c in cs)


def _supply(inventory: Inventory) -> str:
    per: dict[int, list[int]] = {}
    for n in inventory.nodes:
        per.setdefault(n.num_gpus, []).append(n.rank)
    return "; ".join(
        f"nodes {format_ranks(r)}: {g} GPUs each" if len(r) > 1 else f"node {r[0]}: {g} GPUs" for g, r in per.items()
    )
