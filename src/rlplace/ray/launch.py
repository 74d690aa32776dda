"""Start one worker of a plan as a Ray actor (`launch_ray_actor`, RLightning's name).

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from rlplace.errors import ConfigError, PlacementError, Problem
from rlplace.plan import Worker
from rlplace.ray import worker as worker_record
from rlplace.ray.interpreter import check_interpreters
from rlplace.ray.labels import HIDE_GPUS_ENV
from rlplace.ray.layout import Layout
from rlplace.ray.nodes import accelerator_of
from rlplace.ray.port import Cluster
from rlplace.ray.ray_port import RAY
from rlplace.ray.state import JobState

if TYPE_CHECKING:
    from rlplace.ray.records import JobRecord

#: Options rlplace derives from the plan; a caller overriding them would break the placement.
PLAN_OPTIONS = frozenset({"name", "namespace", "num_cpus", "num_gpus", "scheduling_strategy", "runtime_env"})

_remote_classes: weakref.WeakKeyDictionary[type, tuple[Cluster, Any]] = weakref.WeakKeyDictionary()


def remote_class(cls: Any, cluster: Cluster = RAY) -> Any:
    """The placed subclass of `cls` as an actor class of `cluster`, once per class (Ray exports a class's code
    once per ActorClass). An ActorClass (`ray.remote(C)` or `@ray.remote(...)`) is unwrapped to C, keeping its
    options."""
    made = _remote_classes.get(cls)
    if made is None or made[0] is not cluster:
        base, written = cluster.user_class(cls)
        made = _remote_classes[cls] = (cluster, cluster.actor_class(placed_class(base), written))
    return made[1]


def placed_class(cls: type) -> type:
    """`cls` with a constructor that first takes the worker's rlplace payload and installs it."""

    def __init__(self: Any, _rlplace: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        _install(_up_to_date(_rlplace))
        cast(Any, cls).__init__(self, *args, **kwargs)  # the user's constructor, on the placed instance

    namespace = {
        "__init__": __init__,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    return type(cls.__name__, (cls,), namespace)


def _up_to_date(payload: dict[str, Any]) -> dict[str, Any]:
    """The constructor argument of a worker Ray restarted brought up to date: Ray gives it the arguments it was
    first given, which a resize may have made stale (where Ray placed it, its rank and size, and it meets the others
    at their newest exchange; else its rank and rendezvous from the job record). Only the constructor's: the payload
    a resize sends (`apply_resize`) is the driver's, current already, and the exchange it names has no key yet when
    this worker comes first to it (run 4 seed 4003936: it met the others at the old size's)."""
    if not worker_record.restarted():
        return payload
    if payload.get("exchange"):
        from rlplace.ray.exchange import rejoined

        return rejoined(payload)
    from rlplace.ray import records

    placement = payload["placement"]
    record = records.read(worker_record.cluster(), placement["namespace"], placement["job"])
    return current(payload, record) if record is not None else payload


def _install(payload: dict[str, Any]) -> None:
    """Worker side: agree on the rendezvous first where Ray placed the component, then install."""
    if payload.get("exchange"):
        from rlplace.ray.exchange import exchange

        agreed = exchange(payload["placement"], payload["exchange"])
        payload = {**payload, "env": {**payload["env"], **agreed}}
    worker_record.install(payload)


def current(payload: dict[str, Any], record: JobRecord) -> dict[str, Any]:
    """A restarted worker's payload brought up to date from its job's `record`: Ray restarts an actor with the
    constructor arguments it was first given, which a resize (its rank, world size, master port) or a takeover of
    its component's rank 0 (the master) has made stale since. A worker the record does not hold, or of a component
    Ray places, keeps what it was given."""
    placement = payload["placement"]
    where = record.worker_ranks().get(placement.get("name", ""))
    component = record.components.get(where[0]) if where is not None else None
    if where is None or component is None or component.master_addr is None or component.master_port is None:
        return payload
    layout = Layout.of(component.node_ranks)
    node_rank = component.node_ranks[where[1]]
    assert layout is not None and node_rank is not None  # a component with a master is pinned, every rank of it
    rank, size = where[1], component.world_size
    variables = layout.variables(rank, size, node_rank, component.master_addr, component.master_port)
    now = {"rank": rank, "world_size": size, "node_rank": node_rank, "local_rank": layout.local_rank[rank]}
    return {**payload, "placement": {**placement, **now}, "env": {**payload["env"], **variables}}


def answer(_instance: Any, *_: Any) -> None:
    """A no-op call (through `__ray_call__`): it returns once the worker has run every call sent to it before.
    Here, in the module every worker imports anyway, so that a first such call costs no import."""
    return None


def apply_rendezvous(_instance: Any, payload: dict[str, Any]) -> None:
    """Runs in a worker (through `__ray_call__`) whose component's rank 0 moved to a spare or replacement: the new
    MASTER_ADDR and MASTER_PORT are installed (`worker_placement()`, `os.environ`) before any later call."""
    _install(payload)


def apply_resize(instance: Any, payload: dict[str, Any] | None, event: Any) -> None:
    """Runs in a worker (through `__ray_call__`) whose component changed size, before any later call reaches it:
    its new rank, world size and rendezvous are installed (`worker_placement()`, RANK, WORLD_SIZE, MASTER_PORT,
    ...; `payload` None: nothing to install, a new worker or one in the driver), then its class's
    `on_resized(event)` runs, if the class defines it."""
    if payload is not None:
        _install(payload)
    hook = getattr(instance, "on_resized", None)
    if callable(hook):
        hook(event)


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


class Strategies(Protocol):
    """Where Ray must start a worker (the reservation answers)."""

    def scheduling_strategy(self, worker: Worker) -> Any: ...


class Payloads(Protocol):
    """A worker's constructor payload: placement record and rendezvous (the rendezvous answers)."""

    def payload(self, worker: Worker) -> dict[str, Any]: ...


class Launcher:
    """Starts a job's workers as actors: from the state (the worker's row, the node serving its rank), the
    reservation (its scheduling strategy) and the rendezvous (its payload). Keeps every handle it started,
    so the job can kill them all; probes each (node, interpreter) pair once, before its first worker."""

    def __init__(self, cluster: Cluster, state: JobState, strategies: Strategies, payloads: Payloads):
        self._cluster = cluster
        self._state = state
        self._strategies = strategies
        self._payloads = payloads
        self._checked: set[tuple[int, str]] = set()
        self.started: list[Any] = []

    def check_interpreters(self, workers: Sequence[Worker]) -> None:
        """Probe each (node, interpreter) pair once per node, before the first worker that needs it."""
        todo = sorted(
            {(w.node_rank, w.python) for w in workers if w.python and w.node_rank is not None} - self._checked
        )
        if todo:
            targets = [(self._state.live.node(rank), python) for rank, python in todo]
            check_interpreters(self._cluster, targets, self._state.timeout_s)
            self._checked.update(todo)

    def check_names(self, workers: Sequence[Worker]) -> None:
        """Two jobs in one namespace would fight over `rlplace:<component>:<rank>`: refuse before starting."""
        listed = self._cluster.named_actors()
        taken = {a["name"] for a in listed if a["namespace"] == self._state.namespace}
        clash = [w.name for w in workers if w.name in taken]
        if clash:
            raise PlacementError(
                f"actors {', '.join(clash[:3])}{' ...' if len(clash) > 3 else ''} already run in Ray namespace "
                f"{self._state.namespace!r} (another job?); connect with name=... to give this job its own namespace"
            )

    def node_changed(self, rank: int) -> None:
        """Node `rank` is served by another node now: its interpreters are probed again there."""
        self._checked = {c for c in self._checked if c[0] != rank}

    def start(
        self,
        cls: Any,
        worker: Worker,
        args: tuple,
        kwargs: dict[str, Any],
        *,
        max_restarts: int = 0,
        max_task_retries: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> Any:
        """Start `worker` as an actor of `cls(*args, **kwargs)`, where the plan says. Never once the job is shut
        down: a takeover or resize on another thread may reach here after `shutdown` killed what was started (its
        probes and master ports wait on the cluster meanwhile), and what it started then would outlive the job (found by
        the explorer, docs/ray.md)."""
        self.check_interpreters([worker])
        payload = self._payloads.payload(worker)
        if self._state.closed:
            raise PlacementError(f"job {self._state.name} is shut down: {worker.name} is not started")
        opts = actor_options(
            worker,
            namespace=self._state.namespace,
            scheduling_strategy=self._strategies.scheduling_strategy(worker),
            max_restarts=max_restarts,
            max_task_retries=max_task_retries,
            options=options,
            accelerator=accelerator_of(self._state.live, worker.node_rank),
        )
        handle = self._cluster.start_actor(remote_class(cls, self._cluster), opts, payload, *args, **kwargs)
        self.started.append(handle)
        return handle


def launch_ray_actor(
    cls: Any,
    component: str,
    rank: int,
    *args: Any,
    job: Any,
    max_restarts: int = 0,
    max_task_retries: int | None = None,
    options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Start worker `rank` of `component` of `job` (what `rlplace.connect` returned) as an actor of
    `cls(*args, **kwargs)`: RLightning's one-worker launch; `job.launch` starts a whole component."""
    launcher: Launcher = job.launcher
    worker = job.worker(component, rank)
    return launcher.start(
        cls,
        worker,
        args,
        kwargs,
        max_restarts=max_restarts,
        max_task_retries=max_task_retries,
        options=options,
    )
