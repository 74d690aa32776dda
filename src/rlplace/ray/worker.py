"""What a worker knows about its own placement, from one object (`rlplace.worker_placement()`).

The driver stores each worker's planned placement in Ray's internal key-value store (GCS) under its
namespace and actor name before starting it; the worker reads it back once and adds what Ray really
gave it (GPU ids, node, restart flag). Passing it through the store instead of `runtime_env` env vars
matters: any runtime_env forces a fresh worker process, which costs about half a second per actor.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import ray
from ray.experimental import internal_kv

from rlplace.errors import RlplaceError
from rlplace.inventory import Node
from rlplace.plan import Worker
from rlplace.ray.labels import ACCELERATOR_LABEL, NODE_RANK_LABEL

log = logging.getLogger(__name__)

_KV_NAMESPACE = "rlplace"


@dataclass(frozen=True)
class WorkerPlacement:
    """Where this worker runs: the plan's view and Ray's, side by side.

    `gpus` are the GPU ids Ray really assigned (`ray.get_gpu_ids()`), `planned_gpus` what the plan
    said; `mismatch` explains any difference in node or GPUs (None when they agree).
    """

    component: str
    rank: int
    world_size: int
    node_rank: int | None
    local_rank: int
    group: str | None
    gpus: tuple[int, ...]
    planned_gpus: tuple[int, ...]
    gpu_fraction: float
    planned_node_rank: int | None
    accelerator: str | None
    hardware: dict[str, Any] | None = field(default=None, hash=False)
    env_vars: dict[str, str] = field(default_factory=dict, hash=False)
    python: str = ""
    node_id: str = ""
    actor_name: str = ""
    restarted: bool = False
    sees_all_gpus: bool = False  # given no GPU on a GPU node, yet CUDA_VISIBLE_DEVICES is unset

    @property
    def mismatch(self) -> str | None:
        if self.planned_node_rank is None:
            return None  # not pinned: Ray chose freely
        problems = []
        if self.node_rank != self.planned_node_rank:
            problems.append(f"on node {self.node_rank}, planned node {self.planned_node_rank}")
        if sorted(self.gpus) != sorted(self.planned_gpus):
            problems.append(f"got GPUs {list(self.gpus)}, planned {list(self.planned_gpus)}")
        if self.sees_all_gpus:
            problems.append(
                "got no GPU but sees every GPU of its node (CUDA_VISIBLE_DEVICES unset): start the node with "
                "`rlplace start`, or with RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 in the environment of `ray start`"
            )
        return f"{self.actor_name}: {'; '.join(problems)}" if problems else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_key(namespace: str, actor_name: str) -> str:
    return f"{namespace}/{actor_name}"


def store(namespace: str, worker: Worker, node: Node | None) -> None:
    """Driver side: publish `worker`'s planned placement (and its node's Ray id) for the actor about to start."""
    record = {
        "node_id": node.node_id if node else None,
        "node_gpus": node.num_gpus if node else 0,
        "component": worker.component,
        "rank": worker.rank,
        "world_size": worker.world_size,
        "node_rank": worker.node_rank,
        "local_rank": worker.local_rank,
        "group": worker.group,
        "gpus": list(worker.gpus),
        "gpu_fraction": worker.gpu_fraction,
        "hardware": worker.hardware,
        "env_vars": dict(worker.env_vars),
    }
    internal_kv._internal_kv_put(
        record_key(namespace, worker.name), json.dumps(record), overwrite=True, namespace=_KV_NAMESPACE
    )


def forget(namespace: str, names: list[str]) -> None:
    """Driver side: drop the records of a job's workers at tear-down."""
    for name in names:
        internal_kv._internal_kv_del(record_key(namespace, name), namespace=_KV_NAMESPACE)


_cached: WorkerPlacement | None = None


def placement() -> WorkerPlacement:
    """Inside an rlplace worker: its placement (read once per process, then cached)."""
    global _cached
    if _cached is None:
        _cached = _read()
        if _cached.mismatch:
            log.warning("rlplace placement mismatch: %s", _cached.mismatch)
    return _cached


def _read() -> WorkerPlacement:
    if not ray.is_initialized():
        raise RlplaceError("worker_placement() works only inside a worker started by rlplace (Ray is not running)")
    ctx = ray.get_runtime_context()
    name = ctx.get_actor_name()
    raw = internal_kv._internal_kv_get(record_key(ctx.namespace, name), namespace=_KV_NAMESPACE) if name else None
    if raw is None:
        raise RlplaceError(
            f"worker_placement() works only inside a worker started by rlplace (this process is actor {name!r} "
            f"in namespace {ctx.namespace!r}, with no rlplace record)"
        )
    planned = json.loads(raw)
    labels = ctx.get_node_labels()
    rank_label = labels.get(NODE_RANK_LABEL)
    node_id = ctx.get_node_id()
    if rank_label is not None:
        node_rank: int | None = int(rank_label)
    else:  # nodes without rank labels: the driver's rank -> node map is the only truth
        node_rank = planned["node_rank"] if planned["node_id"] in (None, node_id) else None
    return WorkerPlacement(
        component=planned["component"],
        rank=planned["rank"],
        world_size=planned["world_size"],
        node_rank=node_rank,
        local_rank=planned["local_rank"],
        group=planned["group"],
        gpus=tuple(int(g) for g in ray.get_gpu_ids()),
        planned_gpus=tuple(planned["gpus"]),
        gpu_fraction=planned["gpu_fraction"],
        planned_node_rank=planned["node_rank"],
        accelerator=labels.get(ACCELERATOR_LABEL),
        hardware=planned["hardware"],
        env_vars={k: os.environ.get(k, "") for k in planned["env_vars"]},
        python=sys.executable,
        node_id=node_id,
        actor_name=name or "",
        restarted=_was_restarted(ctx),
        sees_all_gpus=not planned["gpus"] and planned["node_gpus"] > 0 and "CUDA_VISIBLE_DEVICES" not in os.environ,
    )


def _was_restarted(ctx: Any) -> bool:
    """Ray's `was_current_actor_reconstructed`, without the DeprecationWarning Ray 2.60 raises from inside it
    (it reads its own deprecated `actor_id`), which every worker would otherwise print to the driver."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ctx.was_current_actor_reconstructed)
