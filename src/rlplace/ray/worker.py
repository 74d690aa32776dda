"""What a worker knows about its own placement, from one object (`rlplace.worker_placement()`).

This is the worker-side API of the Ray layer, the one `rlplace.runtime` builds on: `placement()`, the
installed job's record (`job_record()`), the rendezvous wait (`rendezvous_timeout_s()`), and what this process
is (`here()`: its node, the node's labels and address, its GPUs). It is the one module besides the port's
implementation (`rlplace.ray.ray_port`) that imports `ray`: it runs inside the actors, where Ray's runtime
context is the only source of those facts (the import-linter contract names it).

The driver hands each worker its planned placement and its rendezvous variables as a constructor
argument (`rlplace.ray.rendezvous`); the thin subclass `rlplace.ray.launch` puts around the user's class
calls `install()` with it before the user's constructor runs. `placement()` then adds what Ray really
gave the process (GPU ids, node, restart flag). Constructor arguments cost nothing per worker beyond
the actor creation itself: no KV round trip, and no runtime_env (which forces a fresh worker process,
about half a second per actor). A restarted actor gets the same arguments, so the same values.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

import ray

from rlplace.errors import PlacementError, RlplaceError
from rlplace.ray import _compat
from rlplace.ray.labels import ACCELERATOR_LABEL, NODE_RANK_LABEL

if TYPE_CHECKING:
    from rlplace.ray.port import Cluster
    from rlplace.ray.records import JobRecord

log = logging.getLogger(__name__)

#: How long the ranks of a component wait for each other at a rendezvous (the exchange of a component Ray
#: placed itself, and `init_component_group()`), unless told otherwise.
RENDEZVOUS_TIMEOUT_ENV = "RLPLACE_RENDEZVOUS_TIMEOUT_S"
DEFAULT_RENDEZVOUS_TIMEOUT_S = 120.0


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
    sees_node_gpus: bool = False  # planned so: placed through a GPU-less group on a GPU node (RLinf semantics)
    #: torch.distributed rendezvous of its component (also in os.environ: RANK, WORLD_SIZE, LOCAL_RANK, ...).
    local_world_size: int = 1
    group_rank: int = 0  # index of its node among its component's nodes (torchrun's GROUP_RANK)
    group_world_size: int = 1
    master_addr: str = ""
    master_port: int = 0
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES (or the node's accelerator's variable) as seen
    #: The devices the plan says it must see when Ray assigns it none (`Worker.visible_gpus`), else None.
    planned_visible: tuple[int, ...] | None = None
    rendezvous_env: dict[str, str] = field(default_factory=dict, hash=False)  # every variable rlplace set

    @property
    def mismatch(self) -> str | None:
        if self.planned_node_rank is None:
            return None  # not pinned: Ray chose freely
        problems = []
        if self.node_rank != self.planned_node_rank:
            problems.append(f"on node {self.node_rank}, planned node {self.planned_node_rank}")
        if self.planned_visible is not None:  # Ray assigns it no GPU: what it sees is what counts
            seen = self.visible_devices or ""
            if seen != ",".join(map(str, self.planned_visible)):
                problems.append(f"sees devices {seen!r}, planned {list(self.planned_visible)}")
        elif sorted(self.gpus) != sorted(self.planned_gpus):
            problems.append(f"got GPUs {list(self.gpus)}, planned {list(self.planned_gpus)}")
        if self.sees_all_gpus and not self.sees_node_gpus:
            problems.append(
                "got no GPU but sees every GPU of its node (CUDA_VISIBLE_DEVICES unset): start the node with "
                "`rlplace start`, or with RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 in the environment of `ray start`"
            )
        return f"{self.actor_name}: {'; '.join(problems)}" if problems else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_installed: dict[str, Any] | None = None


def install(payload: dict[str, Any]) -> None:
    """Worker side, before the user's constructor: set the rendezvous variables and keep the record.

    `payload` is what `rendezvous.Rendezvous.payload()` computed on the driver (for a component Ray placed
    itself, with the variables its workers agreed on: `rlplace.ray.exchange`)."""
    global _installed, _cached
    env = dict(payload["env"])
    os.environ.update(env)
    _installed = {**payload["placement"], "env": env}
    _cached = None


_cached: WorkerPlacement | None = None


def rendezvous_timeout_s(explicit: float | None = None) -> float:
    """The seconds a rendezvous waits for every rank: `explicit`, else $RLPLACE_RENDEZVOUS_TIMEOUT_S, else 120."""
    if explicit is not None:
        if explicit <= 0:
            raise ValueError(f"rendezvous_timeout_s must be positive, got {explicit}")
        return float(explicit)
    raw = os.environ.get(RENDEZVOUS_TIMEOUT_ENV)
    try:
        value = float(raw) if raw else DEFAULT_RENDEZVOUS_TIMEOUT_S
        if value <= 0:
            raise ValueError
    except ValueError:
        raise PlacementError(f"{RENDEZVOUS_TIMEOUT_ENV}={raw!r} is not a positive number of seconds") from None
    return value


def job_record() -> JobRecord | None:
    """Inside an rlplace worker: the record of the job that launched it (its components' rank -> node map and
    masters), read from the GCS; None when the job wrote none (or outside a worker)."""
    if _installed is None:
        return None
    from rlplace.ray import records  # only error paths need it: keep the worker's start-up import small

    return records.read(cluster(), _installed["namespace"], _installed["job"])


def cluster() -> Cluster:
    """The cluster as this worker reaches it: Ray's. (The simulation runs the actors' code in its own process and
    answers for the actor whose code runs: `rlplace.sim.memory_port`.)"""
    from rlplace.ray.ray_port import RAY

    return RAY


def restarted() -> bool:
    """Inside an actor: did Ray restart it (`max_restarts`)? Its constructor then runs again with the arguments it
    was first given."""
    if not ray.is_initialized():
        return False
    ctx = ray.get_runtime_context()
    return ctx.get_actor_id() is not None and _was_restarted(ctx)


@dataclass(frozen=True)
class Here:
    """What this process is, as Ray's runtime context says: its node, the node's labels, its address, its GPUs,
    and its own worker id."""

    node_id: str
    labels: dict[str, str]
    address: str
    gpus: tuple[int, ...]
    worker_id: str


def node_id() -> str:
    """The id (hex) of this process's node (the one fact of `here()` hot paths ask for)."""
    return ray.get_runtime_context().get_node_id()


