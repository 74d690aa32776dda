"""`SimCluster`: the port (`rlplace.ray.port.Cluster`) answered in memory, on a virtual clock (docs/ray.md,
"The simulation").

The control plane's real services (reservation, launch, rendezvous, failover's watcher and mover, and weight
sync's object-store path) run on it unchanged, in one thread, deterministically: time passes only when a service
waits (`get`, `wait`, `sleep`, `wait_on`, or a request the weather delays), and what is due meanwhile runs in time
order (node deaths and health checks, the watcher's ticks, constructors and calls running, results coming in).

What it models of Ray 2.60, and how (each a measured or documented behaviour, docs/ray.md):

- Nodes with resources and labels; placement groups placed (PACK: one node, as rlplace asks) on schedulable
  nodes whose labels match, pending while nothing holds them, INFEASIBLE when no node could; never on a draining
  node. When a node is declared dead its groups are RESCHEDULING: placed again on another node their selectors
  match (a replacement carrying the rank label), as Ray's GCS does.
- Actors start after a delay (their constructor runs then, in the actor, from the placed class); calls queue
  behind the constructor and each other, run their body when they start and answer a duration later (longer on
  a slow node), or hang until their actor dies. A constructor that raises kills the actor: its calls fail. An
  actor with `max_restarts` left is restarted where its bundle is (RESTARTING meanwhile: calls fail at once, as
  with Ray's `max_task_retries=0`); `kill(restart=True)` restarts it in place. An actor outside a group, pinned
  to a node or placed by Ray (packed onto nodes under half used, then onto the least used, as Ray's hybrid
  policy), waits (PENDING_CREATION) until its resources are free there; pinned, it dies with its node; placed by
  Ray, it restarts elsewhere if it has restarts left. `kill` takes effect after the
  weather's kill delay: a call made meanwhile still runs. Actor names are unique per namespace while the actor
  is not DEAD.
- Losing a node three ways: its processes die (`kill_node`: calls fail at once, its raylet's port refuses
  connections); the machine vanishes (`vanish_node`: calls hang until the node is declared dead, probes are
  inconclusive); or it is cut off (`partition`: its processes keep running, zombies, while no call reaches them
  and no result comes back; if the cut outlasts the health checks the node is declared dead, its actors DEAD or
  restarted elsewhere, and when the cut heals its raylet learns it and exits, killing the zombies; a shorter cut
  delays everything sent there until it heals). Ray declares a node dead a health-check delay after its last
  answer (`nodes()` says so then; the actor table keeps its actors ALIVE until then).
- Drains with a deadline: the node dies at the deadline, later (it outlives it), or never (the drain is
  cancelled: it leaves the draining list); a drain of a node that is not alive, or already draining, is
  rejected.
- The weather (`Weather`): a GCS that does not answer for a while (restarting, overloaded) during which every
  request to it (nodes, placement groups, the actor table and named actors, the KV store) waits until it answers:
  measured on Ray 2.60 (docs/ray.md), such requests block and complete when the GCS answers again, also past
  `gcs_rpc_server_reconnect_timeout_s`, while actor creation, calls and kills return at once; requests slowed at
  a drawn rate; constructors slow to run or failing.
- Several drivers (`driver()`): another job on the same cluster, with its own Ray job id; a driver that exits
  takes its actors and placement groups with it, as Ray's non-detached ones.
- Actor code that waits for other actors (the workers of a component Ray places agree on their rendezvous through
  the KV store, `rlplace.ray.exchange`, in their constructor and in the call that tells them a new size): it runs in
  a thread of its own that parks where it sleeps, one thread at a time (`_Fiber`), so the simulation goes on
  meanwhile, as the actor's process would on Ray. What the actor asks of Ray inside (`worker.here()`, its port,
  a free port on its node) the simulation answers for the actor whose code runs (`_inside`).

Nothing here is Ray (nothing imports it): it exists so that thousands of fault schedules run per second
(`rlplace.sim.explore`). Every lookup is indexed (nodes by id and by label, what each node holds, the pending
groups), so a cluster of thousands of nodes costs time linear in what a schedule does with it.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rlplace.errors import PlacementError
from rlplace.lifecycle import GroupState, WorkerState
from rlplace.planner.capacity import add
from rlplace.ray.master_ports import FIRST_PORT, free_ports, port_order
from rlplace.ray.port import CallTimedOut, WorkerDied

#: How long after a node's last answer (its processes died, or it was cut off) `nodes()` reports it dead
#: (Ray's health checks).
HEALTH_DELAY_S = 1.5
#: A call's virtual duration when the schedule says nothing else.
CALL_S = 0.01
#: The wall clock at virtual time 0 (drain deadlines are wall-clock times, as Ray gives them).
EPOCH = 1_800_000_000.0
#: Every node's raylet listens there (NodeManagerPort).
RAYLET_PORT = 40_100
#: A tick (or a task beside the caller) kept out by a change holding a lock looks again this often.
LOCK_POLL_S = 0.05
#: A call passed results still running looks again this often.
ARGUMENT_POLL_S = 0.05
#: A wait without a timeout that lets this much virtual time pass waits for what never comes (`SimHang`).
FOREVER_S = 86_400.0
_INF = float("inf")


class SimHang(Exception):
    """A service waited without a bound on something that never comes: on Ray it would hang forever."""


class _Ended(BaseException):
    """Raised where a parked `_Fiber` waits, when its process ended meanwhile: its code unwinds, nothing more runs."""


@dataclass
class Weather:
    """What the cluster's own operations do (the explorer sets it): a GCS that does not answer, requests delayed
    (from `rng`, until `until`), actors that take time to start or fail to, kills that take time."""

    rng: random.Random = field(default_factory=lambda: random.Random(0))
    gcs_down_until: float = -_INF  # the GCS does not answer until then: requests wait
    delay_p: float = 0.0  # a request to the GCS is delayed by up to `delay_s` with this probability
    delay_s: float = 0.0
    until: float = -_INF  # delays stop then (virtual time)
    start_s: float = 0.0  # an actor's constructor runs up to this long after its creation (drawn)
    bad_starts: int = 0  # the next this many constructors raise
    kill_s: float = 0.0  # `kill` takes effect this long later

    def slow(self, now: float) -> bool:
        return now < self.until and self.delay_p > 0


@dataclass
class Behaviour:
    """What the schedule makes calls do (the explorer sets it): their duration, which method hangs."""

    call_s: float = CALL_S
    hang_method: str | None = None  # calls of this method never finish (until their actor dies)


@dataclass(eq=False)
class SimNode:
    node_id: str
    address: str
    resources: dict[str, float]
    labels: dict[str, str]
    running: bool = True  # its processes (raylet and workers): False from the moment they die
    reachable: bool = True  # False while it is cut off (its processes run, nothing gets through)
    refuses: bool = False  # its raylet's port refuses connections (the processes died, the machine is up)
    reported_dead: bool = False  # what `nodes()` says: a health-check delay after its last answer
    drain_deadline_ms: int | None = None
    slow: float = 1.0  # calls of its actors take this many times longer
    held: dict[str, float] = field(default_factory=dict)  # what its groups and its group-less actors hold
    processes: dict[int, SimProcess] = field(default_factory=dict)  # the actor processes running here
    unknown: dict[int, SimProcess] = field(default_factory=dict)  # died here; the driver was not told yet
    actors: dict[str, SimActor] = field(default_factory=dict)  # the actors that run (or ran last) here
    stalled: list[Callable[[], None]] = field(default_factory=list)  # calls sent while it was cut off


@dataclass(eq=False)
class SimGroup:
    group_id: str
    name: str
    bundles: list[dict[str, float]]
    selectors: list[dict[str, str]]
    driver: str  # the Ray job that created it (it dies with its driver)
    node_id: str | None = None  # where it is placed (PACK: one node here, as rlplace asks)
    removed: bool = False
    rescheduling: bool = False  # its node died: Ray places it again
    demand: dict[str, float] = field(default_factory=dict)  # what its bundles hold together
    actors: list[SimActor] = field(default_factory=list)  # the actors started in it

    def __post_init__(self) -> None:
        for b in self.bundles:
            add(self.demand, b)

    @property
    def state(self) -> GroupState:
        if self.removed:
            return GroupState.REMOVED
        if self.node_id:
            return GroupState.CREATED
        return GroupState.RESCHEDULING if self.rescheduling else GroupState.PENDING


@dataclass(eq=False)
class SimProcess:
    """One incarnation of an actor (a restart is another): its constructor's run and the calls it runs."""

    serial: int
    node_id: str
    ready_at: float  # its constructor has run then
    instance: Any = None
    payload: dict[str, Any] | None = None  # what the placed class installed (its rank, its rendezvous)
    ended_at: float | None = None  # nothing runs in it from then (its process died)
    known_at: float = _INF  # the driver's calls on it fail from then (Ray told it of the death)
    restarted: bool = False  # Ray restarted the actor: this process is not its first
    error: BaseException | None = None  # its constructor's
    doomed: bool = False  # its constructor will fail (the weather's bad start)
    queue: deque[tuple[SimRef, Callable[..., Any]]] = field(default_factory=deque)  # calls waiting to start
    busy: bool = False  # a call runs (or hangs) in it
    pending: list[SimRef] = field(default_factory=list)  # its calls whose results are not in
    fiber: _Fiber | None = None  # its constructor or call waiting (parked) for other actors


