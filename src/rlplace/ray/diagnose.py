"""Explanations for placement groups Ray cannot place: what is missing on which node, and who holds it.

Pure functions over plain data (resource dicts, `placement_group_table()` and actor-table records), so
the messages are tested without a cluster. `rlplace.ray.reserve` calls them when a group is infeasible
(it fits on no node: wrong node, too few GPUs) or starved (it fits, but others hold the resources).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rlplace.inventory import Node

Resources = Mapping[str, float]

_LIVE_PG_STATES = ("CREATED", "RESCHEDULING")
_LIVE_ACTOR_STATES = ("ALIVE", "RESTARTING", "PENDING_CREATION", "DEPENDENCIES_UNREADY")
_MAX_LISTED = 6
#: How to need fewer CPUs: every worker reserves its component's CPUs (1 unless the config says otherwise).
CPU_HINT = (
    "Every worker reserves 1 CPU unless its component asks for less: `train_each_cpu_num: 0.5` (and the like "
    "for eval, env, buffer) in the pools dialect, `num_cpus: 0.5` in a component_placement entry in the "
    "node-groups dialect; or give the node more logical CPUs: `rlplace start ... -- --num-cpus N`"
)


def add(total: dict[str, float], more: Resources) -> dict[str, float]:
    for key, value in more.items():
        total[key] = total.get(key, 0.0) + value
    return total


def shortfall(demand: Resources, have: Resources) -> dict[str, float]:
    """What `demand` asks for beyond `have` (resource -> amount missing); empty when it fits."""
    return {k: v - have.get(k, 0.0) for k, v in demand.items() if v - have.get(k, 0.0) > 1e-6}


def fmt(resources: Resources) -> str:
    """'2 GPU, 1.5 CPU, 1 rlplace/robot/franka/0' (GPU and CPU first)."""
    order = sorted(resources, key=lambda k: (k != "GPU", k != "CPU", k))
    return ", ".join(f"{resources[k]:g} {k}" for k in order) or "nothing"


def describe_node(node: Node) -> str:
    gpus = f"{node.num_gpus}x {node.gpu_model or 'GPU'}" if node.num_gpus else "no GPU"
    return f"node {node.rank} ({gpus}, {node.num_cpus:g} CPU, {node.address or '?'})"


def node_totals(node: Node) -> dict[str, float]:
    return {"GPU": float(node.num_gpus), "CPU": float(node.num_cpus), **node.resources}


def infeasible(node: Node, demand: Resources) -> str | None:
    """Why `demand` can never fit on `node`, or None when the node's totals would hold it."""
    missing = shortfall(demand, node_totals(node))
    if not missing:
        return None
    hints = [f"start the node with `--resources '{{\"{k}\": {v:g}}}'`" for k, v in missing.items() if "/" in k]
    hint = f" ({'; '.join(hints)})" if hints else ""
    if "CPU" in missing:
        hint += f". {CPU_HINT}"
    return (
        f"{describe_node(node)} can never hold what the plan reserves there ({fmt(demand)}): "
        f"missing {fmt(missing)}{hint}"
    )


def holders(
    node_id: str,
    pg_table: Mapping[str, Mapping[str, Any]],
    actors: Iterable[Mapping[str, Any]],
    exclude: Iterable[str] = (),
) -> list[str]:
    """Who holds resources on `node_id`: live placement groups with bundles there, and live actors there."""
    skip = set(exclude)
    found: list[str] = []
    for pg_id, pg in pg_table.items():
        if pg_id in skip or pg.get("state") not in _LIVE_PG_STATES:
            continue
        held: dict[str, float] = {}
        for index, where in (pg.get("bundles_to_node_id") or {}).items():
            if where == node_id:
                add(held, pg["bundles"][index])
        if held:
            name = pg.get("name") or pg_id
            found.append(f"placement group {name!r} of job {pg_id[-8:]} holds {fmt(held)}")
    for actor in actors:
        if actor.get("State") in _LIVE_ACTOR_STATES and (actor.get("Address") or {}).get("NodeID") == node_id:
            name = actor.get("Name") or actor.get("ActorClassName", "?")
            found.append(f"actor {name!r} (pid {actor.get('Pid', '?')}, job {actor.get('JobID', '?')})")
    if len(found) > _MAX_LISTED:
        found = [*found[:_MAX_LISTED], f"... and {len(found) - _MAX_LISTED} more"]
    return found


def starved(node: Node, demand: Resources, available: Resources, held_by: list[str], waited_s: float) -> str:
    """Why `demand` did not fit on `node` within the timeout although the node could hold it."""
    missing = shortfall(demand, available)
    busy = (
        f"missing {fmt(missing)} of {fmt(demand)} (free now: {fmt(_visible(available))})"
        if missing
        else (f"{fmt(demand)} looks free now; the resources were released while waiting")
    )
    who = "; ".join(held_by) if held_by else "no placement group or actor of another job is visible there"
    return f"{describe_node(node)} could not reserve its bundles within {waited_s:.1f} s: {busy}. Held by: {who}"


def _visible(available: Resources) -> dict[str, float]:
    """Drop Ray's bookkeeping entries (placement-group resources such as GPU_group_0_<id>, node markers, memory)."""
    return {
        k: v
        for k, v in available.items()
        if "_group_" not in k and not k.startswith("node:") and k not in ("memory", "object_store_memory")
    }
