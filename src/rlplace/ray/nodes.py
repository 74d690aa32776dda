"""The live inventory: the nodes of the running Ray cluster, numbered by their rank labels, and their health.

Ranks come from the `rlplace/node-rank` label that `rlplace start` sets. The rules (as RLinf's): every
node has a rank or none does; ranks are unique and contiguous from 0. Without ranks the order is
deterministic for a given cluster: the head node first, then nodes with accelerators by model, then
CPU-only nodes, each by IP (then node id, which breaks ties between nodes sharing an IP). Hot spares
(`rlplace start --spare`) are alive, unranked and outside the rank rules. Everything but `live_inventory`
works on `ray.nodes()` records, so the rules are tested without a cluster.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from rlplace.errors import PlacementError
from rlplace.inventory import Inventory, Node
from rlplace.ray.join import START_HEAD, join
from rlplace.ray.labels import ACCELERATOR_LABEL, NODE_RANK_LABEL, SPARE_LABEL, node_env
from rlplace.ray.ray_port import RAY

#: Resource names Ray defines itself; everything else on a node is a custom resource (robots, ...).
_RAY_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
#: Accelerator resources Ray reports (NVIDIA, AMD and Intel GPUs are "GPU"; Ascend "NPU"; Gaudi "HPU";
#: TPU; AWS Neuron), in order of preference when a node reports several: a node's first one present is
#: the accelerator its placement ranks count (Node.accelerator_resource).
ACCELERATOR_RESOURCES = ("GPU", "NPU", "HPU", "TPU", "neuron_cores")
_RAY_RESOURCE_PREFIXES = ("node:", "accelerator_type:")
_HEAD_RESOURCE = "node:__internal_head__"


def live_inventory(address: str | None = "auto") -> Inventory:
    """Read the nodes of the running cluster (joining `address` first if not connected yet)."""
    if not RAY.connected():
        join(address or "auto", hint=f"start one with `{START_HEAD}`, or plan offline with --nodes")
    return inventory_from_nodes(RAY.nodes())


def inventory_from_nodes(raw_nodes: Iterable[Mapping[str, Any]]) -> Inventory:
    """Build the Inventory from `ray.nodes()` records (dead nodes and spares are left out)."""
    alive = [n for n in raw_nodes if n.get("Alive", True) and not is_spare(n)]
    if not alive:
        raise PlacementError("the Ray cluster has no live node")
    ranked = [n for n in alive if NODE_RANK_LABEL in (n.get("Labels") or {})]
    ordered = _by_rank_label(alive, ranked) if ranked else sorted(alive, key=_default_order)
    return Inventory(tuple(_node(rank, raw) for rank, raw in enumerate(ordered)))


# -- hot spares (`rlplace start --spare`): alive, unranked, outside the rank rules -------------------------


def is_head(raw: Mapping[str, Any]) -> bool:
    """Whether a `ray.nodes()` record is the head node's (its GCS holds the cluster)."""
    return _HEAD_RESOURCE in (raw.get("Resources") or {})


def is_spare(raw: Mapping[str, Any]) -> bool:
    return (raw.get("Labels") or {}).get(SPARE_LABEL) == "true"


def spare_nodes(raw_nodes: Iterable[Mapping[str, Any]]) -> list[Node]:
    """The live spares, as Nodes of rank -1 (a spare has no rank until it takes over one), by IP then id."""
    spares = sorted((n for n in raw_nodes if n.get("Alive", True) and is_spare(n)), key=_spare_order)
    return [_node(-1, n) for n in spares]


def node_of(raw: Mapping[str, Any], rank: int) -> Node:
    """One `ray.nodes()` record as the Node serving `rank` (a replacement node, or a spare taking a rank over)."""
    return _node(rank, raw)


def _spare_order(n: Mapping[str, Any]) -> tuple:
    return (_ip_key(n.get("NodeManagerAddress", "")), n.get("NodeID", ""))