@dataclass(eq=False)
class SimActor:
    actor_id: str
    name: str
    namespace: str
    driver: str
    cls: type
    args: tuple
    kwargs: dict[str, Any]
    resources: dict[str, float]
    group: SimGroup | None
    node_id: str  # where it runs (or ran last)
    max_restarts: int = 0  # -1: without limit
    restarts: int = 0
    state: WorkerState = WorkerState.PENDING_CREATION  # the GCS's view
    process: SimProcess | None = None
    processes: list[SimProcess] = field(default_factory=list)
    started_at: float = 0.0  # the virtual time it was created
    died_at: float | None = None  # DEAD (to the GCS) since
    kill_asked_at: float | None = None  # the driver asked to kill it (without restart)
    kills: int = 0  # kills asked and not taken effect yet
    holds: bool = False  # it holds resources of its node outside a group
    anywhere: bool = False  # outside a group and not pinned to a node: Ray chooses its node

    @property
    def instance(self) -> Any:
        return self.process.instance if self.process else None

    @property
    def payload(self) -> dict[str, Any] | None:
        return self.process.payload if self.process else None

    def __getattr__(self, name: str) -> Any:
        """`hasattr(handle, "on_replaced")` asks the user's class, as an actor handle does."""
        cls = self.__dict__.get("cls")
        if cls is not None and not name.startswith("__") and hasattr(cls, name):
            return name
        raise AttributeError(name)


@dataclass(eq=False)
class SimRef:
    ref_id: int
    ready_at: float  # the result is in the caller's hands then (inf: never, or not yet known when)
    value: Any = None
    error: BaseException | None = None
    process: SimProcess | None = None
    actor: SimActor | None = None
    method: str = ""
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    sent_at: float = 0.0
    hangs: bool = False  # the schedule makes it hang: it never finishes
    ran_at: float | None = None  # its body ran then (in `process`)
    finished_at: float | None = None  # it finished then (its answer is out, unless its node is cut off)

    def done_at(self) -> float:
        failed = self.process.known_at if self.process is not None else _INF
        return min(self.ready_at, failed)

    def outcome(self) -> Any:
        p = self.process
        if p is not None and p.known_at < self.ready_at:
            name = self.actor.name if self.actor is not None else "?"
            why = f": {p.error}" if p.error is not None else ""
            raise WorkerDied(f"the actor {name} died before the call finished{why}")
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class _Ticker:
    cluster: SimCluster
    period_s: float
    tick: Callable[[], bool]
    stopped: bool = False
    running: bool = False
    again: bool = False
    driver: str = ""  # the Ray job id of the driver whose thread it is

    def wake(self) -> None:
        self.cluster._schedule(self.cluster.now(), self._run)  # stopped: it runs nothing (`_run`)

    def stop(self, timeout_s: float) -> None:
        self.stopped = True

    def _run(self) -> None:
        """One tick, then the next a period later. A tick comes due while the last one still runs (it waits, and
        the simulation runs what is due meanwhile): as with a thread, it does not start before that one ends."""
        if self.stopped or self.running:
            self.again = self.running  # a wake during the tick: the next one follows at once
            return
        if self.cluster._held_outside_ticks[self.driver]:  # a change of its driver holds a lock the tick may need
            self.cluster._schedule(self.cluster.now() + max(self.period_s, LOCK_POLL_S), self._run)
            return
        self.running, self.again = True, False
        self.cluster._ticking += 1
        try:
            going = self.tick()
        finally:
            self.running = False
            self.cluster._ticking -= 1
        if not going:
            self.stopped = True
            return
        self.cluster._schedule(self.cluster.now() + (0.0 if self.again else self.period_s), self._run)


@dataclass
class _SimLock:
    """`SimCluster.lock`: re-entrant (one thread runs everything), and counted while held outside a tick, so the
    watcher's ticks wait for the change that holds it, as its thread would on Ray. Counted per driver: another
    driver's watcher, a thread of another process, never waits for it."""

    cluster: SimCluster
    driver: str
    depth: int = 0
    outside: bool = False

    def __enter__(self) -> _SimLock:
        if self.depth == 0:
            self.outside = not self.cluster._ticking
            self.cluster._held_outside_ticks[self.driver] += self.outside
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.cluster._held_outside_ticks[self.driver] -= self.outside
            self.outside = False


