"""`SimCluster`: the port (`rlplace.ray.port.Cluster`) answered in memory, on a virtual clock (docs/ray.md,
"The simulation").

The control plane's real services (reservation, launch, rendezvous, failover's watcher and mover, and weight
sync's object-store path) run on it unchanged, in one thread, deterministically: time passes only when a service
waits (`get`, `wait`, `sleep`, `wait_on`), and what is due meanwhile runs in time order (node deaths, the
watcher's ticks, calls finishing). Nodes have GPUs, CPUs and labels; placement groups become ready, stay pending
or are infeasible; actors are the user's objects, built by the placed class as on Ray, whose calls take virtual
time (after the results passed to them, which they receive as values), fail, or hang until their node dies; a
node dies at once for its processes and is reported dead by `nodes()` a health-check delay later; nodes join;
drains carry deadlines. Unlike `rlplace.ray.local_raylets` (real raylets on one machine), nothing here is Ray: it
exists so that thousands of fault schedules run per second (`rlplace.sim.explore`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rlplace.lifecycle import GroupState, WorkerState
from rlplace.planner.capacity import add
from rlplace.ray.port import CallTimedOut, WorkerDied

#: How long after a node's processes die `nodes()` reports it dead (Ray's health checks).
HEALTH_DELAY_S = 1.5
#: A call's virtual duration when the schedule says nothing else.
CALL_S = 0.01
#: The wall clock at virtual time 0 (drain deadlines are wall-clock times, as Ray gives them).
EPOCH = 1_800_000_000.0


class SimHang(Exception):
    """A service waited without a bound on something that never comes: on Ray it would hang forever."""


@dataclass
class SimNode:
    node_id: str
    address: str
    resources: dict[str, float]
    labels: dict[str, str]
    running: bool = True  # its processes: False from the moment it dies
    reported_dead: bool = False  # what `nodes()` says: a health-check delay after it died
    drain_deadline_ms: int | None = None
    slow: float = 1.0  # calls of its actors take this many times longer


@dataclass(eq=False)
class SimGroup:
    group_id: str
    name: str
    bundles: list[dict[str, float]]
    selectors: list[dict[str, str]]
    node_id: str | None = None  # where it is placed (PACK: one node here, as rlplace asks)
    removed: bool = False

    @property
    def state(self) -> GroupState:
        return GroupState.REMOVED if self.removed else GroupState.CREATED if self.node_id else GroupState.PENDING

    @property
    def demand(self) -> dict[str, float]:
        """What its bundles hold together (PACK: on one node)."""
        total: dict[str, float] = {}
        for b in self.bundles:
            add(total, b)
        return total


@dataclass(eq=False)
class SimActor:
    actor_id: str
    name: str
    namespace: str
    node_id: str
    resources: dict[str, float]
    group: SimGroup | None
    instance: Any = None
    payload: dict[str, Any] | None = None  # what the placed class installed (its rank, its rendezvous)
    died_at: float | None = None
    busy_until: float = 0.0
    started_at: float = 0.0  # the virtual time it was created

    def __getattr__(self, name: str) -> Any:
        """`hasattr(handle, "on_replaced")` asks the user's class, as an actor handle does."""
        instance = self.__dict__.get("instance")
        if instance is not None and not name.startswith("__") and hasattr(type(instance), name):
            return name
        raise AttributeError(name)


@dataclass(eq=False)
class SimRef:
    ref_id: int
    ready_at: float  # inf: hangs until its actor dies
    value: Any = None
    error: BaseException | None = None
    actor: SimActor | None = None

    def done_at(self) -> float:
        died = self.actor.died_at if self.actor is not None else None
        return self.ready_at if died is None or died >= self.ready_at else died

    def outcome(self) -> Any:
        died = self.actor.died_at if self.actor is not None else None
        if died is not None and died < self.ready_at:
            raise WorkerDied(f"the actor {self.actor.name} died on its node before the call finished")  # type: ignore[union-attr]
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

    def wake(self) -> None:
        if not self.stopped:
            self.cluster._schedule(self.cluster.now(), self._run)

    def stop(self, timeout_s: float) -> None:
        self.stopped = True

    def _run(self) -> None:
        """One tick, then the next a period later. A tick comes due while the last one still runs (it waits, and
        the simulation runs what is due meanwhile): as with a thread, it does not start before that one ends."""
        if self.stopped or self.running:
            self.again = self.running  # a wake during the tick: the next one follows at once
            return
        if self.cluster._held_outside_ticks:  # a change holds a lock the tick may need: as a thread, it waits
            self.cluster._schedule(self.cluster.now() + self.period_s, self._run)
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
class Behaviour:
    """What the schedule makes calls do (the explorer sets it): their duration, which method hangs."""

    call_s: float = CALL_S
    hang_method: str | None = None  # calls of this method never finish (until their actor dies)


