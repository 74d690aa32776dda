"""Inside a worker of a component Ray placed itself (no node in the plan): agreeing on the rendezvous.

Such workers cannot be told their master before they start: each publishes its node in the KV store from
inside the placed subclass's constructor and waits (bounded) until every rank of the component has, then
derives the same variables a pinned worker gets from the driver (`rlplace.ray.rendezvous`).

It reaches the cluster, and its clock, through the worker's port (`worker.cluster()`) and learns where it runs from
`worker.here()`: in a real worker Ray answers both; the simulation (`rlplace.sim.memory_port`) answers for the
actor whose code runs, so the explorer runs the exchange too.
"""

from __future__ import annotations

import json
from typing import Any

from rlplace.errors import RendezvousError
from rlplace.ray import records, worker
from rlplace.ray.labels import NODE_RANK_LABEL
from rlplace.ray.master_ports import free_ports, port_range
from rlplace.ray.worker import RENDEZVOUS_TIMEOUT_ENV


def prefix(instance: str, component: str, generation: int = 0) -> str:
    """The KV prefix of one job's (`instance`) exchange for `component` ("": every component's), at the
    component's `generation` (how many times it changed size: each size meets apart)."""
    if not component:
        return f"rdzv/{instance}/"
    return f"rdzv/{instance}/{component}/{generation}/"


def exchange(placement: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
    """Agree on the rendezvous with the component's other workers through the KV store: publish this
    worker's node, wait until every rank has, then derive the same variables a pinned worker gets.

    Rank 0 chooses its port on its own node; restarted on the same node it keeps it (same values)."""
    where, timeout_s = spec["prefix"], spec["timeout_s"]
    rank, world = placement["rank"], placement["world_size"]
    me = worker.here()
    node_id = me.node_id
    label = me.labels.get(NODE_RANK_LABEL)
    mine: dict[str, Any] = {"node_id": node_id, "address": me.address}
    mine["node_rank"] = int(label) if label is not None else _node_rank_from_record(placement, node_id)
    if rank == 0:
        before = _kv_json(where + "0")
        if before and before["node_id"] == node_id:
            mine["port"] = before["port"]
        else:
            low, high = port_range()
            first = low + (hash((placement["instance"], where)) % (high - low + 1))  # each size its own port
            mine["port"] = free_ports(1, [], low, high, first=first)[0]
    worker.cluster().kv_put(where + str(rank), json.dumps(mine))
    entries = _wait_for_peers(where, world, timeout_s, placement)
    same_node = [r for r in range(world) if entries[r]["node_id"] == node_id]
    node_ranks = ranks_of_nodes(entries)
    nodes = sorted((r, n) for n, r in node_ranks.items())
    group_rank = [n for _, n in nodes].index(node_id)
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(same_node.index(rank)),
        "LOCAL_WORLD_SIZE": str(len(same_node)),
        "NODE_RANK": str(node_ranks[node_id]),
        "GROUP_RANK": str(group_rank),
        "GROUP_WORLD_SIZE": str(len(nodes)),
        "MASTER_ADDR": entries[0]["address"],
        "MASTER_PORT": str(entries[0]["port"]),
    }


def ranks_of_nodes(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Each node the workers published, with one rank (-1: none): workers on one unranked node (a hot spare) may
    have read the job record before and after the spare took a rank over, and the node is still one node (the
    explorer found it counted twice, run 2 seed 2006825). Every worker reads the same entries: the same answer."""
    ranks: dict[str, int] = {}
    for e in entries:
        seen = e["node_rank"] if e["node_rank"] is not None else -1
        ranks[e["node_id"]] = max(ranks.get(e["node_id"], -1), seen)
    return ranks


def rejoined(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload of a worker Ray restarted, brought up to date: Ray gives it its first constructor arguments
    again, whose rank, size and exchange a resize has changed since. It meets at its component's newest exchange
    under its rank and size in the job record now; a worker the record does not hold keeps what it was given."""
    placement = payload["placement"]
    cluster = worker.cluster()
    record = records.read(cluster, placement["namespace"], placement["job"])
    where = record.worker_ranks().get(placement["name"]) if record is not None else None
    if record is None or where is None or where[0] not in record.components:
        return payload
    component, rank = where
    base = prefix(placement["instance"], "") + component + "/"
    sizes = {int(k.decode()[len(base) :].split("/")[0]) for k in cluster.kv_keys(base)}
    now = {"rank": rank, "world_size": record.components[component].world_size}
    meet = {**payload["exchange"], "prefix": prefix(placement["instance"], component, max(sizes, default=0))}
    return {**payload, "placement": {**placement, **now}, "exchange": meet}


def _wait_for_peers(where: str, world: int, timeout_s: float, placement: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = worker.cluster()
    deadline = cluster.now() + timeout_s
    pause = 0.01
    while True:
        keys = cluster.kv_keys(where)
        if len(keys) >= world:
            break
        if cluster.now() >= deadline:
            from rlplace.config.ranges import format_ranks  # the config package costs ~20 ms to import

            arrived = sorted(int(k.decode().rsplit("/", 1)[1]) for k in keys)
            missing = [r for r in range(world) if r not in arrived]
            raise RendezvousError(
                f"component {placement['component']!r}: rank(s) {format_ranks(missing)} did not start within "
                f"{timeout_s:g} s (Ray places this component itself, so its workers tell each other where they "
                f"run before their constructors run; ranks {format_ranks(arrived) or 'none'} did). A worker that "
                f"cannot be scheduled or dies while starting never arrives: check `rlplace status` and the Ray logs; "
                f"{RENDEZVOUS_TIMEOUT_ENV} in the driver's environment changes the wait"
            )
        cluster.sleep(pause)
        pause = min(pause * 2, 0.25)
    return [_kv_json(where + str(r)) or {} for r in range(world)]


def _kv_json(key: str) -> dict[str, Any] | None:
    raw = worker.cluster().kv_get(key)
    return json.loads(raw) if raw else None


def _node_rank_from_record(placement: dict[str, Any], node_id: str) -> int | None:
    """On nodes without rank labels, the job record's rank -> node map is the only truth."""
    record = records.read(worker.cluster(), placement["namespace"], placement["job"])
    if record:
        for rank, node in record.nodes.items():
            if node.node_id == node_id:
                return rank
    return None