class _Fiber:
    """Actor code that waits for other actors (`SimCluster._run_code`): it runs in a thread of its own, and only
    while the simulation's thread waits for it (one thread runs at a time, so a schedule stays deterministic);
    where it sleeps it parks (`park`), and the simulation runs on until it is due again (`resume`)."""

    def __init__(self, p: SimProcess, code: Callable[[], Any], then: Callable[[Any, Exception | None], None]):
        self.p, self.code, self.then = p, code, then
        self.value: Any = None
        self.error: Exception | None = None
        self.done = False  # the code returned or raised
        self.ended = False  # its process ended: it unwinds at its next step
        self._go, self._back = threading.Semaphore(0), threading.Semaphore(0)
        self._thread: threading.Thread | None = None

    def _main(self) -> None:
        self._go.acquire()  # first resumed by `_resume`, which never resumes an ended fiber
        try:
            self.value = self.code()
        except Exception as e:  # the actor's code raised: as from Ray (a creation error, a failed call)
            self.error = e
        except _Ended:
            pass
        self.done = True
        self._back.release()

    def resume(self) -> None:
        """Run the code (from where it parked) until it parks again or ends; the caller waits meanwhile."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="sim-actor-code", daemon=True)
            self._thread.start()
        self._go.release()
        self._back.acquire()

    def park(self) -> None:
        """In the code's thread: hand the simulation back its turn and wait for the next."""
        self._back.release()
        self._go.acquire()
        if self.ended:
            raise _Ended

    def end(self) -> None:
        """Its process ended: the parked code unwinds (nothing after it runs)."""
        self.ended = True
        if not self.done and self._thread is not None:
            self.resume()


