"""Explanations for placement groups Ray cannot place: what is missing on which node, and who holds it.

Pure functions over plain data (resource dicts, `placement_group_table()` and actor-table records), so
the messages are tested without a cluster. `rlplace.ray.reserve` calls them when a group is infeasible
(it fits on no node: wrong node, too few GPUs) or starved (it fits, but others hold the resources).
Whether a node can hold its bundles at all is the planner's check (`rlplace.planner.capacity`, shared with
`rlplace plan`); its helpers are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rlplace.inventory import Node
from rlplace.lifecycle import GroupState, WorkerState
from rlplace.planner.capacity import CPU_HINT, add, describe_node, fmt, infeasible, node_totals, shortfall

__all__ = ["CPU_HINT", "add", "describe_node", "fmt", "holders", "infeasible", "node_totals", "shortfall", "starved"]

Resources = Mapping[str, float]

_LIVE_PG_STATES = (GroupState.CREATED, GroupState.RESCHEDULING)
_LIVE_ACTOR_STATES = (
    WorkerState.ALIVE,
    WorkerState.RESTARTING,
    WorkerState.PENDING_CREATION,
    WorkerState.DEPENDENCIES_UNREADY,
)
_MAX_LISTED = 6


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
