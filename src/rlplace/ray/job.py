"""A Job: one plan realised on the running Ray cluster, from reservation to tear-down.

`connect()` plans (unless handed a Plan), reserves every bundle, and returns a started Job, or raises
after removing whatever it had created. The Job launches components as WorkerGroups and, on
`shutdown()` or leaving its `with` block, kills every actor and removes every placement group it made
and waits until Ray reports them gone, so a test or a retry never trips over leftovers.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from contextlib import AbstractContextManager
from typing import Any

import ray
from ray.actor import ActorClass, ActorHandle

from rlplace.errors import ConfigError, PlacementError, Problem
from rlplace.inventory import Inventory, Node
from rlplace.model import JobSpec
from rlplace.plan import Plan, Worker
from rlplace.ray.cluster import live_inventory
from rlplace.ray.group import WorkerGroup, wait_dead
from rlplace.ray.interpreter import check_interpreters
from rlplace.ray.launch import launch_ray_actor
from rlplace.ray.rendezvous import Rendezvous
from rlplace.ray.reserve import Reservation
from rlplace.ray.worker import WorkerPlacement
from rlplace.runtime.phases import Phases

log = logging.getLogger(__name__)

AUTO_EXPORT = "resource_pool_auto.yaml"
_DEATH_WAIT_S = 10.0


class Job:
    """A plan with its placement groups reserved; launch components with `launch()`."""

    def __init__(self, plan: Plan, live: Inventory, *, timeout_s: float = 30.0, name: str | None = None):
        self.plan = plan
        self.live = live
        self.timeout_s = timeout_s
        self.name = name or uuid.uuid4().hex[:8]
        self.namespace = name or ray.get_runtime_context().namespace
        self.groups: dict[str, WorkerGroup] = {}
        self.warnings: list[str] = list(plan.warnings)
        self._reservation = Reservation(plan, live, timeout_s=timeout_s, name=self.name)
        self.rendezvous = Rendezvous(self)  # workers' torch.distributed env and the job record (ray/records.py)
        self._actors: list[tuple[Worker, ActorHandle]] = []
        self._workers = {(w.component, w.rank): w for w in plan.workers}
        self._checked: set[tuple[int, str]] = set()
        self._closed = False

    # -- life cycle --------------------------------------------------------------------------------

    def start(self) -> Job:
        """Reserve every bundle of the plan (within `timeout_s`), or remove everything and raise."""
        try:
            if self.plan.uses_placement_groups:
                self._reservation.reserve()
                self.warnings.extend(self._reservation.warnings)
        except BaseException:
            self.shutdown()
            raise
        return self

    def shutdown(self) -> None:
        """Kill every actor and remove every placement group of this job; wait until Ray agrees."""
        if self._closed:
            return
        self._closed = True
        if not ray.is_initialized():
            return
        for _, handle in self._actors:
            try:
                ray.kill(handle, no_restart=True)
            except Exception as e:  # already dead: nothing to kill
                log.debug("kill %s: %s", handle, e)
        self._reservation.remove()
        self.rendezvous.forget()
        self._wait_dead()

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def placement_groups(self) -> list:
        return self._reservation.placement_groups

    # -- launching ---------------------------------------------------------------------------------

    def launch(
        self,
        component: str,
        cls: type | ActorClass,
        *args: Any,
        max_restarts: int = 0,
        max_task_retries: int | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> WorkerGroup:
        """Start every worker of `component` as an actor of `cls(*args, **kwargs)`, in rank order."""
        if self._closed:
            raise PlacementError(f"job {self.name} is shut down; connect again to launch {component!r}")
        workers = self.plan.by_component(component)
        if not workers:
            raise ConfigError(
                Problem(
                    path="component",
                    value=component,
                    message=f"{component!r} is not in the plan; planned: {self.plan.components}",
                )
            )
        if component in self.groups:
            raise PlacementError(f"{component!r} is already launched in job {self.name}")
        self._check_names_free(workers)
        self.check_interpreters(workers)
        actors = [
            launch_ray_actor(
                cls,
                component,
                w.rank,
                *args,
                job=self,
                max_restarts=max_restarts,
                max_task_retries=max_task_retries,
                options=options,
                **kwargs,
            )
            for w in workers
        ]
        group = self.groups[component] = WorkerGroup(component, workers, actors)
        return group

    # -- phases (rlplace.runtime) ----------------------------------------------------------------

    @functools.cached_property
    def phases(self) -> Phases:
        """The job's phase engine: offload hooks as the plan's `enable_offload` says; `.events` records them."""
        return Phases.for_job(self)

    def phase(self, name: str) -> AbstractContextManager[None]:
        """`with job.phase("rollout"): ...` runs the spec's offload hooks around the block."""
        return self.phases.phase(name)

    def verify(self, timeout_s: float | None = 60) -> list[WorkerPlacement]:
        """Ask every launched worker where it runs; raise PlacementError if any is off its plan."""
        pending = [(g, g.placements_async()) for g in self.groups.values()]  # all groups start at once
        placements = [p for g, refs in pending for p in g.get(refs, "placement", timeout_s)]
        wrong = [p.mismatch for p in placements if p.mismatch]
        if wrong:
            raise PlacementError("workers are not where the plan put them:\n  " + "\n  ".join(wrong))
        return placements

    # -- what launch_ray_actor needs ---------------------------------------------------------------

    def worker(self, component: str, rank: int) -> Worker:
        try:
            return self._workers[(component, rank)]
        except KeyError:
            ranks = [w.rank for w in self.plan.by_component(component)]
            raise ConfigError(
                Problem(
                    path=f"{component}.rank",
                    value=rank,
                    message=f"{component} rank {rank} is not in the plan; planned ranks: {ranks}",
                )
            ) from None

    def node(self, node_rank: int | None) -> Node | None:
        """The live node of a rank (None for workers the plan leaves to Ray)."""
        return None if node_rank is None else self.live.node(node_rank)

    def scheduling_strategy(self, worker: Worker) -> Any:
        return self._reservation.scheduling_strategy(worker)

    def check_interpreters(self, workers: list[Worker]) -> None:
        """Probe each (node, interpreter) pair once per job, before the first worker that needs it."""
        todo = sorted(
            {(w.node_rank, w.python) for w in workers if w.python and w.node_rank is not None} - self._checked
        )
        if todo:
            check_interpreters([(self.live.node(rank), python) for rank, python in todo], self.timeout_s)
            self._checked.update(todo)

    def _check_names_free(self, workers: list[Worker]) -> None:
        """Two jobs in one namespace would fight over `rlplace:<component>:<rank>`: refuse before starting."""
        taken = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == self.namespace}
        clash = [w.name for w in workers if w.name in taken]
        if clash:
            raise PlacementError(
                f"actors {', '.join(clash[:3])}{' ...' if len(clash) > 3 else ''} already run in Ray namespace "
                f"{self.namespace!r} (another job?); connect with name=... to give this job its own namespace"
            )

    def track(self, worker: Worker, handle: ActorHandle) -> None:
        self._actors.append((worker, handle))

    def _wait_dead(self) -> None:
        ids = wait_dead([h._actor_id.hex() for _, h in self._actors], _DEATH_WAIT_S)
        if ids:
            log.warning("job %s: %d actors still not dead %.0f s after shutdown", self.name, len(ids), _DEATH_WAIT_S)