class SimCluster:
    """An in-memory cluster on a virtual clock; see the module docstring. It is also its first driver's port;
    `driver()` gives another driver's."""

    def __init__(self) -> None:
        self._now = 0.0
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self.nodes_by_id: dict[str, SimNode] = {}
        self._by_label: dict[tuple[str, str], dict[str, None]] = {}  # (key, value) -> node ids (ordered)
        self._by_raylet: dict[tuple[str, int], SimNode] = {}
        self.groups: list[SimGroup] = []
        self._pending: dict[str, SimGroup] = {}  # groups waiting to be placed, in creation order
        self._unplaced: dict[str, SimActor] = {}  # actors outside groups waiting for their resources, in order
        self.actors: dict[str, SimActor] = {}
        self._names: dict[tuple[str, str], SimActor] = {}  # (namespace, name) -> its actor, while not DEAD
        self.kv: dict[str, bytes] = {}
        self.behaviour = Behaviour()
        self.weather = Weather()
        self.job = "01000000"
        self._drivers: dict[str, bool] = {self.job: True}  # Ray job id -> its driver still runs
        #: Cluster operations left before the current move counts as spinning (`SimHang`); None: no limit.
        self.budget: int | None = None
        self._ticking = 0  # ticks under way (nested in a service's wait)
        #: driver -> locks (`lock()`) held by the schedule's own moves on its jobs
        self._held_outside_ticks: Counter[str] = Counter()
        self._observing = 0  # the explorer reads the cluster (`observing`)
        self._pending_faults = 0  # `_fault`s scheduled and not run yet
        #: Every call sent to an actor, and every call that ran its body, in order (the explorer counts each
        #: worker's steps from them, and looks for calls sent to workers the job had asked to kill).
        self.sent: list[SimRef] = []
        self.ran: list[SimRef] = []
        self._fiber: _Fiber | None = None  # the actor code running now in its own thread (it sleeps by parking)

    # -- building the cluster (the explorer's moves) -----------------------------------------------------

    def add_node(self, resources: Mapping[str, float], labels: Mapping[str, str]) -> SimNode:
        n = next(self._ids)
        node_id = f"{n:04x}{'f' * 52}"
        address = f"10.{n // 62500}.{n // 250 % 250}.{n % 250}"
        node = SimNode(node_id, address, dict(resources), {**labels, "ray.io/node-id": node_id})
        self.nodes_by_id[node_id] = node
        self._by_raylet[(address, RAYLET_PORT)] = node
        for item in node.labels.items():
            self._by_label.setdefault(item, {})[node_id] = None
        self._place_pending()
        return node

    def kill_node(self, node_id: str) -> None:
        """The node's processes die now (its raylet's port refuses connections; calls on it fail at once);
        `nodes()` reports it dead a health-check delay later."""
        node = self.nodes_by_id[node_id]
        if not node.running:
            return
        node.refuses = node.reachable
        self._stop_processes(node, known=self._now if node.reachable else None)
        self._check_health_later(node)

    def vanish_node(self, node_id: str) -> None:
        """The machine is gone: its processes die now, but nothing tells the driver until Ray declares the node
        dead (calls on it hang until then; a probe of its raylet is inconclusive)."""
        node = self.nodes_by_id[node_id]
        if not node.running:
            return
        self._stop_processes(node, known=None)
        self._check_health_later(node)

    def partition(self, node_id: str, seconds: float | None) -> None:
        """Cut the node off for `seconds` (None: for good): its processes run on, nothing reaches them and no
        result or health check comes back (see the module docstring for what follows)."""
        node = self.nodes_by_id[node_id]
        if not node.running or not node.reachable:
            return
        node.reachable = False
        self._check_health_later(node)
        if seconds is not None:
            self._fault(self._now + seconds, lambda: self._heal(node))

    def drain_node(
        self, node_id: str, deadline_s: float, *, dies_after_s: float | None = 0.0, announced: bool = True
    ) -> bool:
        """Ray's drain: the node is reported draining now and dies `dies_after_s` after the deadline (more than
        0: it outlives it; None: never, the drain is cancelled then and it leaves the draining list). Not
        `announced`: Ray was given no deadline (`ray drain-node` without one: reported as 0), the node goes
        `deadline_s` from now all the same (whoever drains it removes it). False, nothing changed, when Ray
        rejects it (the node is not alive, or drains already)."""
        node = self.nodes_by_id[node_id]
        if node.reported_dead or not node.running or node.drain_deadline_ms is not None:
            return False
        node.drain_deadline_ms = int((self.wall() + deadline_s) * 1000) if announced else 0
        if dies_after_s is None:
            self._fault(self._now + deadline_s, lambda: self._undrain(node))
        else:
            self._fault(self._now + deadline_s + dies_after_s, lambda: self.kill_node(node_id))
        return True

    def advance(self, seconds: float) -> None:
        """Let `seconds` of virtual time pass, running what is due."""
        self._advance_to(self._now + seconds)

    def gcs_restart(self, seconds: float) -> None:
        """The GCS does not answer for `seconds` (it restarts): every request to it waits until then."""
        self.weather.gcs_down_until = max(self.weather.gcs_down_until, self._now + seconds)

    def driver(self, job_id: str) -> Any:
        """The port of another driver (a second job) on this cluster, with Ray job id `job_id`: a view answering
        every method of SimCluster, for that driver."""
        self._drivers[job_id] = True
        return _DriverView(self, job_id)

    def end_driver(self, job_id: str) -> None:
        """The driver exits: its actors and placement groups go with it (Ray's non-detached ones)."""
        self._drivers[job_id] = False
        for actor in list(self.actors.values()):
            if actor.driver == job_id and actor.state != WorkerState.DEAD:
                self._dead(actor)
        for group in self.groups:
            if group.driver == job_id and not group.removed:
                self._unplace(group, removed=True)
        self._place_pending()

    def waiting(self, actor: SimActor) -> bool:
        """Does the actor (outside a group) wait for its resources to be free (on its node, or on any)?"""
        return actor.actor_id in self._unplaced

    def live_actors(self) -> list[SimActor]:
        return [a for a in self.actors.values() if a.state != WorkerState.DEAD]

    def live_groups(self) -> list[SimGroup]:
        return [g for g in self.groups if not g.removed]

    # -- the connection and the clock -----------------------------------------------------------------

    def connected(self) -> bool:
        return True

    def gcs_address(self) -> str:
        return "sim:6379"

    def driver_ip(self) -> str:
        return "10.255.255.1"  # no node's address: masters are chosen by a task on their node

    def driver_node_id(self) -> str:
        return "driver"

    def namespace(self) -> str:
        return "sim"

    def job_id(self) -> str:
        return self.job

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return EPOCH + self._now

    def sleep(self, seconds: float) -> None:
        fiber = self._fiber
        if fiber is not None:  # actor code waits: it parks, and goes on when the time has come
            self._schedule(self._now + max(0.0, seconds), lambda: self._resume(fiber))
            fiber.park()
            return
        self._advance_to(self._now + max(0.0, seconds))

    def close(self) -> None:
        """The schedule is over: actor code still waiting for other actors unwinds (its thread ends)."""
        for actor in self.actors.values():
            for p in actor.processes:
                if p.fiber is not None:
                    p.fiber.end()

    def every(self, period_s: float, tick: Callable[[], bool], name: str) -> _Ticker:
        ticker = _Ticker(self, period_s, tick, driver=self.job)
        self._schedule(self._now, ticker._run)  # the first look at once, as the thread's
        return ticker

    def lock(self) -> _SimLock:
        return _SimLock(self, self.job)

    def wait_on(self, condition: threading.Condition, timeout_s: float | None) -> None:
        """Until what is due next has run (it may be what the caller waits for: callers check again, as after
        any wake-up of a condition), at most `timeout_s`."""
        self._spend()
        until = self._now + max(0.0, timeout_s) if timeout_s is not None else _INF
        if self._timers and self._timers[0][0] <= until:
            self._advance_to(self._timers[0][0])
        elif until == _INF:
            raise SimHang("a wait on the job's state without a timeout, with nothing left to happen")
        else:
            self._advance_to(until)

    # -- nodes ----------------------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        self._request()
        return [
            {
                "NodeID": n.node_id,
                "Alive": not n.reported_dead,
                "NodeManagerAddress": n.address,
                "NodeManagerPort": RAYLET_PORT,
                "Resources": dict(n.resources),
                "Labels": dict(n.labels),
                **({"DeathReason": 1, "DeathReasonMessage": "health check failed"} if n.reported_dead else {}),
            }
            for n in self.nodes_by_id.values()
        ]

    def labelled(self, key: str, value: str) -> list[SimNode]:
        """The nodes carrying label `key=value`, in the order they joined (through the label index: the explorer
        asks for the spares before every move, on clusters of a thousand nodes)."""
        return [self.nodes_by_id[i] for i in self._by_label.get((key, value), {})]

    def free_resources(self) -> dict[str, dict[str, float]]:
        self._request()
        return {n.node_id: self._free(n) for n in self.nodes_by_id.values() if not n.reported_dead}

    def draining_nodes(self) -> dict[str, int]:
        self._request()
        return {
            n.node_id: n.drain_deadline_ms
            for n in self.nodes_by_id.values()
            if n.drain_deadline_ms is not None and not n.reported_dead
        }

    def visible_devices_var(self, resource: str) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def raylet_refuses(self, host: str, port: int) -> bool | None:
        """A TCP probe of a raylet, answered at once (no virtual time: `status` must not let time pass)."""
        node = self._by_raylet.get((host, port))
        if node is None or node.refuses:
            return True
        return False if node.running and node.reachable else None

    # -- placement groups -----------------------------------------------------------------------------

    def create_group(self, bundles: list[dict[str, float]], name: str, selectors: list[dict[str, str]]) -> SimGroup:
        for b in bundles:
            if any(v < 0 for v in b.values()) or not b:
                raise ValueError(f"invalid bundle {b}")
        self._request()
        group = SimGroup(f"{next(self._ids):036x}", name, [dict(b) for b in bundles], selectors, self.job)
        self.groups.append(group)
        self._pending[group.group_id] = group
        self._place_pending()
        return group

    def group_state(self, group: SimGroup) -> tuple[str, str]:
        self._request()
        if group.node_id is None and not group.removed and not any(True for _ in self._could_hold(group)):
            return group.state, GroupState.INFEASIBLE
        return group.state, ""

    def group_table(self) -> dict[str, dict[str, Any]]:
        self._request()
        return {
            g.group_id: {
                "name": g.name,
                "state": g.state,
                "strategy": "PACK",
                "bundles": dict(enumerate(g.bundles)),
                "bundles_to_node_id": {i: g.node_id for i in range(len(g.bundles))},
            }
            for g in self.groups
        }

    def group_id(self, group: SimGroup) -> str:
        return group.group_id

    def remove_group(self, group: SimGroup) -> None:
        self._request()
        if group.removed:
            return
        self._unplace(group, removed=True)
        for actor in group.actors:
            if actor.state != WorkerState.DEAD:
                self._dead(actor)  # Ray kills a removed group's actors at once
        self._place_pending()

    def in_group(self, group: SimGroup, index: int) -> tuple[str, Any, int]:
        return ("group", group, index)

    def on_node(self, node_id: str) -> tuple[str, str]:
        return ("node", node_id)

    # -- actors and calls -------------------------------------------------------------------------------

    def actor_class(self, cls: type, options: Mapping[str, Any]) -> type:
        return cls

    def user_class(self, cls: Any) -> tuple[type, Mapping[str, Any]]:
        return cls, {}

    def start_actor(self, actor_class: Any, options: Mapping[str, Any], *args: Any, **kwargs: Any) -> SimActor:
        name, namespace = options.get("name", ""), options.get("namespace", "")
        self._request()
        if name and (namespace, name) in self._names:
            raise ValueError(f"The name {name} (namespace={namespace}) is already taken.")  # Ray's words
        strategy = options.get("scheduling_strategy")
        resources = {"CPU": float(options.get("num_cpus", 1)), "GPU": float(options.get("num_gpus", 0))}
        group = None
        if isinstance(strategy, tuple) and strategy[0] == "group":
            group = strategy[1]
            node_id = group.node_id or ""
        elif isinstance(strategy, tuple) and strategy[0] == "node":
            node_id = strategy[1]
        else:
            node_id = ""  # Ray chooses (`_place_actor`)
        actor = SimActor(
            f"{next(self._ids):032x}",
            name,
            namespace,
            self.job,
            actor_class,
            args,
            kwargs,
            resources,
            group,
            node_id,
            max_restarts=int(options.get("max_restarts", 0)),
            started_at=self._now,
            anywhere=group is None and not node_id,
        )
        self.actors[actor.actor_id] = actor
        if name:
            self._names[(namespace, name)] = actor
        if group is not None:
            group.actors.append(actor)
            if group.node_id is None and not group.removed:
                return actor  # it starts once its group is placed (PENDING_CREATION meanwhile)
        if group is None:
            self._unplaced[actor.actor_id] = actor
            self._place_actor(actor)
            return actor
        node = self.nodes_by_id.get(node_id)
        if node is None or not node.running or node.reported_dead or group.removed:
            self._dead(actor)  # Ray fails its first call: nowhere to run
            return actor
        self._start_process(actor, node)
        return actor

    def _place_actor(self, actor: SimActor) -> None:
        """Start an actor outside a group where its resources are free: on its node (dead: it dies), or where Ray
        puts it (the first node under half used, else the least used, that has them); else it waits."""
        if actor.anywhere:
            fitting = [n for n in self._schedulable() if _fits(self._free(n), actor.resources)]
            calm = [n for n in fitting if _used(n) < 0.5]
            node = calm[0] if calm else min(fitting, key=_used, default=None)
        else:
            node = self.nodes_by_id.get(actor.node_id)
            if node is None or not node.running or node.reported_dead:
                self._dead(actor)  # Ray fails its first call: nowhere to run
                return
            if not _schedulable(node) or not _fits(self._free(node), actor.resources):
                node = None
        if node is None:
            return  # PENDING_CREATION until its resources are free
        del self._unplaced[actor.actor_id]
        actor.holds = True
        add(node.held, actor.resources)
        self._start_process(actor, node)

    def is_actor(self, handle: Any) -> bool:
        return isinstance(handle, SimActor)

    def actor_id(self, handle: Any) -> str:
        return handle.actor_id

    def actor_table(self) -> dict[str, dict[str, Any]]:
        self._request()
        return {
            a.actor_id: {
                "ActorID": a.actor_id,
                "State": a.state,
                "Name": a.name,
                "JobID": a.driver,
                "Address": {"NodeID": a.node_id},
                "NumRestarts": a.restarts,
                "StartTime": (EPOCH + a.started_at) * 1000,  # ms, as Ray's
            }
            for a in sorted(self.actors.values(), key=_listed_order)
        }

    def named_actors(self) -> list[dict[str, str]]:
        self._request()
        return [{"name": name, "namespace": namespace} for namespace, name in self._names]

    def get_actor(self, name: str, namespace: str) -> SimActor:
        self._request()
        actor = self._names.get((namespace, name))
        if actor is None:
            raise ValueError(f"no actor {name!r} in namespace {namespace!r}")
        return actor

    def kill(self, handle: SimActor, *, restart: bool = False) -> None:
        self._request()
        if handle.state == WorkerState.DEAD:
            return
        if not restart:
            handle.kill_asked_at = self._now if handle.kill_asked_at is None else handle.kill_asked_at
        handle.kills += 1
        self._fault(self._now + self.weather.kill_s, lambda: self._killed(handle, restart))

    def call(self, handle: Any, method: str, *args: Any, **kwargs: Any) -> SimRef:
        if not isinstance(handle, SimActor):  # a driver-local worker's (`remote_<c>: false`): runs now, as on Ray
            return getattr(handle, method).remote(*args, **kwargs)
        return self._run_in(handle, lambda i, *a, **k: getattr(i, method)(*a, **k), method, args, kwargs)

    def run_on(self, handle: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> SimRef:
        if not isinstance(handle, SimActor):
            return handle.__ray_call__.remote(function, *args, **kwargs)
        return self._run_in(handle, function, "", args, kwargs)

    def run_task(self, function: Callable[..., Any], *args: Any, node_id: str | None = None) -> SimRef:
        """Run `function(*args)` now (its result after a call's duration); a task pinned to a node that is dead or
        cut off does not run. A task that looks at the node's sockets (`free_ports`) runs as on a simulated node,
        where nothing listens: binding sockets of this machine would make a schedule depend on its other work."""
        self._spend()
        node = self.nodes_by_id.get(node_id) if node_id else None
        if node_id and (node is None or not node.running or not node.reachable):
            return SimRef(next(self._ids), _INF)
        function = _ON_A_SIMULATED_NODE.get(function, function)
        return SimRef(next(self._ids), self._now + self.behaviour.call_s, function(*args))

    # -- results -----------------------------------------------------------------------------------------

    def put(self, value: Any) -> SimRef:
        return SimRef(next(self._ids), self._now, value)

    def is_result(self, value: Any) -> bool:
        return isinstance(value, SimRef)

    def result_key(self, ref: Any) -> bytes:
        return ref.ref_id.to_bytes(8, "big")

    def get(self, refs: Any, timeout_s: float | None = None) -> Any:
        self._spend()
        many = isinstance(refs, list)
        pending = list(refs) if many else [refs]
        deadline = _INF if timeout_s is None else self._now + timeout_s
        last = max((r.done_at() for r in pending), default=self._now)
        began = self._now
        while last > self._now and self._timers and self._timers[0][0] <= min(last, deadline):
            self._advance_to(self._timers[0][0])
            last = max((r.done_at() for r in pending), default=self._now)
            if deadline == _INF and self._now - began > FOREVER_S:
                raise SimHang(f"a get without a timeout waited {FOREVER_S:g} s of virtual time")
        if last == _INF and deadline == _INF:
            raise SimHang("a get without a timeout on a call that never finishes")
        if last > deadline:
            self._advance_to(deadline)
            raise CallTimedOut(f"not ready within {timeout_s} s")
        self._advance_to(last)
        values = [r.outcome() for r in pending]
        return values if many else values[0]

    def wait(self, refs: Sequence[Any], timeout_s: float) -> tuple[list[Any], list[Any]]:
        try:
            self.get(list(refs), timeout_s)
        except CallTimedOut:
            pass
        except Exception:  # a failed call is ready too
            pass
        ready = [r for r in refs if r.done_at() <= self._now]
        return ready, [r for r in refs if r.done_at() > self._now]

    def cancel(self, ref: Any) -> None:
        ref.ready_at = self._now
        ref.error = WorkerDied("cancelled")

    def object_nodes(self, refs: Sequence[Any]) -> dict[Any, dict[str, Any]]:
        return {r: {"object_size": 0, "node_ids": []} for r in refs}

    # -- the key-value store and the jobs ----------------------------------------------------------------

    def kv_put(self, key: str, value: bytes | str) -> None:
        self._request()
        self.kv[key] = value.encode() if isinstance(value, str) else value

    def kv_get(self, key: str | bytes) -> bytes | None:
        self._request()
        return self.kv.get(key.decode() if isinstance(key, bytes) else key)

    def kv_keys(self, prefix: str) -> list[bytes]:
        self._request()
        return [k.encode() for k in self.kv if k.startswith(prefix)]

    def kv_delete(self, key: str, *, by_prefix: bool = False) -> None:
        self._request()
        for k in [k for k in self.kv if (k.startswith(key) if by_prefix else k == key)]:
            del self.kv[k]

    def live_jobs(self) -> set[str]:
        self._request()
        return {job for job, alive in self._drivers.items() if alive}

    # -- internals: time and requests ---------------------------------------------------------------

    @contextmanager
    def observing(self) -> Iterator[None]:
        """The explorer reads the cluster (status, the record) to check it: no request waits, fails or counts."""
        self._observing += 1
        try:
            yield
        finally:
            self._observing -= 1

    def _spend(self) -> None:
        if self.budget is not None and not self._observing:
            self.budget -= 1
            if self.budget < 0:
                raise SimHang("spinning: the move made too many cluster operations without time passing")

    def _request(self) -> None:
        """One request to the GCS: it waits until the GCS answers, and the weather may slow it. The waiting thread
        may hold a lock of its service (the job record's writer does), so nothing else runs meanwhile: the clock
        moves on, and what came due runs at the next wait, late."""
        self._spend()
        weather = self.weather
        if self._observing:
            return
        if self._now < weather.gcs_down_until:
            self._now = weather.gcs_down_until
        if weather.slow(self._now) and weather.rng.random() < weather.delay_p:
            self._now += weather.rng.uniform(0.0, weather.delay_s)

    def _schedule(self, at: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (at, next(self._seq), fn))

    def _fault(self, at: float, fn: Callable[[], None]) -> None:
        """Schedule what a fault does later (a death at a deadline, a heal, a health check, a kill taking effect):
        `faults_pending` counts them."""
        self._pending_faults += 1

        def run() -> None:
            self._pending_faults -= 1
            fn()

        self._schedule(at, run)

    def faults_pending(self) -> bool:
        """Does a fault still have something to do (a node to die or heal, a health check, a kill), or the GCS to
        come back?"""
        return self._pending_faults > 0 or self._now < self.weather.gcs_down_until

    def _advance_to(self, t: float) -> None:
        while self._timers and self._timers[0][0] <= t:
            at, _, fn = heapq.heappop(self._timers)
            self._now = max(self._now, at)
            fn()
        self._now = max(self._now, t)

    # -- internals: nodes -------------------------------------------------------------------------------

    def _check_health_later(self, node: SimNode) -> None:
        """Ray's health checks: the node is declared dead a delay after its last answer, if it has not answered
        again (a cut healed) by then; while the GCS restarts nobody checks."""

        def check() -> None:
            if node.reported_dead or (node.running and node.reachable):
                return
            if self._now < self.weather.gcs_down_until:
                self._fault(self.weather.gcs_down_until + HEALTH_DELAY_S, check)
                return
            self._declare_dead(node)

        self._fault(self._now + HEALTH_DELAY_S, check)

    def _declare_dead(self, node: SimNode) -> None:
        """The GCS marks the node dead: the driver learns that the calls on it failed, its groups are rescheduled
        and its actors are DEAD (or RESTARTING, to start where their bundle goes)."""
        node.reported_dead = True
        node.drain_deadline_ms = None
        for p in node.unknown.values():  # ended before, unknown to the driver until now
            p.known_at = min(p.known_at, self._now)
        node.unknown.clear()
        for p in list(node.processes.values()):  # still running: cut off (zombies), they end here
            self._end_process(p, known=self._now)
        for group in self.groups:
            if group.node_id == node.node_id and not group.removed:
                self._unplace(group, removed=False)
        for actor in list(node.actors.values()):
            if actor.state != WorkerState.DEAD:
                self._lost(actor)
        self._place_pending()

    def _heal(self, node: SimNode) -> None:
        """The cut ends (each partition heals once: `partition` cuts only a reachable node): a node Ray declared
        dead meanwhile learns it and its raylet exits (its zombies were ended when Ray declared the node dead:
        nothing of theirs could get out of the cut), or one whose processes died meanwhile stays down; otherwise
        what was held back goes through."""
        node.reachable = True
        if node.reported_dead or not node.running:
            node.running, node.refuses = False, True
            return
        for p in node.processes.values():
            for ref in p.pending:
                if ref.finished_at is not None:
                    ref.ready_at = self._now  # its answer was waiting to get out
        stalled, node.stalled = node.stalled, []
        for send in stalled:
            send()

    def _undrain(self, node: SimNode) -> None:
        node.drain_deadline_ms = None
        self._place_pending()

    def _stop_processes(self, node: SimNode, *, known: float | None) -> None:
        node.running = False
        for p in list(node.processes.values()):
            self._end_process(p, known=known)

    def _schedulable(self) -> Iterator[SimNode]:
        """The nodes new groups and actors may go to: running, reachable and not draining (Ray schedules nothing
        new on a draining node: ray-project/ray PRs 38096, 38278 and 49517)."""
        return (n for n in self.nodes_by_id.values() if _schedulable(n))

    def _free(self, node: SimNode) -> dict[str, float]:
        held = node.held
        return {k: node.resources.get(k, 0.0) - held.get(k, 0.0) for k in {*node.resources, *held}}

    def _candidates(self, group: SimGroup) -> Iterator[SimNode]:
        """The nodes whose labels match every bundle's selector (through the label index)."""
        wanted = {k: v for s in group.selectors for k, v in s.items()}
        sets: list[Mapping[str, object]] = [self._by_label.get(item, {}) for item in wanted.items()]
        sets = sets or [self.nodes_by_id]  # no selector: every node
        for node_id in min(sets, key=len):
            node = self.nodes_by_id[node_id]
            if all(_selects(node.labels, s) for s in group.selectors):
                yield node

    def _could_hold(self, group: SimGroup) -> Iterator[SimNode]:
        return (n for n in self._candidates(group) if _schedulable(n) and _fits(n.resources, group.demand))

    def _place_pending(self) -> None:
        for group in list(self._pending.values()):
            node = next((n for n in self._could_hold(group) if _fits(self._free(n), group.demand)), None)
            if node is not None:
                del self._pending[group.group_id]
                group.node_id, group.rescheduling = node.node_id, False
                add(node.held, group.demand)
                self._start_in(group, node)
        for actor in list(self._unplaced.values()):  # placing one takes no other out of the list
            self._place_actor(actor)

    def _unplace(self, group: SimGroup, *, removed: bool) -> None:
        """`group` leaves its node: removed, or rescheduled (its node died)."""
        node = self.nodes_by_id.get(group.node_id or "")
        if node is not None:
            _release(node.held, group.demand)
        group.node_id = None
        if removed:
            group.removed, group.rescheduling = True, False
            self._pending.pop(group.group_id, None)
        else:
            group.rescheduling = True
            self._pending[group.group_id] = group

    # -- internals: actors ---------------------------------------------------------------------------

    def _start_process(self, actor: SimActor, node: SimNode) -> None:
        """A new incarnation of `actor` on `node`: its constructor runs after the weather's start delay, then the
        calls sent to it meanwhile."""
        weather = self.weather
        delay = weather.rng.uniform(0.0, weather.start_s) if weather.start_s else 0.0
        p = SimProcess(next(self._ids), node.node_id, self._now + delay, restarted=bool(actor.processes))
        old = self.nodes_by_id.get(actor.node_id)
        if old is not None and old is not node:
            old.actors.pop(actor.actor_id, None)
        actor.process, actor.node_id = p, node.node_id
        actor.processes.append(p)
        node.processes[p.serial] = p
        node.actors[actor.actor_id] = actor
        p.doomed = weather.bad_starts > 0
        weather.bad_starts -= p.doomed

        def construct() -> None:
            if p.ended_at is not None:
                return
            if p.doomed:
                constructed(None, RuntimeError("the constructor failed (the schedule's bad start)"))
                return
            self._run_code(p, lambda: actor.cls(*actor.args, **actor.kwargs), constructed, _waits(actor.args))

        def constructed(instance: Any, error: Exception | None) -> None:
            if error is not None:  # the user's constructor raised: the actor dies (Ray's creation error)
                p.error = error
                self._dead(actor)
                return
            p.instance = instance
            actor.state = WorkerState.ALIVE
            self._next_call(p)

        self._schedule(p.ready_at, construct)

    def _start_in(self, group: SimGroup, node: SimNode) -> None:
        """The group is placed (again): its actors waiting for it (created before it was placed, or RESTARTING
        after its node died) start there."""
        for actor in group.actors:
            if actor.kill_asked_at is not None or actor.state == WorkerState.DEAD:
                continue
            if actor.state == WorkerState.RESTARTING:
                actor.restarts += 1
                self._start_process(actor, node)
            elif actor.state == WorkerState.PENDING_CREATION and actor.process is None:
                self._start_process(actor, node)

    def _end_process(self, p: SimProcess, *, known: float | None) -> None:
        """The process dies now: nothing more runs in it, answers not given are never given; the driver's calls on
        it fail from `known` (None: when Ray declares its node dead)."""
        if known is not None:
            p.known_at = min(p.known_at, known)
        if p.ended_at is not None:
            return
        p.ended_at = self._now
        if p.fiber is not None:
            p.fiber.end()
        for ref in p.pending:
            if ref.finished_at is None or ref.ready_at > self._now:
                ref.ready_at = _INF
        p.pending, p.busy = [], True
        p.queue.clear()
        node = self.nodes_by_id[p.node_id]  # nodes are never removed
        node.processes.pop(p.serial, None)
        if p.known_at == _INF:
            node.unknown[p.serial] = p

    def _lost(self, actor: SimActor) -> None:
        """The actor's node was declared dead: restarted where its bundle is placed again (RESTARTING until then;
        an actor without a group, pinned to its node, cannot be), or DEAD. Its process ended already."""
        if self._restarts_left(actor) and actor.anywhere:  # Ray places it again, on another node
            self._release_held(actor)
            actor.state, actor.restarts = WorkerState.RESTARTING, actor.restarts + 1
            self._unplaced[actor.actor_id] = actor
            self._place_actor(actor)
        elif self._restarts_left(actor) and actor.group is not None and not actor.group.removed:
            actor.state = WorkerState.RESTARTING  # its group was on the node: it starts where the group goes next
        else:
            self._dead(actor)

    def _killed(self, actor: SimActor, restart: bool) -> None:
        """`kill` takes effect: the process dies; with `restart` and restarts left, it starts again in place."""
        actor.kills -= 1
        if actor.state == WorkerState.DEAD or (restart and actor.actor_id in self._unplaced):
            return  # nothing runs yet to restart
        if actor.process is not None:
            self._end_process(actor.process, known=self._now)
        node = self.nodes_by_id.get(actor.node_id)
        if restart and self._restarts_left(actor) and node is not None and _schedulable(node):
            actor.restarts += 1
            actor.state = WorkerState.RESTARTING
            self._start_process(actor, node)
        else:
            self._dead(actor)

    def _dead(self, actor: SimActor) -> None:
        """DEAD to the GCS: its process ends, its name is free, what it held outside a group is released."""
        if actor.process is not None:
            self._end_process(actor.process, known=self._now)
        actor.state = WorkerState.DEAD
        actor.died_at = self._now
        self._unplaced.pop(actor.actor_id, None)
        self._names.pop((actor.namespace, actor.name), None)  # held by it (names are unique while not DEAD), or none
        if actor.holds:
            self._release_held(actor)
            self._place_pending()

    def _release_held(self, actor: SimActor) -> None:
        """What the actor (holding it) held outside a group, on its node, is free again."""
        actor.holds = False
        _release(self.nodes_by_id[actor.node_id].held, actor.resources)

    @staticmethod
    def _restarts_left(actor: SimActor) -> bool:
        return actor.kill_asked_at is None and (actor.max_restarts < 0 or actor.restarts < actor.max_restarts)

    # -- internals: calls ---------------------------------------------------------------------------------

    def _run_in(
        self, actor: SimActor, body: Callable[..., Any], method: str, args: tuple, kwargs: Mapping[str, Any]
    ) -> SimRef:
        """Send a call to `actor`. Its process runs its calls one at a time, in order, after its constructor: a
        call's body runs when it starts (once the results passed to it are in: their values are its arguments, as
        on Ray; if one failed, so does the call, with its error) and its result is in a duration later (longer on
        a slow node), or never, where the schedule makes the method hang. A call to an actor that is restarting or
        dead fails at once (Ray's max_task_retries=0); one to an actor on a node cut off is held until the cut
        heals."""
        self._spend()
        ref = SimRef(next(self._ids), _INF, actor=actor, method=method, args=args, kwargs=kwargs, sent_at=self._now)
        ref.hangs = bool(method) and method == self.behaviour.hang_method
        self.sent.append(ref)
        p = actor.process
        if p is None or p.ended_at is not None or actor.state in (WorkerState.DEAD, WorkerState.RESTARTING):
            ref.ready_at = self._now
            ref.error = WorkerDied(f"the actor {actor.name} is {actor.state.lower()}")
            return ref
        ref.process = p
        node = self.nodes_by_id[p.node_id]

        def send() -> None:
            if p.ended_at is None:
                p.pending.append(ref)
                p.queue.append((ref, lambda: self._body(p, ref, body, args, kwargs)))
                self._next_call(p)

        if node.reachable:
            send()
        else:
            node.stalled.append(send)
        return ref

    def _next_call(self, p: SimProcess) -> None:
        """Start the next call of an idle, constructed process (it runs once the results passed to it are in)."""
        if p.busy or not p.queue or p.instance is None or p.ended_at is not None:
            return
        ref, run = p.queue.popleft()
        p.busy = True
        self._once_passed(p, ref, run)

    def _once_passed(self, p: SimProcess, ref: SimRef, run: Callable[[], None]) -> None:
        """Run the call now if the results passed to it are in; else look again when the next is due (at most
        `ARGUMENT_POLL_S` later: a result still running has no time yet). The process waits meanwhile."""
        if p.ended_at is not None:
            return
        passed = [v for v in (*ref.args, *ref.kwargs.values()) if isinstance(v, SimRef)]
        due = max((r.done_at() for r in passed), default=self._now)
        if due <= self._now:
            run()
        else:
            self._schedule(min(due, self._now + ARGUMENT_POLL_S), lambda: self._once_passed(p, ref, run))

    def _body(
        self, p: SimProcess, ref: SimRef, body: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any]
    ) -> None:
        """A call starts in its process (unless the process died first): its body runs now; it finishes a duration
        later (never, where it hangs), and the process takes its next call. `_once_passed` runs it in a running
        process only."""
        ref.ran_at = self._now
        self.ran.append(ref)
        try:
            resolved = [self._value_of(a) for a in args]
            named = {k: self._value_of(v) for k, v in kwargs.items()}
        except Exception as e:  # a result it was passed failed: so does the call, as on Ray
            self._ran(p, ref, None, e)
            return
        self._run_code(
            p, lambda: body(p.instance, *resolved, **named), lambda v, e: self._ran(p, ref, v, e), _waits(resolved)
        )

    def _ran(self, p: SimProcess, ref: SimRef, value: Any, error: Exception | None) -> None:
        """A call's body returned `value` or raised `error` (the user's method, as from Ray): it finishes a
        duration later (never, where it hangs, or when its process dies meanwhile). Its process runs: code that
        waits runs on in a `_Fiber`, whose process ending unwinds it without coming here."""
        ref.value, ref.error = value, error
        if ref.hangs:
            return
        node = self.nodes_by_id[p.node_id]
        self._schedule(self._now + self.behaviour.call_s * node.slow, lambda: self._finish(p, ref))

    def _run_code(
        self, p: SimProcess, code: Callable[[], Any], then: Callable[[Any, Exception | None], None], waits: bool
    ) -> None:
        """Run actor code in `p` (`_inside` it), then `then(value, error)`: at once, or, where it `waits` for other
        actors, in a `_Fiber` that parks while it sleeps."""
        if not waits:
            try:
                with self._inside(p):
                    value = code()
            except Exception as e:
                then(None, e)
                return
            then(value, None)
            return
        p.fiber = _Fiber(p, code, then)
        self._resume(p.fiber)

    def _resume(self, fiber: _Fiber) -> None:
        """Run a fiber on from where it parked (not if its process ended); once its code is over, what follows."""
        if fiber.done or fiber.ended:
            return
        with self._inside(fiber.p):
            self._fiber = fiber
            try:
                fiber.resume()
            finally:
                self._fiber = None
        if fiber.done:
            fiber.p.fiber = None
            fiber.then(fiber.value, fiber.error)

    def _finish(self, p: SimProcess, ref: SimRef) -> None:
        if p.ended_at is not None:
            return
        ref.finished_at = self._now
        if self.nodes_by_id[p.node_id].reachable:
            ref.ready_at = self._now  # else its answer waits for the cut to heal
        p.pending.remove(ref)  # sent with it (`_run_in`), emptied only when the process ends
        if ref.ready_at == _INF:
            p.pending.append(ref)  # kept: the heal lets its answer out
        p.busy = False
        self._next_call(p)

    @staticmethod
    def _value_of(value: Any) -> Any:
        return value.outcome() if isinstance(value, SimRef) else value

    @contextmanager
    def _inside(self, p: SimProcess) -> Iterator[None]:
        """As in the actor's own process: what the placed class installs (its rank, its rendezvous variables)
        is the process's, not this process's environment."""
        from rlplace.ray import exchange, worker

        node = self.nodes_by_id[p.node_id]
        me = worker.Here(node.node_id, dict(node.labels), node.address, (), f"sim-worker-{p.serial}")
        saved = worker.install, worker.restarted, worker.cluster, worker.here, exchange.free_ports
        worker.install = lambda payload: setattr(p, "payload", payload)
        worker.restarted = lambda: p.restarted
        worker.cluster = lambda: self
        worker.here = lambda: me
        exchange.free_ports = _ports_on_a_simulated_node
        try:
            yield
        finally:
            worker.install, worker.restarted, worker.cluster, worker.here, exchange.free_ports = saved


