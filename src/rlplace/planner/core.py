"""`plan(spec, inventory)`: the one entry point; dispatches on dialect, mode and strategy.

Pure and deterministic: the same spec and inventory always give an equal plan.
"""

from __future__ import annotations

from rlplace.errors import ConfigError, Problem
from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.plan import EffectiveSettings, Plan
from rlplace.planner import auto, buffer
from rlplace.planner.builder import Block, PlanBuilder
from rlplace.planner.gc_pause import gc_paused
from rlplace.planner.node_groups import plan_node_groups
from rlplace.planner.pools import Pool, bind_manual_pools, default_count, pack
from rlplace.planner.settings import Counted, Resolved, auto_counts, buffer_cpus, offload, resolve


def plan(spec: JobSpec, inventory: Inventory) -> Plan:
    """Place every worker of `spec` on `inventory`; PlanError names what is missing where."""
    with gc_paused():
        return _plan(spec, inventory)


def _plan(spec: JobSpec, inventory: Inventory) -> Plan:
    r = resolve(spec)
    builder = PlanBuilder(warnings=list(r.warnings))
    if spec.dialect == "node_groups":
        is_colocated = plan_node_groups(builder, spec, inventory)
        if r.is_colocated is not None:
            is_colocated = r.is_colocated
        n_buffer = sum(len(b.slots) for b in builder.blocks if isinstance(b, Block) and b.component == "buffer")
        return builder.finish(_settings(spec, r, is_colocated, n_buffer, builder.warnings))
    written_buffer = spec.settings.buffer_worker_num
    if written_buffer is None and spec.component("buffer") is not None:
        written_buffer = spec.component("buffer").num_workers
    if r.mode == "auto":
        counts = auto_counts(spec)
        if r.strategy == "default":
            auto.default_strategy(builder, counts, inventory)
            n = buffer.spread(builder, inventory, written_buffer, counts["train"].count, buffer_cpus(spec))
            return builder.finish(_settings(spec, r, False, n, builder.warnings), uses_placement_groups=False)
        if r.strategy == "disaggregate":
            pools = auto.disaggregate(counts, r.env_strategy, inventory, builder.warnings)
        else:
            pools = auto.colocate(counts, r.env_strategy, inventory)
    else:
        pools = bind_manual_pools(spec, inventory)
        counts = _manual_counts(spec, pools)
    blocks = _pack_pools(builder, pools, counts, spec.source)
    train = blocks.get("train")
    train_pool = next((p.name for p in pools if "train" in p.ranges), None)
    _check_buffer_range(builder, pools, train)
    n = buffer.aligned(builder, train, written_buffer, buffer_cpus(spec), train_pool)
    is_colocated = r.is_colocated
    if is_colocated is None:
        is_colocated = _shares_gpu(builder, train, blocks.get("eval"))
    builder.groups = [p.summary() for p in pools]
    return builder.finish(_settings(spec, r, is_colocated, n, builder.warnings))


def _settings(spec: JobSpec, r: Resolved, is_colocated: bool, n_buffer: int, warnings: list[str]) -> EffectiveSettings:
    return EffectiveSettings(
        mode=r.mode,
        strategy=r.strategy,
        env_strategy=r.env_strategy,
        is_colocated=is_colocated,
        enable_offload=offload(spec, is_colocated, warnings),
        buffer_worker_num=n_buffer,
        dialect=spec.dialect,
    )


def _manual_counts(spec: JobSpec, pools: list[Pool]) -> dict[str, Counted]:
    """Counts written, or one worker per GPU of the range; env follows a written eval count."""
    ranged = {c: len(p.ranges[c]) for p in pools for c in p.ranges}
    out: dict[str, Counted] = {}
    for name in ("train", "eval", "env"):
        c = spec.component(name)
        if c is None:
            continue
        if name not in ranged:
            if c.num_workers:
                raise ConfigError(
                    Problem(
                        path=f"cluster.{name}_worker_num",
                        value=c.num_workers,
                        file=spec.source,
                        message=f"{c.num_workers} {name} worker(s) asked for, but no resource_pool entry gives "
                        f'{name} a GPU range; add e.g. `{name}: "0-{c.num_workers - 1}"` to a pool',
                    )
                )
            continue
        n = c.num_workers
        if n is None:
            ev = spec.component("eval")
            if name == "env" and ev is not None and ev.num_workers is not None:
                n = ev.num_workers
            else:
                n = default_count(ranged[name], c.gpus_per_worker)
        out[name] = Counted(name, n, c.gpus_per_worker, c.cpus_per_worker, c)
    return out


def _pack_pools(builder: PlanBuilder, pools: list[Pool], counts: dict[str, Counted], source) -> dict[str, Block]:
    pool_of = {c: p for p in pools for c in p.ranges}
    blocks = {}
    for name in ("train", "eval", "env"):
        if name in counts and name in pool_of and counts[name].count:
            blocks[name] = pack(builder, pool_of[name], counts[name], source)
    return blocks


def _check_buffer_range(builder: PlanBuilder, pools: list[Pool], train: Block | None) -> None:
    """A buffer range in a pool cannot move the shards off the train nodes; say so if it disagrees."""
    for p in pools:
        if "buffer" in p.ranges and train is not None:
            nodes, _ = p.flat()
            asked = sorted({nodes[i] for i in p.ranges["buffer"]})
            at = sorted({builder.slot_node[s] for s in train.slots})
            if asked != at:
                builder.warnings.append(
                    f"buffer range in {p.name} covers nodes {asked}, but buffer shards follow the train workers "
                    f"(nodes {at}): one shard per train node"
                )


def _shares_gpu(builder: PlanBuilder, a: Block | None, b: Block | None) -> bool:
    if a is None or b is None:
        return False
    gpus, mine = builder.slot_gpus, set(a.slots)
    return any(gpus[s] for s in b.slots if s in mine)  # stops at the first shared GPU (usually the first worker)