def connect(
    config: Any,
    *,
    inventory: Inventory | None = None,
    timeout_s: float = 30.0,
    name: str | None = None,
    address: str | None = None,
    export_path: str | os.PathLike | None = AUTO_EXPORT,
) -> Job:
    """Plan `config` (a Plan, a JobSpec, or anything `rlplace.config.load` takes) and reserve it on Ray.

    `inventory` plans against declared nodes instead of the live ones (the live cluster must still hold
    the plan). In auto mode the computed pools are written to `export_path` after a successful start,
    as the spec's Tip says (None: don't).
    """
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=True)
    live = live_inventory()
    plan = _plan(config, inventory or live)
    job = Job(plan, live, timeout_s=timeout_s, name=name).start()
    if export_path is not None:
        _export(plan, export_path)
    return job


def _plan(config: Any, inventory: Inventory) -> Plan:
    if isinstance(config, Plan):
        return config
    from rlplace import config as config_module
    from rlplace import planner

    spec = config if isinstance(config, JobSpec) else config_module.load(config)
    return planner.plan(spec, inventory)


def _export(plan: Plan, path: str | os.PathLike) -> None:
    """The spec's Tip: after a successful auto-mode start, write the computed pools for manual tuning."""
    s = plan.settings
    if s.mode != "auto" or s.dialect != "pools" or not plan.uses_placement_groups or not plan.groups:
        return  # nothing computed to export (manual pools, node groups, strategy default)
    try:
        from rlplace.planner import write_resource_pool
    except ImportError:
        log.info("rlplace.planner.write_resource_pool is not available; %s not written", path)
        return
    write_resource_pool(plan, path)
    log.info("wrote the computed resource pool to %s", path)