def _labels(ctx: Any) -> dict[str, str]:
    """The labels of this process's node. Ray 2.60 annotates their values as lists of strings; they are the label
    strings themselves (`ray start --labels k=v` reads back "v")."""
    return cast(dict[str, str], dict(ctx.get_node_labels()))


def here() -> Here:
    """This process (a worker, or the driver) as Ray sees it."""
    ctx = ray.get_runtime_context()
    return Here(
        node_id=node_id(),
        labels=_labels(ctx),
        address=ray.util.get_node_ip_address(),
        gpus=tuple(int(g) for g in ray.get_gpu_ids()),
        worker_id=ctx.get_worker_id(),
    )


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
    planned = _installed
    if planned is None:
        raise RlplaceError(
            f"worker_placement() works only inside a worker started by rlplace (this process is actor {name!r} "
            f"in namespace {ctx.namespace!r}, not launched by job.launch or launch_ray_actor)"
        )
    env = planned["env"]
    gpus = tuple(int(g) for g in ray.get_gpu_ids())
    labels = _labels(ctx)
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
        local_rank=int(env.get("LOCAL_RANK", planned["local_rank"])),
        group=planned["group"],
        gpus=gpus,
        planned_gpus=tuple(planned["gpus"]),
        gpu_fraction=planned["gpu_fraction"],
        planned_node_rank=planned["node_rank"],
        accelerator=labels.get(ACCELERATOR_LABEL),
        hardware=_with_node_env(planned["hardware"], planned.get("hardware_env", ())),
        env_vars={k: os.environ.get(k, "") for k in planned["env_vars"]},
        python=sys.executable,
        node_id=node_id,
        actor_name=name or "",
        restarted=_was_restarted(ctx),
        sees_all_gpus=not planned["gpus"] and planned["node_gpus"] > 0 and "CUDA_VISIBLE_DEVICES" not in os.environ,
        sees_node_gpus=planned["sees_node_gpus"],
        local_world_size=int(env.get("LOCAL_WORLD_SIZE", 1)),
        group_rank=int(env.get("GROUP_RANK", 0)),
        group_world_size=int(env.get("GROUP_WORLD_SIZE", 1)),
        master_addr=env.get("MASTER_ADDR", ""),
        master_port=int(env.get("MASTER_PORT", 0)),
        visible_devices=os.environ.get(_compat.visible_devices_var(planned["accelerator_resource"])),
        planned_visible=None if planned.get("visible_gpus") is None else tuple(planned["visible_gpus"]),
        rendezvous_env=dict(env),
    )


def _with_node_env(hardware: dict[str, Any] | None, fallbacks: Any) -> dict[str, Any] | None:
    """The robot's config with keys it left out read from this node's environment (`ROBOT_IP`, ...)."""
    filled = {key: os.environ[var] for key, var in fallbacks if var in os.environ}
    return {**hardware, **filled} if hardware and filled else hardware


def _was_restarted(ctx: Any) -> bool:
    """Ray's `was_current_actor_reconstructed`, without the DeprecationWarning Ray 2.60 raises from inside it
    (it reads its own deprecated `actor_id`), which every worker would otherwise print to the driver."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ctx.was_current_actor_reconstructed)
