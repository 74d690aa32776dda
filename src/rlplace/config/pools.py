"""Dialect "pools" (RLightning's; docs/config.md, 'Dialect "pools"') -> the one model: settings, components, pools as
groups.

The input is the structurally checked `cluster:` section (see `sections.POOLS_SECTION`); here live the
rules that relate keys: mode vs resource_pool, strategy vs env_strategy and is_colocated, one pool per
component, pool sizes (num_node, node_ids, num_gpus), ranges inside their pool, and worker demand
against the range it is given. Values the user did not write stay None for the planner to derive.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Literal

from rlplace.config.fields import (
    INVALID,
    sections,
    written,
    written_as,
    written_choice,
    written_list,
    written_section,
)
from rlplace.config.problems import Path, Reporter, format_path
from rlplace.config.ranges import format_ranks
from rlplace.config.sections import CPU_KEYS, REMOTE_KEYS
from rlplace.model import (
    COUNTED_COMPONENTS,
    ENV_STRATEGIES,
    MODES,
    POOL_COMPONENTS,
    RESERVED_LABELS,
    STRATEGIES,
    ComponentSpec,
    JobSpec,
    NodeGroupSpec,
    Placement,
    PlacementSettings,
    Segment,
)

#: Buffer shards hold host memory; a range only says on which pool's nodes they live.
BUFFER_GPUS = 0.0


def build(cluster: Mapping[str, object], base: Path, pools: object, pools_path: Path, rep: Reporter) -> JobSpec:
    """The JobSpec of a pools-dialect section; problems go to `rep` (the caller raises)."""
    block = written_section(cluster, "placement")
    settings = PlacementSettings(
        mode=written_choice(block, "mode", MODES) or "auto",
        strategy=written_choice(block, "strategy", STRATEGIES),
        env_strategy=written_choice(block, "env_strategy", ENV_STRATEGIES),
        is_colocated=written_as(cluster, "is_colocated", bool),
        enable_offload=written_as(cluster, "enable_offload", bool),
        buffer_worker_num=_buffer_worker_num(cluster),
    )
    if block.get("strategy") is not INVALID:  # a misspelt strategy is reported once, not as "not written"
        _check_settings(settings, base, rep)
    spec = _spec(cluster, base, settings, pools, pools_path, rep)
    components = _driver_and_cpus(spec.components, cluster, base)
    extras = {k: cluster[k] for k in ("rollout_env_interaction",) if k in cluster and cluster[k] is not INVALID}
    ray_address = written_as(cluster, "ray_address", str)
    return dataclasses.replace(spec, components=components, ray_address=ray_address, extras=extras)


def _buffer_worker_num(cluster: Mapping[str, object]) -> int | Literal["auto"] | None:
    """`buffer_worker_num` as written: a count, or auto (sections._buffer_num)."""
    return "auto" if written(cluster, "buffer_worker_num") == "auto" else written_as(cluster, "buffer_worker_num", int)


def _spec(
    cluster: Mapping[str, object],
    base: Path,
    settings: PlacementSettings,
    pools: object,
    pools_path: Path,
    rep: Reporter,
) -> JobSpec:
    block = written_section(cluster, "placement")
    mode_path = (*base, "placement", "mode")
    if block.get("mode") is INVALID or pools is INVALID:
        return JobSpec("pools", settings, ())
    if settings.mode == "auto":
        if pools is not None:
            rep.add(
                pools_path,
                "resource_pool is only read in manual mode, but placement.mode is auto"
                + ("" if "mode" in block else " (the default when not written)")
                + "; set placement.mode: manual to use these pools, or remove resource_pool",
            )
        return JobSpec("pools", settings, tuple(_auto_component(c, cluster, base) for c in COUNTED_COMPONENTS))
    if pools is None:
        rep.add(
            mode_path,
            "placement.mode is manual but no resource_pool is given; add a resource_pool list (name, num_node, "
            "num_gpus and each component's GPU range) or use mode: auto",
            "manual",
        )
        return JobSpec("pools", settings, ())
    pool_sections = sections(pools)
    groups, ranges = _pools(pool_sections, pools_path, rep)
    written_in_pools = {c for pool in pool_sections for c in POOL_COMPONENTS if c in pool}
    components = _manual_components(cluster, base, settings, written_in_pools, ranges, rep)
    return JobSpec("pools", settings, components, node_groups=groups)


def _driver_and_cpus(
    components: tuple[ComponentSpec, ...], cluster: Mapping[str, object], base: Path
) -> tuple[ComponentSpec, ...]:
    """`<c>_each_cpu_num` and RLightning's `remote_<c>: false` on their components; a buffer that only these
    keys mention gets a component of its own (no placement: the planner places shards as usual)."""
    cpus = {c: n for key, c in CPU_KEYS.items() if (n := written_as(cluster, key, float)) is not None}
    remote = {c: written_as(cluster, key, bool) for key, c in REMOTE_KEYS.items()}
    out = list(components)
    if "buffer" not in {c.name for c in out} and ("buffer" in cpus or remote["buffer"] is False):
        out.append(ComponentSpec(name="buffer", gpus_per_worker=BUFFER_GPUS, path=format_path(base)))
    return tuple(
        dataclasses.replace(
            c, cpus_per_worker=cpus.get(c.name, c.cpus_per_worker), remote=remote.get(c.name) is not False
        )
        for c in out
    )


def _check_settings(s: PlacementSettings, base: Path, rep: Reporter) -> None:
    placement = (*base, "placement")
    strategy = s.auto_strategy
    if s.mode == "auto" and s.env_strategy not in (None, "default") and strategy == "default":
        rep.warn(
            (*placement, "env_strategy"),
            f"env_strategy: {s.env_strategy} has no effect under strategy default"
            + ("" if s.strategy else " (the strategy when none is written)")
            + ": nothing is pinned, Ray schedules every worker; use strategy disaggregate or colocate to apply it",
            s.env_strategy,
        )
    if s.is_colocated is not None and s.strategy is not None and s.is_colocated != (s.strategy == "colocate"):
        want = "colocate" if s.is_colocated else "default or disaggregate"
        rep.add(
            (*base, "is_colocated"),
            f"is_colocated: {str(s.is_colocated).lower()} contradicts placement.strategy: {s.strategy}; "
            f"use strategy: {want}, or remove is_colocated (it follows the strategy)",
            s.is_colocated,
        )


def _auto_component(name: str, cluster: Mapping[str, object], base: Path) -> ComponentSpec:
    count_key = f"{name}_worker_num"
    gpus = written_as(cluster, f"{name}_each_gpu_num", float)
    return ComponentSpec(
        name=name,
        num_workers=written_as(cluster, count_key, int),
        gpus_per_worker=1.0 if gpus is None else gpus,
        path=format_path((*base, count_key) if count_key in cluster else base),
    )


def _pools(
    pools: list[Mapping[str, object]], pools_path: Path, rep: Reporter
) -> tuple[tuple[NodeGroupSpec, ...], dict[str, tuple[str, tuple[int, ...], Path]]]:
    """Each pool as a node group, and each component's (pool, range, key path)."""
    claimed = _claimed_nodes(pools, pools_path, rep)
    free = _free_ranks(set(claimed))
    groups: list[NodeGroupSpec] = []
    ranges: dict[str, tuple[str, tuple[int, ...], Path]] = {}
    names: dict[str, int] = {}
    for i, pool in enumerate(pools):
        path = (*pools_path, i)
        name = written(pool, "name")
        if isinstance(name, str):
            if name in RESERVED_LABELS:
                rep.add((*path, "name"), f"'{name}' is a reserved group name ({', '.join(RESERVED_LABELS)})", name)
            elif name in names:
                rep.add((*path, "name"), f"pool name '{name}' is already used by resource_pool[{names[name]}]", name)
            names[name] = i
        shape = _pool_shape(pool, path, free, rep)
        if shape is None or not isinstance(name, str):
            continue
        ranks, gpus, node_ids = shape
        total = sum(gpus)
        for comp in POOL_COMPONENTS:
            rng = written_as(pool, comp, tuple)  # RANKS: a tuple of ranks
            if rng is None:
                continue
            rng_path = (*path, comp)
            beyond = [r for r in rng if r >= total]
            if beyond:
                rep.add(
                    rng_path,
                    f"GPU index {beyond[0]} is outside pool '{name}', which has {total} GPUs "
                    f"({_describe_gpus(gpus)}), so indices run 0-{total - 1}",
                    pool.get(comp),
                )
            elif comp in ranges:
                other = ranges[comp][0]
                rep.add(
                    rng_path,
                    f"{comp} already has a range in pool '{other}'; a component lives in exactly one pool "
                    "(merge the ranges into one pool)",
                    pool.get(comp),
                )
            else:
                ranges[comp] = (name, rng, rng_path)
        groups.append(
            NodeGroupSpec(label=name, node_ranks=ranks, gpus_per_node=gpus, node_ids=node_ids, path=format_path(path))
        )
    return tuple(groups), ranges


