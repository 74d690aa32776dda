"""A Job: one plan realised on the running Ray cluster, from reservation to tear-down.

`connect()` plans (unless handed a Plan), reserves every bundle, and returns a started Job, or raises
after removing whatever it had created. The Job launches components as WorkerGroups and, on
`shutdown()` or leaving its `with` block, kills every actor and removes every placement group it made
and waits until Ray reports them gone, so a test or a retry never trips over leftovers.

The Job is the top of the Ray layer and holds little itself: the job's state (`rlplace.ray.state`: plan,
rank -> node map, events) and the services that take it (reservation, rendezvous, launcher, node watcher,
the job record). When a node is lost the watcher decides and the Job's mover acts on the ranks
(`rlplace.ray.failover.mover.RankMover`: drop a lost node's workers, move them to a spare or replacement, or shrink its
elastic components, and grow them back); `resize()` changes an elastic component's size through the same mover.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import sys
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from rlplace import planner
from rlplace.errors import PlacementError, RlplaceError
from rlplace.inventory import Inventory, Node
from rlplace.lifecycle import NodeMark
from rlplace.model import JobSpec
from rlplace.phases import Phases, PhaseTimes, cuda_peak_gb
from rlplace.plan import Plan, Worker
from rlplace.ray import auth, handoff
from rlplace.ray.failover.mover import DEATH_WAIT_S, RankMover
from rlplace.ray.failover.rules import health_notes
from rlplace.ray.failover.watcher import NodeWatcher
from rlplace.ray.group import WorkerGroup, wait_dead
from rlplace.ray.interrupt import exit_130_on_interrupt
from rlplace.ray.join import address_to_join, join, reachable_address
from rlplace.ray.launch import Launcher
from rlplace.ray.nodes import live_inventory
from rlplace.ray.port import Cluster
from rlplace.ray.ray_port import RAY
from rlplace.ray.records import RecordWriter
from rlplace.ray.rendezvous import Rendezvous
from rlplace.ray.reserve import Reservation
from rlplace.ray.state import Change, JobState, Master, NodeEvent, ResizeEvent
from rlplace.ray.topology import check_live, unplanned
from rlplace.ray.worker import WorkerPlacement

log = logging.getLogger(__name__)

AUTO_EXPORT = "resource_pool_auto.yaml"
#: How long a job waits for a spare or a replacement after Ray declares one of its nodes dead.
REPLACE_WITHIN_S = 60.0


class Job:
    """A plan with its placement groups reserved; launch components with `launch()`."""

    def __init__(
        self,
        plan: Plan,
        live: Inventory,
        *,
        timeout_s: float = 30.0,
        name: str | None = None,
        replace_within_s: float = REPLACE_WITHIN_S,
        spec: JobSpec | None = None,
        cluster: Cluster = RAY,
    ):
        self.cluster = cluster
        self.state = JobState(
            plan,
            live,
            name=name or uuid.uuid4().hex[:8],
            namespace=name or cluster.namespace(),
            timeout_s=timeout_s,
            replace_within_s=replace_within_s,
            spec=spec,
        )
        self.groups: dict[str, WorkerGroup] = {}  # LocalGroup (a WorkerGroup) for driver-local components
        driver = (os.getpid(), cluster.driver_node_id())
        self._record = RecordWriter(cluster, self.state, cluster.job_id(), driver)
        self._reservation = Reservation(cluster, self.state)
        self._rendezvous = Rendezvous(cluster, self.state)
        self.launcher = Launcher(cluster, self.state, self._reservation, self._rendezvous)
        #: How to start one more worker of each launched component (after a node loss, or when it grows).
        self._starters: dict[str, Callable[[Worker], Any]] = {}
        self._mover = RankMover(
            cluster, self.state, self._reservation, self._rendezvous, self.launcher, self.groups, self._starters
        )
        self._watcher = NodeWatcher(cluster, self.state, self._reservation, self._mover)
        #: The seconds of every phase the job ran (`job.phase`, `Phases.for_job`); under `rlplace run --profile-out`
        #: written where run said ($RLPLACE_PHASE_TIMES), for the profile it makes.
        self.phase_times = PhaseTimes(handoff.phase_times_path())

    # -- what the job is ---------------------------------------------------------------------------

    @property
    def plan(self) -> Plan:
        return self.state.plan

    @property
    def live(self) -> Inventory:
        """The live inventory, each rank with the node serving it now (a spare after a takeover)."""
        return self.state.live

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def namespace(self) -> str:
        return self.state.namespace

    @property
    def timeout_s(self) -> float:
        return self.state.timeout_s

    @property
    def replace_within_s(self) -> float:
        return self.state.replace_within_s

    @property
    def warnings(self) -> list[str]:
        return self.state.warnings

    @property
    def events(self) -> list[NodeEvent]:
        """What happened to the job's nodes, in order: `lost`, then `spare` / `replacement`, or `failed`."""
        return self.state.events

    @property
    def resizes(self) -> list[ResizeEvent]:
        """Every change of an elastic component's size (`resize`, a lost node's shrink, growing back), in order."""
        return self.state.resizes

    @property
    def placement_groups(self) -> list:
        return self._reservation.placement_groups

    def worker(self, component: str, rank: int) -> Worker:
        """The plan's row of worker `rank` of `component` (a ConfigError naming the planned ranks if none)."""
        return self.state.worker(component, rank)

    def node(self, node_rank: int | None) -> Node | None:
        """The live node of a rank (None for workers the plan leaves to Ray)."""
        return self.state.node(node_rank)

    def master(self, component: str) -> Master | None:
        """Where `component`'s rank 0 listens for torch.distributed (None when Ray places the component)."""
        return self._rendezvous.master(component)

    def node_health(self) -> dict[int, tuple[NodeMark, str]]:
        """rank -> (mark, note) for nodes that were lost: LOST, FAILED, SPARE, REPLACED (the picture shows them)."""
        return health_notes(self.state.events)

    # -- life cycle --------------------------------------------------------------------------------

    def start(self) -> Job:
        """Check the live nodes' topology labels against the plan's, reserve every bundle of the plan (within
        `timeout_s`), or remove everything and raise."""
        try:
            check_live(self.plan, self.live)
            self.state.apply(Change(warnings=tuple(unplanned(self.plan, self.live, self.state.levels))))
            if self.plan.uses_placement_groups:
                self._reservation.reserve()
            self.state.subscribe(self._record.on_change)
            self._record.write()
            self._watcher.start()
        except BaseException:
            self.shutdown()
            raise
        return self

    def shutdown(self) -> None:
        """Kill every actor and remove every placement group of this job; wait until Ray agrees."""
        if self.state.closed:
            return
        if self.phase_times.path is not None and self.phase_times.seconds and self.cluster.connected():
            try:  # under `rlplace run --profile-out`: the workers' memory, while they live; never at tear-down's cost
                self.record_memory()
            except Exception as e:
                log.info("job %s: no memory figures for the profile: %s", self.name, e)
        # The one mark of a job that is over (the state's): from now on the mover starts nothing, the watcher acts
        # on nothing, waiting calls wake and raise, and the record is no longer rewritten.
        self.state.close()
        if not self.cluster.connected():
            return
        # Removing the groups and killing the actors also ends any wait of a takeover in progress; anything it
        # created meanwhile goes in the second pass.
        for _ in range(2):
            self._reservation.remove()
            self._kill_all()
            self._watcher.stop()
        self._record.delete()
        self._wait_dead()
        # Once the workers are dead: one of a component Ray places, still starting, publishes its exchange until then.
        self._rendezvous.forget()

    def _kill_all(self) -> None:
        for handle in list(self.launcher.started):
            try:
                self.cluster.kill(handle)
            except Exception as e:  # already dead: nothing to kill
                log.debug("kill %s: %s", handle, e)

    def _wait_dead(self) -> None:
        ids = wait_dead(self.cluster, [self.cluster.actor_id(h) for h in self.launcher.started], DEATH_WAIT_S)
        if ids:
            log.warning("job %s: %d actors still not dead %.0f s after shutdown", self.name, len(ids), DEATH_WAIT_S)

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def check_nodes(self) -> bool:
        """A call failed somewhere (inside a worker, say): is any node of the job lost? Probes each node's
        raylet (a loss is declared at once where it refuses connections) and reads the GCS node table."""
        return self._watcher.check_all()

    def wait_for_takeovers(self) -> None:
        """Block while a node of the job is lost, until a spare or replacement has taken it over; raise its
        NodeLostError when none did within `replace_within_s`. For code that saw a call fail inside a worker
        (a worker calling a lost worker) and wants to know whether to retry."""
        self._watcher.wait_all()

    # -- elastic components ------------------------------------------------------------------------

    def resize(self, component: str, n: int, *, timeout_s: float | None = None) -> ResizeEvent:
        """Change elastic `component` to `n` workers while the job runs; returns what changed.

        Growth places the new workers on free capacity as the component's strategy would (never moving a
        worker), reserves them as new placement groups (one per node) and starts them through the same launch
        path as `launch`; a shrink removes the highest ranks, stops them and frees their groups, and renumbers
        nothing (the survivors keep ranks 0..n-1). Components that follow this one (an env sharing eval's GPUs,
        buffer shards beside train) change with it (`event.also`). Calls already made on the component finish
        first; calls made meanwhile wait, and see the new size. Every worker of a changed component, new ones
        included, then gets its new rank, world size and rendezvous (a fresh MASTER_PORT) and runs its class's
        `on_resized(event)` if it has one, before any later call. `n` becomes what growing back after a lost
        node aims for. Growth that does not fit raises PlanError (or PlacementError from Ray, within
        `timeout_s`, default the job's) naming what is missing on which node, and leaves the job as it was.
        A component not launched yet launches at its new size.
        """
        if self.state.closed:
            raise PlacementError(f"job {self.name} is shut down; connect again to resize {component!r}")
        return self._mover.resize(component, n, self.timeout_s if timeout_s is None else timeout_s)

    # -- launching ---------------------------------------------------------------------------------

    def launch(
        self,
        component: str,
        cls: Any,
        *args: Any,
        max_restarts: int = 0,
        max_task_retries: int | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> WorkerGroup:
        """Start every worker of `component` as an actor of `cls(*args, **kwargs)`, in rank order; a component
        the plan runs in the driver (`remote_<component>: false`) becomes a LocalGroup of plain objects."""
        self._check_launchable(component)
        workers = self.state.planned(component)
        if all(w.in_driver for w in workers):  # remote_<component>: false: plain objects in this process
            from rlplace.ray.local_group import launch_local

            local, start_local = launch_local(
                self.cluster, component, workers, cls, args, kwargs, self.live, self.state
            )
            self._starters[component] = start_local
            self.groups[component] = local
            return local
        for rank in sorted({w.node_rank for w in workers if w.node_rank is not None}):
            self._watcher.wait_usable(rank)  # a lost node's bundles are taken over (or NodeLostError) first
        with self._mover.changing:  # a takeover waits until the group is launched, then moves it too
            self._check_launchable(component)  # again: a shutdown, a launch or a resize may have come meanwhile
            workers = self.state.planned(component)
            return self._start_group(component, workers, cls, args, kwargs, max_restarts, max_task_retries, options)

    def _check_launchable(self, component: str) -> None:
        if self.state.closed:
            raise PlacementError(f"job {self.name} is shut down; connect again to launch {component!r}")
        if component in self.groups:
            raise PlacementError(f"{component!r} is already launched in job {self.name}")

    def _start_group(
        self,
        component: str,
        workers: tuple[Worker, ...],
        cls: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        max_restarts: int,
        max_task_retries: int | None,
        options: dict[str, Any] | None,
    ) -> WorkerGroup:
        self.launcher.check_names(workers)
        self.launcher.check_interpreters(workers)

        def start(w: Worker) -> Any:
            return self.launcher.start(
                cls,
                w,
                args,
                kwargs,
                max_restarts=max_restarts,
                max_task_retries=max_task_retries,
                options=options,
            )

        actors: list[Any] = []
        try:
            for w in workers:
                actors.append(start(w))
        except BaseException:  # refused part-way: the workers started before it do not stay, in no group
            self._mover.stop(actors, f"workers of {component} started by a launch that failed")
            raise
        self._starters[component] = start
        group = WorkerGroup(component, workers, actors, cluster=self.cluster, health=self._watcher, rows=self.state)
        self.groups[component] = group
        return group

    # -- phases (rlplace.phases) -----------------------------------------------------------------

    @functools.cached_property
    def phases(self) -> Phases:
        """The job's phase engine: offload hooks as the plan's `enable_offload` says; `.events` records them."""
        return Phases.for_job(self)

    def phase(self, name: str) -> AbstractContextManager[None]:
        """`with job.phase("rollout"): ...` runs RLightning's offload hooks around the block."""
        return self.phases.phase(name)

    def record_memory(self, timeout_s: float = 10.0) -> dict[str, float]:
        """Each launched component's peak GPU memory per GPU, GB (the largest of its workers'; torch's
        max_memory_allocated, where torch has used CUDA in them), into `phase_times`; components none of whose workers
        reports one are left out. A worker that does not answer within `timeout_s` is left out too (logged)."""
        pending = [(name, g, g.call_async("__ray_call__", cuda_peak_gb)) for name, g in self.groups.items()]
        peaks: dict[str, float] = {}
        for name, group, refs in pending:
            try:
                found = [gb for gb in group.get(refs, "cuda_peak_gb", timeout_s) if gb is not None]
            except RlplaceError as e:
                log.info("job %s: no memory figure for %s: %s", self.name, name, e)
                continue
            if found:
                peaks[name] = max(found)
        self.phase_times.set_memory(peaks)
        return peaks

    def verify(self, timeout_s: float | None = 60) -> list[WorkerPlacement]:
        """Ask every launched worker where it runs; raise PlacementError if any is off its plan."""
        pending = [(g, g.placements_async()) for g in self.groups.values()]  # all groups start at once
        placements = [p for g, refs in pending for p in g.get(refs, "placement", timeout_s)]
        wrong = [p.mismatch for p in placements if p.mismatch]
        if wrong:
            raise PlacementError("workers are not where the plan put them:\n  " + "\n  ".join(wrong))
        return placements


def connect(
    config: Any = None,
    *,
    inventory: Inventory | None = None,
    timeout_s: float = 30.0,
    name: str | None = None,
    address: str | None = None,
    export_path: str | os.PathLike | None = AUTO_EXPORT,
    replace_within_s: float = REPLACE_WITHIN_S,
) -> Job:
    """Plan `config` (a Plan, a JobSpec, or anything `rlplace.config.load` takes) and reserve it on Ray; without
    `config`, the job `rlplace run CONFIG -- COMMAND` planned and showed for the command it started: its plan as
    shown (`$RLPLACE_PLAN`, `rlplace.ray.handoff`), not planned again; a PlacementError names what changed when the
    live cluster is no longer the one it was planned on.

    `inventory` plans against declared nodes instead of the live ones (the live cluster must still hold
    the plan, its nodes labelled with the plan's racks and domains: `rlplace.ray.topology.check_live`). Without
    `address`, a config that writes `ray_address` (RLightning's key: "auto" for the running cluster, or
    HOST:PORT) is connected there. In auto mode the computed pools are written to `export_path`
    after a successful start, as RLightning's tip says (None: don't). When a node holding the job's workers is
    lost, calls on them wait up to `replace_within_s` seconds after the loss is declared for a hot spare or a
    replacement node to take over, then raise NodeLostError (0: at once).
    """
    spec = _spec(config)
    handed = handoff.read_handoff() if config is None and inventory is None else None
    exit_130_on_interrupt()
    if not RAY.connected():
        _join(address_to_join(address, spec))
    live = live_inventory()
    access = auth.connected_access(RAY.gcs_address())
    auth.warn_if_open(access, [n.address for n in live.nodes], [RAY.driver_ip()])
    if handed is not None:  # the plan `rlplace run` showed, for the nodes it was made for
        plan, planned_on = handed
        handoff.check_unchanged(planned_on, live)
    else:
        plan = config if spec is None else planner.plan(spec, inventory or live)
    job = Job(plan, live, timeout_s=timeout_s, name=name, replace_within_s=replace_within_s, spec=spec).start()
    if export_path is not None:
        _export(plan, export_path)
    return job


def _join(address: str | None) -> None:
    """Join `address` ("auto" honours $RAY_ADDRESS) within seconds or raise saying so; with none given,
    Ray's own default: the cluster started on this machine (joined as "auto" is, with its token when it requires
    one), else a new one-node cluster."""
    if address is None:
        try:
            address = reachable_address("auto")
        except RlplaceError:  # none running here
            RAY.connect(None, log_to_driver=True)
            return
    join(address, hint="start one with `rlplace start --head --node-rank 0`, or pass address=HOST:PORT", quiet=False)


def _spec(config: Any) -> JobSpec | None:
    """The JobSpec of `config` (None for a ready Plan), loaded before Ray starts: it may say where to connect."""
    if config is None:
        from rlplace.config.driver_env import load_driver_config

        return load_driver_config()
    if isinstance(config, Plan | JobSpec):
        return config if isinstance(config, JobSpec) else None
    from rlplace import config as config_module

    return config_module.load(config)


def _export(plan: Plan, path: str | os.PathLike) -> None:
    """RLightning's tip: after a successful auto-mode start, write the computed pools for manual tuning."""
    s = plan.settings
    if s.mode != "auto" or s.dialect != "pools" or not plan.uses_placement_groups or not plan.groups:
        return  # nothing computed to export (manual pools, node groups, strategy default)
    try:
        from rlplace.planner import write_resource_pool
    except ImportError:
        log.info("rlplace.planner.write_resource_pool is not available; %s not written", path)
        return
    written = write_resource_pool(plan, os.fspath(path), written_by=f"rlplace.connect() in {_command_line()}")
    (log.warning if written.path != written.asked else log.info)("%s", written.describe())


def _command_line() -> str:
    """This process's command line as typed (`train.py --lr 3e-4`, `rlplace run job.yaml`), for the export's header."""
    return shlex.join([os.path.basename(sys.argv[0]) if sys.argv else "python", *sys.argv[1:]])
