"""`plan(spec, inventory)`: the one entry point; dispatches on dialect, mode and strategy.

Pure and deterministic: the same spec and inventory always give an equal plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rlplace.errors import ConfigError, Problem
from rlplace.inventory import Inventory
from rlplace.model import COUNTED_COMPONENTS, JobSpec
from rlplace.plan import EffectiveSettings, Plan
from rlplace.planner import auto, buffer, elastic, notes, rack_hint
from rlplace.planner.builder import Block, InDriver, PlanBuilder, Unpinned
from rlplace.planner.gc_pause import gc_paused
from rlplace.planner.node_groups import plan_node_groups
from rlplace.planner.pools import Pool, bind_manual_pools, default_count, pack
from rlplace.planner.settings import Counted, Resolved, auto_counts, buffer_cpus, offload, resolve
from rlplace.planner.topology import read_topology
from rlplace.planner.verl import plan_verl


def plan(spec: JobSpec, inventory: Inventory) -> Plan:
    """Place every worker of `spec` on `inventory`; PlanError names what is missing where. Elastic components
    carry their ranges (`Plan.elastic`), and the model's size where the config says it (`Plan.model_bytes`)."""
    with gc_paused():
        placed = elastic.attach(spec, _plan(spec, inventory), inventory)
    hint = rack_hint.cross_rack_hint(spec, placed, inventory, plan)
    if hint is not None:
        placed = dataclasses.replace(placed, warnings=(*placed.warnings, hint))
    return dataclasses.replace(placed, model_bytes=spec.model_bytes) if spec.model_bytes else placed


def _plan(spec: JobSpec, inventory: Inventory) -> Plan:
    r = resolve(spec)
    builder = PlanBuilder(warnings=[*spec.warnings, *r.warnings])
    builder.topology = read_topology(spec.topology, inventory, builder.warnings)
    builder.accelerators = {n.rank: n.accelerator_resource for n in inventory.nodes if n.accelerator_resource != "GPU"}
    if spec.dialect == "verl":
        return builder.finish(_settings(spec, r, plan_verl(builder, spec, inventory), 0, builder.warnings))
    if spec.dialect == "node_groups":
        is_colocated = plan_node_groups(builder, spec, inventory)
        if r.is_colocated is not None:
            is_colocated = r.is_colocated
        n_buffer = sum(len(b.slots) for b in builder.blocks if isinstance(b, Block) and b.component == "buffer")
        return builder.finish(_settings(spec, r, is_colocated, n_buffer, builder.warnings))
    written_buffer = spec.settings.buffer_worker_num
    buffer_component = spec.component("buffer")
    if written_buffer is None and buffer_component is not None:
        written_buffer = buffer_component.num_workers
    in_driver = {c.name for c in spec.components if not c.remote}
    if r.mode == "auto":
        counts = auto_counts(spec)
        placed = _placed_counts(builder, counts, in_driver)
        if r.strategy == "default":
            auto.default_strategy(builder, placed, inventory)
            n = _buffer(
                builder,
                spec,
                in_driver,
                written_buffer,
                lambda w: buffer.spread(builder, inventory, w, placed["train"].count, buffer_cpus(spec)),
            )
            notes.default_buffer(builder, written_buffer, counts, inventory, n)
            return builder.finish(_settings(spec, r, False, n, builder.warnings), uses_placement_groups=False)
        if r.strategy == "disaggregate":
            pools = auto.disaggregate(placed, r.env_strategy, inventory, builder.warnings, builder.topology)
        else:
            pools = auto.colocate(placed, r.env_strategy, inventory)
    else:
        pools = bind_manual_pools(spec, inventory)
        counts = _manual_counts(spec, pools, builder.notes)
        placed = _placed_counts(builder, counts, in_driver)
    blocks = _pack_pools(builder, pools, placed, spec.source)
    train = blocks.get("train")
    train_pool = next((p.name for p in pools if "train" in p.ranges), None)
    _check_buffer_range(builder, pools, train)
    n = _buffer(
        builder,
        spec,
        in_driver,
        written_buffer,
        lambda w: buffer.aligned(builder, train, w, buffer_cpus(spec), train_pool, _buffer_path(spec)),
    )
    is_colocated = r.is_colocated if r.is_colocated is not None else _shares_gpu(builder, train, blocks.get("eval"))
    builder.groups = [p.summary() for p in pools]
    if r.strategy == "disaggregate":
        notes.disaggregate_leftover(builder, pools)
    notes.driver_reservation(builder, in_driver)
    return builder.finish(_settings(spec, r, is_colocated, n, builder.warnings))