def _describe_gpus(gpus: tuple[int, ...]) -> str:
    if len(set(gpus)) == 1:
        return f"{len(gpus)} node{'s' if len(gpus) != 1 else ''} x {gpus[0]}"
    return " + ".join(str(g) for g in gpus)


def _claimed_nodes(pools: list[Mapping[str, object]], pools_path: Path, rep: Reporter) -> dict[int, str]:
    """Node ranks bound by integer node_ids; a node in two pools is an error (their GPU indices collide)."""
    claimed: dict[int, str] = {}
    for i, pool in enumerate(pools):
        for j, node in enumerate(written_list(pool, "node_ids")):
            if not isinstance(node, int):
                continue
            if node in claimed:
                rep.add(
                    (*pools_path, i, "node_ids", j),
                    f"node {node} is already in pool '{claimed[node]}'; pools must not share nodes",
                    node,
                )
            claimed.setdefault(node, str(written(pool, "name")))
    return claimed


def _free_ranks(claimed: set[int]) -> Iterator[int]:
    """Node ranks in order, skipping those bound by node_ids: what pools without node_ids take."""
    rank = 0
    while True:
        if rank not in claimed:
            yield rank
        rank += 1


def _pool_shape(
    pool: Mapping[str, object], path: Path, free: Iterator[int], rep: Reporter
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int | str, ...] | None] | None:
    """(node ranks, GPUs per node, node_ids) of a pool, or None when its size cannot be told."""
    node_ids = written_as(pool, "node_ids", list)  # ints and labels (strs)
    num_node = written_as(pool, "num_node", int)
    num_gpus = written(pool, "num_gpus")
    if pool.get("node_ids") is INVALID or pool.get("num_node") is INVALID or num_gpus is None:
        return None
    if node_ids is not None:
        ids: tuple[int | str, ...] = tuple(node_ids)
        if len(set(map(str, ids))) != len(ids):
            rep.add((*path, "node_ids"), "node_ids lists a node twice; name each node once", list(ids))
            return None
        if all(isinstance(n, str) for n in ids) is False and any(isinstance(n, str) for n in ids):
            rep.add(
                (*path, "node_ids"), "node_ids must be all node ranks (ints) or all node names, not both", list(ids)
            )
            return None
        if num_node is not None and num_node != len(ids):
            rep.add(
                (*path, "num_node"),
                f"num_node is {num_node} but node_ids names {len(ids)} nodes; remove num_node or make them agree",
                num_node,
            )
            return None
        count = len(ids)
    elif num_node is None:
        rep.add((*path, "num_node"), "a resource pool needs num_node (or node_ids naming its nodes)")
        return None
    else:
        count = num_node
        ids = ()
    gpus = _gpus_per_node(num_gpus, count, bool(ids), (*path, "num_gpus"), rep)
    if gpus is None:
        return None
    # Integer node_ids are the node ranks; names are resolved by the planner against the inventory.
    ranks = tuple(n for n in ids if isinstance(n, int)) if ids else tuple(next(free) for _ in range(count))
    return ranks, gpus, ids or None