class _DriverView:
    """Another driver's port on the same cluster: everything is the cluster's, but its Ray job id (what it creates
    is that driver's, and dies with it; its locks and ticks are its own process's: `_SimLock`)."""

    def __init__(self, cluster: SimCluster, job_id: str):
        self._cluster = cluster
        self._job = job_id

    def job_id(self) -> str:
        return self._job

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._cluster, name)
        if name in ("create_group", "start_actor", "lock", "every") and callable(attr):

            def as_driver(*args: Any, **kwargs: Any) -> Any:
                saved, self._cluster.job = self._cluster.job, self._job
                try:
                    return attr(*args, **kwargs)
                finally:
                    self._cluster.job = saved

            return as_driver
        return attr


def _ports_on_a_simulated_node(
    count: int, avoid: list[int] | set[int], low: int, high: int, first: int = FIRST_PORT
) -> list[int]:
    """`free_ports` on a simulated node, where nothing listens: the first `count` ports it would try that `avoid`
    does not hold."""
    skip = set(avoid)
    found = list(itertools.islice((p for p in port_order(low, high, first) if p not in skip), count))
    if len(found) < count:
        raise PlacementError(f"no {count} free ports in {low}-{high} for MASTER_PORT")
    return found


#: Tasks that look at their node, and what they do on a simulated one.
_ON_A_SIMULATED_NODE: dict[Callable[..., Any], Callable[..., Any]] = {free_ports: _ports_on_a_simulated_node}


