"""The node-loss rules, on plain data: which node may take a lost rank over, and what to say when none did.

No Ray call in here: the node watcher (`rlplace.ray.failover.watcher`) reads the GCS node table and hands the
records to these functions. A candidate passes through filters that each return why it is refused (None: it
may take over): a replacement must carry the lost rank's label and serve no other rank; a rank holding
attached hardware (robots) takes no spare; a spare must match the lost node's GPU count and model, have the
CPUs the rank reserved, and have them free. Replacements come first, then spares nearest the lost node (its
NVLink domain, rack, zone: `planner.topology.spare_order`), else in IP order. After an elastic
shrink the same rules say which joining nodes may serve the ranks that are gone (`joiners`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlplace.errors import NodeLostError
from rlplace.inventory import Inventory, Node
from rlplace.lifecycle import EventKind, NodeMark, Takeover
from rlplace.model import DEFAULT_TOPOLOGY, TopologyLevel
from rlplace.planner.topology import spare_order
from rlplace.ray import diagnose
from rlplace.ray.labels import NODE_RANK_LABEL
from rlplace.ray.nodes import node_of, spare_nodes
from rlplace.ray.state import NodeEvent, ResizeEvent, Trouble

_MOVABLE = ("CPU", "GPU")


def hardware_of(demand: Mapping[str, float], node: Node) -> list[str]:
    """The reserved resources that are attached hardware (robots): they cannot move to another node."""
    movable = {*_MOVABLE, node.accelerator_resource}
    return sorted(k for k in demand if k not in movable)


def spare_refusal(lost: Node, demand: Mapping[str, float], spare: Node, free: Mapping[str, float] | None) -> str | None:
    """Why `spare` cannot take over `lost` (None: it can). Same GPU count and model, enough CPUs, and (when
    `free` is known) those resources not held by someone else."""
    where = f"spare {spare.address or '?'} (id {str(spare.node_id)[:8]})"
    if spare.num_gpus != lost.num_gpus or (lost.num_gpus and spare.gpu_model != lost.gpu_model):
        return f"{where} has {gpus(spare)}, node {lost.rank} had {gpus(lost)}"
    wanted = {k: v for k, v in demand.items() if k in (*_MOVABLE, lost.accelerator_resource)}
    missing = diagnose.shortfall(wanted, diagnose.node_totals(spare))
    if missing:
        return f"{where} lacks {diagnose.fmt(missing)} of the {diagnose.fmt(wanted)} node {lost.rank} reserved"
    if free is not None:
        busy = diagnose.shortfall(wanted, free)
        if busy:
            return f"{where} is busy: {diagnose.fmt(busy)} of what node {lost.rank} reserved is held by others"
    return None


def candidates(
    rank: int,
    lost: Node,
    alive: Iterable[Mapping[str, Any]],
    *,
    serving: set[str],
    demand: Mapping[str, float],
    free: Mapping[str, Mapping[str, float]],
    levels: Sequence[TopologyLevel] = DEFAULT_TOPOLOGY,
    refusals: dict[str, str],
) -> list[tuple[Takeover, Node]]:
    """The nodes that may take `rank` (served by `lost` until now) over, as (REPLACEMENT or SPARE, node),
    replacements first, spares nearest the lost node first (its NVLink domain, rack, zone: `spare_order`, by the
    job's topology `levels`). `alive` are the live `ray.nodes()` records, `serving` the ids of nodes serving one
    of the job's ranks now, `free` the free resources per node id. Every refused spare's reason goes into
    `refusals` (node id -> why), the caller's dict: the watcher keeps them in the rank's `Trouble`, a drain's
    probe says them in its event."""
    alive = list(alive)
    out: list[tuple[Takeover, Node]] = []
    for n in alive:
        if (n.get("Labels") or {}).get(NODE_RANK_LABEL) == str(rank) and n["NodeID"] not in serving:
            out.append((Takeover.REPLACEMENT, node_of(n, rank)))
    spares = spare_nodes(alive)
    if hardware_of(demand, lost) or not spares:
        return out  # a robot cannot move: only its own node, started again, can take the rank back
    for spare in spare_order(lost, spares, levels):
        if str(spare.node_id) in serving:
            continue  # already serving another rank
        why = spare_refusal(lost, demand, spare, free.get(str(spare.node_id)))
        if why:
            refusals[str(spare.node_id)] = why
        else:
            out.append((Takeover.SPARE, dataclasses.replace(spare, rank=rank)))
    return out


def joiners(
    down: Iterable[int],
    live: Inventory,
    alive: Iterable[Mapping[str, Any]],
    *,
    serving: set[str],
    levels: Sequence[TopologyLevel] = DEFAULT_TOPOLOGY,
) -> dict[int, tuple[Takeover, Node]]:
    """Nodes that may serve the job after an elastic shrink: rank -> (REPLACEMENT, SPARE or NEW_NODE, node).
    For each rank in `down` (gone, its components shrank), a node started again with its rank label, else a spare
    with the lost node's GPU count and model; then nodes labelled with the next ranks (`len(live)`, ...), which
    join the job's inventory as new capacity. `alive` are live `ray.nodes()` records, `serving` the ids of nodes
    serving one of the job's ranks."""
    free = [n for n in alive if n["NodeID"] not in serving]
    taken: set[str] = set()
    out: dict[int, tuple[Takeover, Node]] = {}

    def labelled(rank: int) -> Mapping[str, Any] | None:
        want = str(rank)
        return next((n for n in free if (n.get("Labels") or {}).get(NODE_RANK_LABEL) == want), None)

    for rank in sorted(down):
        replacement = labelled(rank)
        if replacement is not None:
            out[rank] = (Takeover.REPLACEMENT, node_of(replacement, rank))
            taken.add(replacement["NodeID"])
            continue
        lost = live.node(rank)
        for spare in spare_order(lost, spare_nodes(free), levels):
            if str(spare.node_id) not in taken and spare_refusal(lost, {}, spare, None) is None:
                out[rank] = (Takeover.SPARE, dataclasses.replace(spare, rank=rank))
                taken.add(str(spare.node_id))
                break
    rank = len(live)
    while (more := labelled(rank)) is not None:
        out[rank] = (Takeover.NEW_NODE, node_of(more, rank))
        rank += 1
    return out


def size_changes(events: Iterable[ResizeEvent]) -> str:
    """'train 2 -> 1, buffer 2 -> 1' for the components of a resize step."""
    return ", ".join(f"{e.component} {e.old_size} -> {e.new_size}" for e in events)


def lost_error(rank: int, trouble: Trouble, demand: Mapping[str, float], replace_within_s: float) -> NodeLostError:
    """The NodeLostError of a rank no node took over within the window: what the job waited for, and why the
    nodes that showed up were not taken (the rank's `trouble`: its lost node, workers and refusals)."""
    waited = _waited_for(rank, trouble, demand, replace_within_s)
    names = ", ".join(trouble.workers) or "none launched yet"
    message = (
        f"node {rank} ({gpus(trouble.node)}, {trouble.node.address or '?'}) was lost and its workers ({names}) "
        f"could not be moved: the job waited for {waited}. Start a spare (`rlplace start --spare "
        f"--address HEAD:PORT`) or the node again (`rlplace start --node-rank {rank} --address HEAD:PORT`), "
        "or raise connect(..., replace_within_s=...)"
    )
    return NodeLostError(message, node_rank=rank, workers=trouble.workers, waited_for=waited)


def _waited_for(rank: int, trouble: Trouble, demand: Mapping[str, float], replace_within_s: float) -> str:
    hardware = hardware_of(demand, trouble.node)
    window = "no time (replace_within_s=0)" if replace_within_s == 0 else f"{replace_within_s:g} s"
    if hardware:
        what = (
            f"a replacement node with rank {rank} for {window} (it holds {', '.join(hardware)}: attached "
            "hardware cannot move to a spare)"
        )
    else:
        what = f"a hot spare with {gpus(trouble.node)} or a replacement node with rank {rank} for {window}"
    if trouble.shrink_refusal:
        what += f" (its components could not shrink instead: {trouble.shrink_refusal})"
    if replace_within_s == 0:
        return what
    if trouble.refusals:
        what += "; not taken: " + "; ".join(trouble.refusals.values())
    elif not hardware:
        what += "; no spare joined the cluster"
    return what


def health_notes(events: Iterable[NodeEvent]) -> dict[int, tuple[NodeMark, str]]:
    """rank -> (mark, note) for ranks that are not plainly healthy: LOST, FAILED, SPARE, REPLACED (the topology
    picture shows them), by each rank's latest event (a draining notice changes nothing yet)."""
    out: dict[int, tuple[NodeMark, str]] = {}
    for e in events:
        if e.kind == EventKind.LOST:
            out[e.node_rank] = (NodeMark.LOST, f"lost {time.strftime('%H:%M:%S', time.localtime(e.at))}")
        elif e.kind == EventKind.FAILED:
            out[e.node_rank] = (NodeMark.FAILED, "lost; no spare or replacement in time")
        elif e.kind == EventKind.SPARE:
            out[e.node_rank] = (NodeMark.SPARE, f"on spare {e.address}")
        elif e.kind == EventKind.REPLACEMENT:
            out[e.node_rank] = (NodeMark.REPLACED, f"replaced: {e.address}")
        elif e.kind == EventKind.SHRUNK:
            out[e.node_rank] = (NodeMark.LOST, "lost; elastic components shrank")
        elif e.kind == EventKind.GROWN:
            out[e.node_rank] = (NodeMark.REPLACED, f"joined: {e.address}; components grew back")
    return out


def gpus(node: Node) -> str:
    return f"{node.num_gpus}x {node.gpu_model or 'GPU'}" if node.num_gpus else "no GPU"


def death_reason(raw: Mapping[str, Any]) -> str:
    text = str(raw.get("DeathReasonMessage") or "").strip()
    return f" ({text})" if text else ""