def _placed_counts(builder: PlanBuilder, counts: dict[str, Counted], in_driver: set[str]) -> dict[str, Counted]:
    """The counts to place on the cluster: components that run in the driver get their workers there (an
    InDriver block, nothing reserved) and count 0 for placement."""
    out = dict(counts)
    for name in in_driver & set(counts):
        c = counts[name]
        if c.count:
            builder.add(InDriver(name, c.count, c.cpus))
        out[name] = dataclasses.replace(c, count=0)
    return out


def _buffer_path(spec: JobSpec) -> str:
    """The key the buffer component's count came from (RLightning's `buffer.storage`), else ""."""
    c = spec.component("buffer")
    return c.path if c is not None else ""


def _buffer(
    builder: PlanBuilder, spec: JobSpec, in_driver: set[str], written: int | str | None, on_cluster: Callable[..., int]
) -> int:
    """Buffer shards in the driver when the buffer does not run remotely (the written count, or one); left to
    Ray when train runs in the driver (no train node to sit beside); else where `on_cluster(written)` puts
    them (beside the train workers, or spread over the GPU nodes)."""
    count = written if isinstance(written, int) else 1
    if "buffer" in in_driver:
        if count:
            builder.add(InDriver("buffer", count, buffer_cpus(spec)))
        return count
    if "train" not in in_driver:
        return on_cluster(written)
    if count:
        builder.add(Unpinned("buffer", count, 0.0, buffer_cpus(spec)))
        builder.warnings.append(
            f"train runs in the driver (remote_train: false), so the {count} buffer shard(s) cannot sit beside train "
            "workers: Ray places them (sampling is not node-local)"
        )
    return count


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


def _manual_counts(spec: JobSpec, pools: list[Pool], notes_out: list[str]) -> dict[str, Counted]:
    """Counts written, or one worker per GPU of the range; env follows a written eval count."""
    ranged = {c: len(p.ranges[c]) for p in pools for c in p.ranges}
    out: dict[str, Counted] = {}
    filled: dict[str, int] = {}  # counts left out, filled from the ranges
    for name in COUNTED_COMPONENTS:
        c = spec.component(name)
        if c is None:
            continue
        if name not in ranged:
            if c.num_workers:
                raise ConfigError(
                    Problem(
                        path=f"cluster.{name}_worker_num",
                        value=c.num_workers,
                        file=spec.written_at(f"cluster.{name}_worker_num"),
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
                n = filled[name] = default_count(ranged[name], c.gpus_per_worker)
        out[name] = Counted(name, n, c.gpus_per_worker, c.cpus_per_worker, c)
    notes.counts_left_out(notes_out, filled)
    return out


def _pack_pools(builder: PlanBuilder, pools: list[Pool], counts: dict[str, Counted], source) -> dict[str, Block]:
    pool_of = {c: p for p in pools for c in p.ranges}
    blocks: dict[str, Block] = {}
    for name in COUNTED_COMPONENTS:
        c = counts.get(name)
        if c is not None and c.count and c.gpus <= 0 and not (name in pool_of and pool_of[name].nodes):
            _leave_to_ray(builder, c)
        elif name in counts and name in pool_of and counts[name].count:
            partners = blocks.get("eval") if name == "env" else None  # env i steps with eval i * eval / env
            blocks[name] = pack(builder, pool_of[name], counts[name], source, partners)
    return blocks


def _leave_to_ray(builder: PlanBuilder, c: Counted) -> None:
    """CPU-only workers whose pool has no node (every GPU component it was sized for runs in the driver) go to
    Ray's scheduler, said so: neither dropped nor placed on a node nothing asked for."""
    builder.add(Unpinned(c.name, c.count, 0.0, c.cpus))
    builder.warnings.append(
        f"{c.name}: its {c.count} worker(s) need no GPU and have no pool node to sit on, since the components their "
        "pool is sized for run in the driver: Ray places them"
    )


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