@dataclass
class _SimLock:
    """`SimCluster.lock`: re-entrant (one thread runs everything), and counted while held outside a tick, so the
    watcher's ticks wait for the change that holds it, as its thread would on Ray."""

    cluster: SimCluster
    depth: int = 0
    outside: bool = False

    def __enter__(self) -> _SimLock:
        if self.depth == 0:
            self.outside = not self.cluster._ticking
            self.cluster._held_outside_ticks += self.outside
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.cluster._held_outside_ticks -= self.outside
            self.outside = False


class SimCluster:
    """An in-memory cluster on a virtual clock; see the module docstring."""

    def __init__(self) -> None:
        self._now = 0.0
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self.nodes_by_id: dict[str, SimNode] = {}
        self.groups: list[SimGroup] = []
        self.actors: dict[str, SimActor] = {}
        self.kv: dict[str, bytes] = {}
        self.behaviour = Behaviour()
        self.job = "01000000"
        #: Cluster operations left before the current move counts as spinning (`SimHang`); None: no limit.
        self.budget: int | None = None
        self._ticking = 0  # ticks under way (nested in a service's wait)
        self._held_outside_ticks = 0  # locks (`lock()`) held by the schedule's own moves

    # -- building the cluster (the explorer's moves) -----------------------------------------------------

    def add_node(self, resources: Mapping[str, float], labels: Mapping[str, str]) -> SimNode:
        n = next(self._ids)
        node_id = f"{n:04x}{'f' * 52}"
        node = SimNode(node_id, f"10.0.{n // 250}.{n % 250}", dict(resources), {**labels, "ray.io/node-id": node_id})
        self.nodes_by_id[node.node_id] = node
        self._place_pending()
        return node

    def kill_node(self, node_id: str) -> None:
        """The node's processes die now; `nodes()` reports it dead a health-check delay later."""
        node = self.nodes_by_id[node_id]
        if not node.running:
            return
        node.running = False
        for actor in self.actors.values():
            if actor.node_id == node_id and actor.died_at is None:
                actor.died_at = self._now
        self._schedule(self._now + HEALTH_DELAY_S, lambda: setattr(node, "reported_dead", True))

    def drain_node(self, node_id: str, deadline_s: float) -> None:
        """Ray's drain: the node is reported draining now and dies at the deadline."""
        node = self.nodes_by_id[node_id]
        node.drain_deadline_ms = int((self.wall() + deadline_s) * 1000)
        self._schedule(self._now + deadline_s, lambda: self.kill_node(node_id))

    def advance(self, seconds: float) -> None:
        """Let `seconds` of virtual time pass, running what is due."""
        self._advance_to(self._now + seconds)

    def live_actors(self) -> list[SimActor]:
        return [a for a in self.actors.values() if a.died_at is None]

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
        self._advance_to(self._now + max(0.0, seconds))

    def spawn(self, task: Callable[[], None], name: str) -> None:
        def once() -> bool:
            task()
            return False

        self.every(0.0, once, name)

    def every(self, period_s: float, tick: Callable[[], bool], name: str) -> _Ticker:
        ticker = _Ticker(self, period_s, tick)
        self._schedule(self._now, ticker._run)  # the first look at once, as the thread's
        return ticker

    def lock(self) -> _SimLock:
        return _SimLock(self)

    def wait_on(self, condition: threading.Condition, timeout_s: float | None) -> None:
        """Until what is due next has run (it may be what the caller waits for: callers check again, as after
        any wake-up of a condition), at most `timeout_s`."""
        self._spend()
        until = self._now + max(0.0, timeout_s) if timeout_s is not None else float("inf")
        if self._timers and self._timers[0][0] <= until:
            self._advance_to(self._timers[0][0])
        elif until == float("inf"):
            raise SimHang("a wait on the job's state without a timeout, with nothing left to happen")
        else:
            self._advance_to(until)

    # -- nodes ----------------------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        self._spend()
        return [
            {
                "NodeID": n.node_id,
                "Alive": not n.reported_dead,
                "NodeManagerAddress": n.address,
                "Resources": dict(n.resources),
                "Labels": dict(n.labels),
                **({"DeathReason": 1, "DeathReasonMessage": "health check failed"} if n.reported_dead else {}),
            }
            for n in self.nodes_by_id.values()
        ]

    def free_resources(self) -> dict[str, dict[str, float]]:
        return {n.node_id: self._free(n) for n in self.nodes_by_id.values() if not n.reported_dead}

    def draining_nodes(self) -> dict[str, int]:
        return {
            n.node_id: n.drain_deadline_ms
            for n in self.nodes_by_id.values()
            if n.drain_deadline_ms is not None and not n.reported_dead
        }

    def visible_devices_var(self, resource: str) -> str:
        return "CUDA_VISIBLE_DEVICES"

    # -- placement groups -----------------------------------------------------------------------------

    def create_group(self, bundles: list[dict[str, float]], name: str, selectors: list[dict[str, str]]) -> SimGroup:
        for b in bundles:
            if any(v < 0 for v in b.values()) or not b:
                raise ValueError(f"invalid bundle {b}")
        group = SimGroup(f"{next(self._ids):036x}", name, [dict(b) for b in bundles], selectors)
        self.groups.append(group)
        self._place_pending()
        return group

    def group_state(self, group: SimGroup) -> tuple[str, str]:
        if group.state == GroupState.PENDING and not any(self._could_hold(n, group) for n in self._schedulable()):
            return GroupState.PENDING, GroupState.INFEASIBLE
        return group.state, ""

    def group_table(self) -> dict[str, dict[str, Any]]:
        return {
            g.group_id: {"name": g.name, "state": g.state, "bundles_to_node_id": {0: g.node_id}} for g in self.groups
        }

    def group_id(self, group: SimGroup) -> str:
        return group.group_id

    def remove_group(self, group: SimGroup) -> None:
        if group.removed:
            return
        group.removed = True
        for actor in self.actors.values():
            if actor.group is group and actor.died_at is None:
                actor.died_at = self._now
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
        strategy = options.get("scheduling_strategy")
        resources = {"CPU": float(options.get("num_cpus", 1)), "GPU": float(options.get("num_gpus", 0))}
        group = None
        if isinstance(strategy, tuple) and strategy[0] == "group":
            group = strategy[1]
            node_id = group.node_id
        elif isinstance(strategy, tuple) and strategy[0] == "node":
            node_id = strategy[1]
        else:
            node_id = next((n.node_id for n in self._schedulable() if _fits(self._free(n), resources)), None)
        name, namespace = options.get("name", ""), options.get("namespace", "")
        actor = SimActor(f"{next(self._ids):032x}", name, namespace, node_id or "", resources, group)
        actor.started_at = self._now
        self.actors[actor.actor_id] = actor
        node = self.nodes_by_id.get(node_id or "")
        if node is None or not node.running or (group is not None and group.removed):
            actor.died_at = self._now  # Ray would fail its first call: nowhere to run
            return actor
        with self._inside(actor):
            actor.instance = actor_class(*args, **kwargs)
        return actor

    def is_actor(self, handle: Any) -> bool:
        return isinstance(handle, SimActor)

    def actor_id(self, handle: Any) -> str:
        return handle.actor_id

    def actor_table(self) -> dict[str, dict[str, Any]]:
        return {
            a.actor_id: {
                "ActorID": a.actor_id,
                "State": WorkerState.DEAD if a.died_at is not None else WorkerState.ALIVE,
                "Name": a.name,
                "JobID": self.job,
                "Address": {"NodeID": a.node_id},
                "StartTime": (EPOCH + a.started_at) * 1000,  # ms, as Ray's
            }
            for a in self.actors.values()
        }

    def named_actors(self) -> list[dict[str, str]]:
        return [{"name": a.name, "namespace": a.namespace} for a in self.live_actors() if a.name]

    def get_actor(self, name: str, namespace: str) -> SimActor:
        for a in self.live_actors():
            if (a.name, a.namespace) == (name, namespace):
                return a
        raise ValueError(f"no actor {name!r} in namespace {namespace!r}")

    def kill(self, handle: Any, *, restart: bool = False) -> None:
        if handle.died_at is None:
            handle.died_at = self._now

    def call(self, handle: Any, method: str, *args: Any, **kwargs: Any) -> SimRef:
        return self._run_in(handle, lambda *a, **k: getattr(handle.instance, method)(*a, **k), method, args, kwargs)

    def run_on(self, handle: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> SimRef:
        return self._run_in(handle, lambda *a, **k: function(handle.instance, *a, **k), "", args, kwargs)

    def run_task(self, function: Callable[..., Any], *args: Any, node_id: str | None = None) -> SimRef:
        node = self.nodes_by_id.get(node_id) if node_id else None
        if node_id and (node is None or not node.running):
            return SimRef(next(self._ids), float("inf"))  # a task pinned to a dead node never runs
        return self._finished(function(*args), None, self._now + self.behaviour.call_s)

    # -- results -----------------------------------------------------------------------------------------

    def put(self, value: Any) -> SimRef:
        return self._finished(value, None, self._now)

    def is_result(self, value: Any) -> bool:
        return isinstance(value, SimRef)

    def result_key(self, ref: Any) -> bytes:
        return ref.ref_id.to_bytes(8, "big")

    def get(self, refs: Any, timeout_s: float | None = None) -> Any:
        self._spend()
        many = isinstance(refs, list)
        pending = list(refs) if many else [refs]
        deadline = float("inf") if timeout_s is None else self._now + timeout_s
        last = max((r.done_at() for r in pending), default=self._now)
        while last > self._now and self._timers and self._timers[0][0] <= min(last, deadline):
            self._advance_to(self._timers[0][0])
            last = max((r.done_at() for r in pending), default=self._now)
        if last == float("inf") and deadline == float("inf"):
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
        self.kv[key] = value.encode() if isinstance(value, str) else value

    def kv_get(self, key: str | bytes) -> bytes | None:
        return self.kv.get(key.decode() if isinstance(key, bytes) else key)

    def kv_keys(self, prefix: str) -> list[bytes]:
        return [k.encode() for k in self.kv if k.startswith(prefix)]

    def kv_delete(self, key: str, *, by_prefix: bool = False) -> None:
        for k in [k for k in self.kv if (k.startswith(key) if by_prefix else k == key)]:
            del self.kv[k]

    def live_jobs(self) -> set[str]:
        return {self.job}

    # -- internals ----------------------------------------------------------------------------------

    def _spend(self) -> None:
        if self.budget is not None:
            self.budget -= 1
            if self.budget < 0:
                raise SimHang("spinning: the move made too many cluster operations without time passing")

    def _schedule(self, at: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (at, next(self._seq), fn))

    def _advance_to(self, t: float) -> None:
        while self._timers and self._timers[0][0] <= t:
            at, _, fn = heapq.heappop(self._timers)
            self._now = max(self._now, at)
            fn()
        self._now = max(self._now, t)

    def _schedulable(self) -> list[SimNode]:
        """The nodes new groups and actors may go to: running and not draining (Ray schedules nothing new on a
        draining node: ray-project/ray PRs 38096, 38278 and 49517)."""
        return [n for n in self.nodes_by_id.values() if n.running and n.drain_deadline_ms is None]

    def _free(self, node: SimNode) -> dict[str, float]:
        free = node.resources
        held: dict[str, float] = {}
        for g in self.groups:
            if g.node_id == node.node_id and not g.removed:
                add(held, g.demand)
        for a in self.actors.values():
            if a.node_id == node.node_id and a.group is None and a.died_at is None:
                add(held, a.resources)
        return {k: free.get(k, 0.0) - held.get(k, 0.0) for k in {*free, *held}}

    def _could_hold(self, node: SimNode, group: SimGroup) -> bool:
        return _fits(node.resources, group.demand) and all(_selects(node.labels, s) for s in group.selectors)

    def _place_pending(self) -> None:
        for group in self.groups:
            if group.node_id is None and not group.removed:
                total = group.demand
                for node in self._schedulable():
                    if all(_selects(node.labels, s) for s in group.selectors) and _fits(self._free(node), total):
                        group.node_id = node.node_id
                        break

    def _finished(self, value: Any, error: BaseException | None, at: float, actor: SimActor | None = None) -> SimRef:
        return SimRef(next(self._ids), at, value, error, actor)

    def _run_in(
        self, actor: SimActor, body: Callable[..., Any], method: str, args: tuple, kwargs: Mapping[str, Any]
    ) -> SimRef:
        """Run a call inside `actor` now; its result is ready after the call's virtual duration (in order behind
        the actor's earlier calls and after the results it was passed), or never where the schedule makes the
        method hang. A result passed as an argument is its value in the call, as on Ray; if it failed, so does the
        call, with its error."""
        self._spend()
        if actor.died_at is not None:
            return self._finished(None, WorkerDied(f"the actor {actor.name} is dead"), self._now)
        node = self.nodes_by_id[actor.node_id]
        passed = [v for v in (*args, *kwargs.values()) if isinstance(v, SimRef)]
        start = max(self._now, actor.busy_until, *(r.done_at() for r in passed))
        hangs = method and method == self.behaviour.hang_method
        at = float("inf") if hangs else start + self.behaviour.call_s * node.slow
        actor.busy_until = at
        value, error = None, None
        try:
            resolved = [self._value_of(a) for a in args]
            named = {k: self._value_of(v) for k, v in kwargs.items()}
            with self._inside(actor):
                value = body(*resolved, **named)
        except Exception as e:  # the user's method raised (or a result it was passed failed): as from Ray
            error = e
        return self._finished(value, error, at, actor)

    @staticmethod
    def _value_of(value: Any) -> Any:
        return value.outcome() if isinstance(value, SimRef) else value

    @contextmanager
    def _inside(self, actor: SimActor) -> Iterator[None]:
        """As in the actor's own process: what the placed class installs (its rank, its rendezvous variables)
        is the actor's, not this process's environment."""
        from rlplace.ray import worker

        original = worker.install
        worker.install = lambda payload: setattr(actor, "payload", payload)
        try:
            yield
        finally:
            worker.install = original


def _fits(free: Mapping[str, float], demand: Mapping[str, float]) -> bool:
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in demand.items() if v > 0)


def _selects(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