def _waits(args: Sequence[Any]) -> bool:
    """Actor code that waits for other actors: a worker's payload with an exchange (its component is placed by
    Ray: its workers agree on their rendezvous in the constructor, and again in the call telling a new size)."""
    return any(isinstance(a, dict) and a.get("exchange") for a in args)


def _listed_order(actor: SimActor) -> int:
    """Where the actor table lists an actor: in no order of creation, as Ray's (its GCS keeps them by id in a hash
    map; `rlplace status` picks the newest of two actors of one name by start time, not by the order listed).
    Deterministic, so a schedule replays."""
    return int(actor.actor_id, 16) * 0x9E3779B97F4A7C15 % (1 << 64)


def _schedulable(node: SimNode) -> bool:
    return node.running and node.reachable and not node.reported_dead and node.drain_deadline_ms is None


def _used(node: SimNode) -> float:
    """How full a node is: the largest share of its CPUs or GPUs held (what Ray's hybrid policy ranks by)."""
    return max((node.held.get(k, 0.0) / v for k, v in node.resources.items() if k in ("CPU", "GPU") and v), default=0)


def _fits(free: Mapping[str, float], demand: Mapping[str, float]) -> bool:
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in demand.items() if v > 0)


def _selects(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _release(held: dict[str, float], what: Mapping[str, float]) -> None:
    for k, v in what.items():
        held[k] = held.get(k, 0.0) - v