def _by_rank_label(alive: list[Mapping[str, Any]], ranked: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if len(ranked) != len(alive):
        missing = [_describe(n) for n in alive if n not in ranked]
        raise PlacementError(
            f"{len(ranked)} of {len(alive)} nodes have a {NODE_RANK_LABEL} label; give every node a rank or "
            f"none (`rlplace start --node-rank N` or RLPLACE_NODE_RANK). Without a rank: {', '.join(missing)}"
        )
    by_rank: dict[int, Mapping[str, Any]] = {}
    for n in ranked:
        text = n["Labels"][NODE_RANK_LABEL]
        if not text.isdigit():
            raise PlacementError(f"node {_describe(n)}: {NODE_RANK_LABEL}={text!r} is not a node rank (0, 1, ...)")
        rank = int(text)
        if rank in by_rank:
            raise PlacementError(
                f"node rank {rank} is given to two nodes: {_describe(by_rank[rank])} and {_describe(n)}; "
                "node ranks must be unique"
            )
        by_rank[rank] = n
    missing_ranks = sorted(set(range(len(alive))) - set(by_rank))
    if missing_ranks:
        raise PlacementError(
            f"node ranks must be contiguous from 0 to {len(alive) - 1} for {len(alive)} nodes; the cluster has "
            f"ranks {sorted(by_rank)}, missing {missing_ranks}"
        )
    return [by_rank[r] for r in range(len(alive))]


def _default_order(n: Mapping[str, Any]) -> tuple:
    resources = n.get("Resources") or {}
    model = _accelerator(n) or ""
    has_gpu = _accelerator_resource(resources)[1] > 0
    return (
        _HEAD_RESOURCE not in resources,
        not has_gpu,
        model,
        _ip_key(n.get("NodeManagerAddress", "")),
        n.get("NodeID", ""),
    )


def _ip_key(address: str) -> tuple[int, int | str]:
    try:
        return (0, int(ipaddress.ip_address(address)))
    except ValueError:
        return (1, address)


def _accelerator(n: Mapping[str, Any]) -> str | None:
    labels = n.get("Labels") or {}
    if ACCELERATOR_LABEL in labels:
        return labels[ACCELERATOR_LABEL]
    for key in n.get("Resources") or {}:
        if key.startswith("accelerator_type:"):
            return key.split(":", 1)[1]
    return None


def _accelerator_resource(resources: Mapping[str, float]) -> tuple[str, int]:
    """The node's accelerator resource and its count: the first of ACCELERATOR_RESOURCES it has, else GPU, 0."""
    name = next((r for r in ACCELERATOR_RESOURCES if resources.get(r, 0) > 0), "GPU")
    return name, int(resources.get(name, 0))


def accelerator_of(inventory: Inventory, node_rank: int | None) -> str:
    """The accelerator resource a worker on `node_rank` requests; for a worker Ray places freely (None), the
    cluster's, when all its accelerator nodes agree (else "GPU")."""
    if node_rank is not None:
        return inventory.node(node_rank).accelerator_resource
    kinds = {n.accelerator_resource for n in inventory.nodes if n.num_gpus}
    return kinds.pop() if len(kinds) == 1 else "GPU"


def _node(rank: int, n: Mapping[str, Any]) -> Node:
    resources = n.get("Resources") or {}
    accelerator, num_gpus = _accelerator_resource(resources)
    custom = {
        k: float(v)
        for k, v in resources.items()
        if k not in _RAY_RESOURCES and k != accelerator and not k.startswith(_RAY_RESOURCE_PREFIXES)
    }
    return Node(
        rank=rank,
        num_gpus=num_gpus,
        gpu_model=_accelerator(n) if num_gpus else None,
        num_cpus=float(resources.get("CPU", 0.0)),
        labels=dict(n.get("Labels") or {}),
        node_id=n.get("NodeID"),
        address=n.get("NodeManagerAddress"),
        resources=custom,
        accelerator_resource=accelerator,
        env=node_env(n.get("Labels") or {}),
    )


def _describe(n: Mapping[str, Any]) -> str:
    return f"{n.get('NodeManagerAddress', '?')} (id {str(n.get('NodeID', '?'))[:8]})"