def _gpus_per_node(num_gpus: object, count: int, bound: bool, path: Path, rep: Reporter) -> tuple[int, ...] | None:
    if isinstance(num_gpus, int):
        return (num_gpus,) * count
    assert isinstance(num_gpus, list), num_gpus  # the schema's Switch: one count, or a list of counts
    gpus = tuple(num_gpus)
    if len(gpus) != count:
        rep.add(
            path,
            f"num_gpus lists {len(gpus)} counts but the pool has {count} nodes; give one count per node",
            list(gpus),
        )
        return None
    if not bound and len(set(gpus)) > 1:
        rep.add(
            path,
            f"nodes of a pool without node_ids must have the same GPU count, got {list(gpus)}; bind the pool to "
            "its nodes with node_ids (one num_gpus entry per node), or split it into pools of equal nodes",
            list(gpus),
        )
        return None
    return gpus


def _manual_components(
    cluster: Mapping[str, object],
    base: Path,
    settings: PlacementSettings,
    written_in_pools: set[str],
    ranges: dict[str, tuple[str, tuple[int, ...], Path]],
    rep: Reporter,
) -> tuple[ComponentSpec, ...]:
    for name in COUNTED_COMPONENTS:
        for key in (f"{name}_worker_num", f"{name}_each_gpu_num"):
            if key in cluster and name not in written_in_pools:
                rep.add(
                    (*base, key),
                    f'{key} is set but no resource_pool entry gives {name} a GPU range; add {name}: "0-7" '
                    "(pool-global indices) to one pool, or remove the key",
                    cluster.get(key),
                )
    components = []
    for name in POOL_COMPONENTS:
        if name not in ranges:
            continue
        pool, rng, rng_path = ranges[name]
        if name == "buffer":
            count = settings.buffer_worker_num if isinstance(settings.buffer_worker_num, int) else None
            gpus = BUFFER_GPUS
        else:
            count = written_as(cluster, f"{name}_worker_num", int)
            gpus_written = written_as(cluster, f"{name}_each_gpu_num", float)
            gpus = 1.0 if gpus_written is None else gpus_written
        if count is not None:
            _check_demand(name, count, gpus, rng, (*base, f"{name}_worker_num"), rep)
        components.append(
            ComponentSpec(
                name=name,
                placement=Placement(groups=(pool,), segments=(Segment(resources=rng),)),
                num_workers=count,
                gpus_per_worker=gpus,
                path=format_path(rng_path),
            )
        )
    return tuple(components)


def gpus_for(count: int, gpus: float) -> int:
    """GPUs of a range that `count` workers of `gpus` GPUs each take, packed in index order (0: CPU-only)."""
    if gpus <= 0:
        return 0
    return count * int(gpus) if gpus >= 1 else math.ceil(count / math.floor(1 / gpus + 1e-9))


def _check_demand(name: str, count: int, gpus: float, rng: tuple[int, ...], path: Path, rep: Reporter) -> None:
    """Workers are packed in index order onto their range: more demand than it holds is an error."""
    needed = gpus_for(count, gpus)
    if needed > len(rng):
        rep.add(
            path,
            f"{count} {name} workers x {gpus:g} GPU each need {needed} GPUs, but the {name} range "
            f"{format_ranks(rng)} holds {len(rng)}; widen the range or lower {name}_worker_num",
            count,
        )
