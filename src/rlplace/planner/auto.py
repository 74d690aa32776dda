"""Auto mode: turn worker counts and the inventory into pools (disaggregate, colocate) or leave the
workers to Ray (default). Pools are then packed by `pools.pack`, exactly as manual pools are.

Nodes are used in rank order, GPU nodes only, as few as possible (docs/planner.md).
"""

from __future__ import annotations

from rlplace.errors import ConfigError, PlanError, Problem
from rlplace.inventory import Inventory
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
    counts: dict[str, Counted], env_strategy: str, inventory: Inventory, warnings: list[str]
) -> list[Pool]:
    """train_pool (train + buffer) and rollout_pool (eval + env), on disjoint nodes when they fit. With
    env_strategy device-colocate, env i shares eval i's GPU in the rollout pool (as RLightning plans it), so
    the rollout pool needs max(eval, env) GPUs instead of eval + env."""
    t, e, v = (gpus_needed(counts[k].count, counts[k].gpus) for k in ("train", "eval", "env"))
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
        pools = [] if not t else [_pool("train_pool", gpu_nodes[:k])]
        if pools:
            pools[0].ranges["train"] = list(range(t))
        if rollout:
            pools.append(_pool("rollout_pool", rest[: _nodes_for(rest, rollout)]))
            _rollout_ranges(pools[-1], e, v, env_strategy, 0)
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


def colocate(counts: dict[str, Counted], env_strategy: str, inventory: Inventory) -> list[Pool]:
    """One global_pool: train i, eval i (and env i under device-colocate) on pool GPU i."""
    _check_shareable(counts)
    t, e, v = (gpus_needed(counts[k].count, counts[k].gpus) for k in ("train", "eval", "env"))
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


def _rollout_ranges(pool: Pool, e: int, v: int, env_strategy: str, start: int) -> None:
    """eval then env on their own GPUs from pool GPU `start` on; device-colocate starts both at `start`, so
    env i shares eval i's GPU; node-affinity splits every node between them instead, so env workers sit on
    the nodes of the eval workers they serve."""
    if env_strategy == "device-colocate":
        pool.ranges["eval"] = list(range(start, start + e))
        pool.ranges["env"] = list(range(start, start + v))
        return
    if env_strategy != "node-affinity" or not e or not v:
        pool.ranges["eval"] = list(range(start, start + e))
        pool.ranges["env"] = list(range(start + e, start + e + v))
        return
    ev: list[int] = []
    en: list[int] = []
    end = 0
    for n in pool.num_gpus:
        lo, end = max(start, end), end + n
        free = end - lo
        if free <= 0:
            continue
        take_e = min(e - len(ev), -(-free * e // (e + v)))
        take_v = min(v - len(en), free - take_e)
        ev.extend(range(lo, lo + take_e))
        en.extend(range(lo + take_e, lo + take_e + take_v))
    if len(ev) < e or len(en) < v:
        raise PlanError(
            f"env_strategy node-affinity: the pool's nodes ({format_ranks(pool.nodes)}) cannot split into "
            f"{e} eval GPU(s) and {v} env GPU(s) per node; add a node or use env_strategy default"
        )
    pool.ranges["eval"], pool.ranges["env"] = ev, en


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
