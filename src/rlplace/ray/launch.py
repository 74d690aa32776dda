"""Start one worker of a plan as a Ray actor (`launch_ray_actor`, the spec's name).

Everything Ray needs to put the worker where the plan says is derived from the plan's Worker row:
the scheduling strategy (its bundle, or its node), explicit `num_cpus` (Ray's default of 1 CPU would
not fit a bundle sized for the plan), `num_gpus` = the worker's share (1/k for k workers sharing a
GPU, so Ray's accounting stays true), the group's env vars and interpreter (`runtime_env`, only when
there are some: a runtime_env costs a fresh worker process), and the name `rlplace:<component>:<rank>`.

The worker's placement record and torch.distributed rendezvous variables (`rlplace.ray.rendezvous`)
travel as one extra constructor argument: the actor class is a thin subclass of the user's class whose
constructor sets them (`rlplace.ray.worker.install`) and then runs the user's own. Methods, `isinstance`
and the class name stay the user's.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import ray
from ray.actor import ActorClass, ActorHandle

from rlplace.errors import ConfigError, PlacementError, Problem
from rlplace.plan import Worker
from rlplace.ray import _compat
from rlplace.ray import worker as worker_record
from rlplace.ray.cluster import accelerator_of
from rlplace.ray.labels import HIDE_GPUS_ENV

if TYPE_CHECKING:
    from rlplace.ray.job import Job

#: Options rlplace derives from the plan; a caller overriding them would break the placement.
PLAN_OPTIONS = frozenset({"name", "namespace", "num_cpus", "num_gpus", "scheduling_strategy", "runtime_env"})

_remote_classes: weakref.WeakKeyDictionary[type, ActorClass] = weakref.WeakKeyDictionary()


def remote_class(cls: type | ActorClass) -> ActorClass:
    """The placed subclass of `cls` as a Ray actor class, once per class (Ray exports a class's code once per
    ActorClass). An ActorClass (`ray.remote(C)` or `@ray.remote(...)`) is unwrapped to C, keeping its options."""
    if cls not in _remote_classes:
        base, written = _compat.user_class(cls)
        placed = placed_class(base)
        _remote_classes[cls] = ray.remote(**written)(placed) if written else ray.remote(placed)
    return _remote_classes[cls]


def placed_class(cls: type) -> type:
    """`cls` with a constructor that first takes the worker's rlplace payload and installs it."""

    def __init__(self: Any, _rlplace: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        worker_record.install(_rlplace)
        cls.__init__(self, *args, **kwargs)

    namespace = {
        "__init__": __init__,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    return type(cls.__name__, (cls,), namespace)


def actor_options(
    worker: Worker,
    *,
    namespace: str,
    scheduling_strategy: Any,
    max_restarts: int = 0,
    max_task_retries: int | None = None,
    options: dict[str, Any] | None = None,
    accelerator: str = "GPU",
) -> dict[str, Any]:
    """The `.options(...)` that start `worker` where the plan says."""
    if len(worker.gpus) > 1 and 0 < worker.gpu_fraction < 1:  # a spanning process (fraction 0) asks for none
        raise PlacementError(
            f"{worker.name} would take {worker.gpu_fraction:g} of each of GPUs {list(worker.gpus)}: Ray gives an "
            "actor a share of one GPU or whole GPUs, not shares of several"
        )
    clash = sorted(PLAN_OPTIONS & set(options or {}))
    if clash:
        raise ConfigError(
            Problem(
                path="options",
                value=clash,
                message=f"{', '.join(clash)} come from the plan and cannot be overridden; change the config instead",
            )
        )
    opts: dict[str, Any] = {
        "name": worker.name,
        "namespace": namespace,
        "num_cpus": worker.num_cpus,
        "num_gpus": worker.num_gpus if accelerator == "GPU" else 0,  # accelerators other than GPUs: by name
        "max_restarts": max_restarts,
    }
    if scheduling_strategy is not None:
        opts["scheduling_strategy"] = scheduling_strategy
    if max_task_retries is not None:
        opts["max_task_retries"] = max_task_retries
    runtime_env = _runtime_env(worker)
    if runtime_env:
        opts["runtime_env"] = runtime_env
    opts.update(options or {})
    if accelerator != "GPU" and worker.num_gpus:  # accelerators other than GPUs are requested by resource name
        opts["resources"] = {**opts.get("resources", {}), accelerator: worker.num_gpus}
    return opts


def _runtime_env(worker: Worker) -> dict[str, Any]:
    """Env vars and interpreter; a GPU-less worker's env also hides the GPUs, as the env is paid for anyway."""
    env: dict[str, Any] = {}
    if worker.python:
        env["py_executable"] = worker.python
    if worker.env_vars or env:
        hide = HIDE_GPUS_ENV if worker.num_gpus == 0 and worker.visible_gpus is None else {}
        env["env_vars"] = {**hide, **worker.env_vars}
    return env


def launch_ray_actor(
    cls: type | ActorClass,
    component: str,
    rank: int,
    *args: Any,
    job: Job,
    max_restarts: int = 0,
    max_task_retries: int | None = None,
    options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> ActorHandle:
    """Start worker `rank` of `component` of `job`'s plan as an actor of `cls(*args, **kwargs)`."""
    worker = job.worker(component, rank)
    job.check_interpreters([worker])
    payload = job.rendezvous.payload(worker)
    opts = actor_options(
        worker,
        namespace=job.namespace,
        scheduling_strategy=job.scheduling_strategy(worker),
        max_restarts=max_restarts,
        max_task_retries=max_task_retries,
        options=options,
        accelerator=accelerator_of(job.live, worker.node_rank),
    )
    handle = remote_class(cls).options(**opts).remote(payload, *args, **kwargs)
    job.track(worker, handle)
    return handle
