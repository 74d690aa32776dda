"""One schedule's world: the moves a schedule makes on a `SimCluster` and the job on it, and the invariants checked
after every move (docs/ray.md, "The simulation"; `rlplace.sim.explore` draws the schedules and runs them).

The invariants are the promises of docs/guide.md and docs/runtime.md, each checked from what the simulated cluster
saw happen rather than from what the job believes:

- nothing waits past its bound (the move's, in virtual time), and nothing spins;
- every call returns its value, raises a documented error, or is in `RanksRemovedError`'s accounting; where the
  job promised an answer (nothing in trouble: no loss, drain, weather, hung or dead worker; or a loss with a hot
  spare ready to take it over) a documented error is a broken promise too;
- exactly once: each call that answered ran, and its answer came from, exactly one process of the worker that
  answered; no process runs a call twice; no call is sent to a worker the job asked to kill (a zombie on a node
  cut off runs what it was sent before, never what comes after);
- ranks are 0..n-1 in the state, each group and what each worker installed; sizes stay inside their `elastic`
  ranges; the rendezvous every worker installed is its component's: one MASTER_ADDR (rank 0's node) and
  MASTER_PORT for all, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE as the layout says, a fresh
  port at every change of size, and no port held twice on one address (by two components or two jobs);
- no node holds more than it has; the cluster holds no placement group the plan does not; the job record says
  what the state says (sizes, masters); `rlplace status` shows the lost and failed nodes as the state has them, and
  each worker under its rank now, in its actor's state, on the node serving its rank (`node 2 (spare IP)`);
- a lost node's workers go to the nearest hot spare that was ready (its NVLink domain, then rack, then zone);
- a drained node whose workers a spare could take over moves them before the deadline, also when other events
  overlap, as long as a spare remains for it and the GCS answers in time to tell the job (a restart that lasts
  until less than a watcher period before the deadline voids the promise: the watcher reads drains from the GCS);
- liveness: once the last fault is over and the windows have passed, every component answers, except where a
  rank failed and no node can take it over, or a worker is stuck for good (its constructor failed, a call hangs);
- after shutdown nothing of the job is left: no placement group, actor or KV key (another job's stay).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlplace.errors import NodeLostError, RanksRemovedError, RlplaceError
from rlplace.inventory import Inventory, Node
from rlplace.lifecycle import EventKind, NodeHealth, NodeMark, NodeStatus, WorkerState
from rlplace.model import JobSpec
from rlplace.plan import Plan
from rlplace.planner.capacity import bundle_resources
from rlplace.planner.topology import read_topology
from rlplace.ray import records, status
from rlplace.ray.failover.watcher import WATCH_PERIOD_S
from rlplace.ray.job import Job
from rlplace.ray.labels import ACCELERATOR_LABEL, NODE_RANK_LABEL, RAY_NODE_ID_LABEL, SPARE_LABEL
from rlplace.ray.local_group import LocalGroup
from rlplace.ray.local_raylets import node_args
from rlplace.ray.nodes import inventory_from_nodes
from rlplace.sim.memory_port import SimActor, SimCluster, SimNode, SimProcess, SimRef

#: The job's bounds in the simulation (virtual seconds): a call's own timeout, the replacement window.
CALL_TIMEOUT_S = 8.0
REPLACE_WITHIN_S = 3.0
JOB_TIMEOUT_S = 5.0
#: A move may take at most this long in virtual time: its own timeouts, the replacement window, the deaths.
MOVE_BOUND_S = CALL_TIMEOUT_S + REPLACE_WITHIN_S + 2 * JOB_TIMEOUT_S + 15.0
#: How long `settle` lets pass before it calls every component: past every window, deadline and delay.
SETTLE_S = 25.0
#: A drain Ray was given no deadline for: the node goes this long after (whoever drains it removes it).
UNANNOUNCED_DRAIN_S = 10.0
#: The Ray job id of the second job's driver.
OTHER_DRIVER = "02000000"

_serials = itertools.count(1)


class SimWorker:
    """The worker class of every component in the simulation: `step(token)` answers the token and who ran it (a
    serial per instance), so a lost, doubled or misrouted call shows."""

    def __init__(self, *_: Any, **__: Any):
        self.serial = next(_serials)
        self.steps = 0
        self.tokens: list[int] = []  # the tokens it ran (a driver-local worker's runs: no actor counts them)

    def step(self, token: int) -> tuple[int, int]:
        self.steps += 1
        self.tokens.append(token)
        return token, self.serial

    def on_replaced(self, event: Any) -> None:
        return None

    def on_resized(self, event: Any) -> None:
        return None


@dataclass(frozen=True)
class Move:
    """One step of a schedule; `args` are every choice it needs (so it replays)."""

    kind: str
    args: tuple = ()

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True)
class Case:
    """A config planned on a simulated inventory, ready for schedules (planned once, run many times); `shapes` are
    the nodes a schedule may add as spares or replacements (some matching no node of the inventory)."""

    name: str
    spec: JobSpec
    inventory: Inventory
    plan: Plan
    shapes: tuple[Node, ...] = ()


class Violation(Exception):
    """An invariant broke: the message says which and how."""


@dataclass
class _Drain:
    """A drain whose workers a spare could take over when it was noticed: the promise is to move them before
    the deadline, as long as a spare remains for it."""

    rank: int
    deadline: float  # wall clock
    events: int  # the job's events then (the move is looked for after)
    shape: Node


def simulated_job(case: Case, **options: Any) -> tuple[SimCluster, Job]:
    """A SimCluster with the case's nodes (ranked as `rlplace start` ranks them) and the case's Job on it, not
    started yet; `options` override the job's bounds (timeout_s, replace_within_s)."""
    sim = SimCluster()
    for node in case.inventory.nodes:
        sim.add_node(node_resources(node), node_labels(node, node.rank))
    bounds = {"timeout_s": JOB_TIMEOUT_S, "replace_within_s": REPLACE_WITHIN_S, **options}
    job = Job(case.plan, inventory_from_nodes(sim.nodes()), name="sim", spec=case.spec, cluster=sim, **bounds)
    return sim, job


def node_resources(node: Node) -> dict[str, float]:
    return {"CPU": float(node.num_cpus or 16), "GPU": float(node.num_gpus), **dict(node.resources)}


def node_labels(node: Node, rank: int | None) -> dict[str, str]:
    """The labels `rlplace start` gives a node shaped like `node` (its rank label left out: it gets `rank`, or
    the spare label for None), with the topology labels it was declared with, Ray's own (`ray.io/...`) among them."""
    own = (NODE_RANK_LABEL, SPARE_LABEL, ACCELERATOR_LABEL, RAY_NODE_ID_LABEL)
    topology = {k: v for k, v in node.labels.items() if k not in own}
    shape = dataclasses.replace(node, rank=-1 if rank is None else rank, labels={})
    return {**topology, **node_args(shape)["labels"]}


class World:
    """A schedule's cluster and job: `do(move)` makes a move, `broken()` says the first invariant it broke."""

    def __init__(self, sim: SimCluster, job: Job, case: Case, rng_seed: int = 0):
        self.sim, self.job, self.case = sim, job, case
        self.drains: list[_Drain] = []
        self.other: Job | None = None  # the second job on the cluster
        self._rng = random.Random(rng_seed)
        #: component -> its master (address, port) now; a resize must change it (read after every change).
        self._masters: dict[str, tuple[str, int]] = {}
        self._resizes_seen = 0
        self._moved: set[str] = set()  # components whose master changed since their last resize
        self._stale_port = ""  # a resize kept its component's master: said at the next check
        job.state.subscribe(self._on_change)
        #: Before the move: rank -> (its node, the ready spares and how far each is from it): the nearest check.
        self._before: dict[int, tuple[Node, dict[str, int]]] = {}
        self._events_seen = 0
        self._sent_seen = 0  # calls of `sim.sent` the zombie check has read
        self._indexed = 0  # ... and those `_runs_of` has
        self._runs: dict[int, list[SimRef]] = {}  # token -> the runs of `step(token)`
        self.token = 0
        self.promised = ""  # why the move promised an answer ("" none): a documented error breaks it then
        self._stop_at: float | None = None  # when the user's other thread shuts the job down (`_stop_during`)

    # -- moves ---------------------------------------------------------------------------------------------

    def do(self, move: Move, index: int) -> None:
        """Make `move` (the `index`-th of the schedule: calls use it as their token)."""
        with self.sim.observing():
            self._before = {} if self._weather() else self._nearest_ready()  # weather: a spare may fail to start
        self.promised = ""
        self.token = index + 1
        getattr(self, f"_{move.kind}")(*move.args)

    def _launch(self, component: str, max_restarts: int = 0) -> None:
        self.job.launch(component, SimWorker, max_restarts=max_restarts)

    def _group(self, component: str) -> Any:
        group = self.job.groups.get(component)
        if group is None:
            raise RlplaceError(f"{component} is not launched")
        return group

    def _call(self, component: str, *, promise: bool = True) -> None:
        group = self._group(component)
        if promise and self._calm(component):
            self.promised = f"{component} is calm (no trouble, weather, hang or dead worker)"
        members = [w.name for w in group.workers]
        self._answered(component, members, lambda: group.call("step", self.token, timeout_s=CALL_TIMEOUT_S))

    def _call_rank(self, component: str, rank: int) -> None:
        group = self._group(component)
        r = rank % len(group)  # a launched group has a worker at least: every elastic min is 1 or more
        if self._calm(component):
            self.promised = f"{component} is calm (no trouble, weather, hang or dead worker)"
        name = group.workers[r].name
        self._answered(component, [name], lambda: [group.call("step", self.token, rank=r, timeout_s=CALL_TIMEOUT_S)])

    def _call_sharded(self, component: str, extra: int = 0) -> None:
        """`group.call_sharded`: rank i gets shard i of each argument (here the token), so each answer is checked
        as a call's; `extra` shards more than the workers: a ValueError naming both counts, and nothing sent."""
        group = self._group(component)
        members = [w.name for w in group.workers]
        shards = [self.token] * (len(members) + extra)
        if extra:
            return self._refused_shards(group, members, shards)
        if self._calm(component):
            self.promised = f"{component} is calm (no trouble, weather, hang or dead worker)"
        self._answered(component, members, lambda: group.call_sharded("step", shards, timeout_s=CALL_TIMEOUT_S))

    def _refused_shards(self, group: Any, members: list[str], shards: list[int]) -> None:
        sent = len(self.sim.sent)
        try:
            group.call_sharded("step", shards, timeout_s=CALL_TIMEOUT_S)
        except ValueError as e:
            if f"{len(shards)} shards for {len(members)}" in str(e) and len(self.sim.sent) == sent:
                return
            raise Violation(f"call_sharded refuses shards that do not match: {first(e)}") from e
        raise Violation(f"call_sharded refuses shards that do not match: {len(shards)} for {members} ran")

    def _call_across_loss(self, component: str, node_rank: int, how: str = "kill") -> None:
        group = self._group(component)
        members = [w.name for w in group.workers]
        calm = self._calm(component)
        refs = group.call_async("step", self.token)
        node_id = self._serving(node_rank)
        pinned = all(w.node_rank is not None for w in group.workers)  # Ray-placed workers are not moved (guide)
        if calm and pinned and self._spare_for(node_rank, node_id):
            self.promised = f"node {node_rank} was lost with a hot spare ready for it: its calls are re-run there"
        self._lose(node_rank, how)
        self._answered(component, members, lambda: group.get(refs, "step", CALL_TIMEOUT_S))

    def _answered(self, component: str, members: list[str], calls: Callable[[], list]) -> None:
        """Make the calls (sent to `members`, in rank order); each answer must be the token, from the worker it
        went to, which ran it to an answer exactly once."""
        try:
            got = calls()
        except RanksRemovedError as e:
            removed = set(e.removed)
            kept = [m for m in members if m not in removed]
            if not removed <= set(members) or len(e.results) != len(kept):
                raise Violation(
                    f"nothing silently lost: RanksRemovedError of {sorted(removed)} from {members}, results {e.results}"
                ) from e
            self._exactly_once(component, kept, e.results)
            raise
        if len(got) != len(members):
            raise Violation(f"nothing silently lost: {component} answered {got!r} to step({self.token}) on {members}")
        self._exactly_once(component, members, got)

    def _exactly_once(self, component: str, members: list[str], got: list) -> None:
        if self.job.groups[component].in_driver:
            return self._exactly_once_in_driver(component, members, got)
        token = self.token
        runs = self._runs_of(token)
        by_serial = {r.process.instance.serial: r for r in runs if r.process is not None and r.process.instance}
        names = []
        for value in got:
            if not (isinstance(value, tuple) and len(value) == 2 and value[0] == token and value[1] in by_serial):
                raise Violation(f"nothing silently lost: {component} answered {value!r} to step({token})")
            actor = by_serial[value[1]].actor
            names.append(actor.name if actor is not None else "?")
        if names != members:
            raise Violation(f"each call answered by its worker: step({token}) sent to {members}, answered by {names}")
        by_name: dict[str, list[SimRef]] = {}
        for r in runs:  # each a call's: an actor's (a driver-local worker's runs are `_exactly_once_in_driver`'s)
            by_name.setdefault(r.actor.name if r.actor is not None else "?", []).append(r)
        for name, refs in by_name.items():
            serials = [r.process.serial for r in refs if r.process is not None]
            if len(set(serials)) != len(serials):
                raise Violation(f"exactly once: step({token}) ran twice in one process of {name}")
        for name in names:
            delivered = [r for r in by_name.get(name, []) if _delivered(r)]
            if len(delivered) != 1:
                processes = [r.process.serial for r in delivered if r.process is not None]
                raise Violation(
                    f"exactly once: step({token}) on {name} answered, but ran to an answer {len(delivered)} times "
                    f"(in processes {processes})"
                )

    def _exactly_once_in_driver(self, component: str, members: list[str], got: list) -> None:
        """A driver-local component's calls ran in the driver: each answer is the token, from the object of the
        worker it went to, which ran it once."""
        token, group = self.token, self.job.groups[component]
        assert isinstance(group, LocalGroup)
        instances = dict(zip([w.name for w in group.workers], group.instances, strict=True))
        for name, value in zip(members, got, strict=True):
            ran = instances.get(name)
            if not isinstance(ran, SimWorker) or value != (token, ran.serial):
                raise Violation(f"each call answered by its worker: step({token}) on {name} in the driver: {value!r}")
            if ran.tokens.count(token) != 1:
                raise Violation(f"exactly once: step({token}) ran {ran.tokens.count(token)} times on {name} (driver)")

    def _runs_of(self, token: int) -> list[SimRef]:
        """The runs of `step(token)` so far (read from `sim.ran` once each)."""
        ran = self.sim.ran
        for ref in ran[self._indexed :]:
            if ref.method == "step" and ref.args:
                self._runs.setdefault(ref.args[0], []).append(ref)
        self._indexed = len(ran)
        return self._runs.get(token, [])

    def _serving(self, node_rank: int) -> str:
        """The node serving `node_rank` now (schedules draw ranks of the case's inventory: the live one only grows)."""
        return str(self.job.state.live.node(node_rank).node_id)

    def _lose(self, node_rank: int, how: str = "kill") -> None:
        (self.sim.vanish_node if how == "vanish" else self.sim.kill_node)(self._serving(node_rank))

    def _partition(self, node_rank: int, seconds: float | None) -> None:
        self.sim.partition(self._serving(node_rank), seconds)

    def _drain(self, node_rank: int, deadline_s: float | None, fate: str = "dies") -> None:
        """Node `node_rank` drains by `deadline_s` (None: Ray is given no deadline, and the node goes
        `UNANNOUNCED_DRAIN_S` later: no promise then, the job cannot know when)."""
        node_id = self._serving(node_rank)
        node = self.sim.nodes_by_id[node_id]
        ready = node.running and node.reachable and not node.reported_dead and node.drain_deadline_ms is None
        held = node_rank in self.job.state.pinned_ranks()  # the job has workers or bundles there
        spare = held and ready and not self._disturbed() and self._spare_for(node_rank, node_id)
        after = {"dies": 0.0, "outlives": 3.0, "cancelled": None}[fate]
        announced = deadline_s is not None
        goes_s = UNANNOUNCED_DRAIN_S if deadline_s is None else deadline_s
        if self.sim.drain_node(node_id, goes_s, dies_after_s=after, announced=announced) and spare and announced:
            shape = self.job.state.live.node(node_rank)
            self.drains.append(_Drain(node_rank, self.sim.wall() + goes_s, len(self.job.events), shape))

    def _slow(self, node_rank: int) -> None:
        self.sim.nodes_by_id[self._serving(node_rank)].slow = 20.0

    def _join(self, like_rank: int) -> None:
        """A replacement: a node with the rank label of `like_rank` and its shape."""
        node = self.case.inventory.node(like_rank)
        self.sim.add_node(node_resources(node), node_labels(node, like_rank))

    def _grow(self, like_rank: int) -> None:
        """New capacity: a node shaped like `like_rank` with the next rank no node had."""
        node = self.case.inventory.node(like_rank)
        ranks = [int(n.labels[NODE_RANK_LABEL]) for n in self.sim.nodes_by_id.values() if NODE_RANK_LABEL in n.labels]
        self.sim.add_node(node_resources(node), node_labels(node, max(ranks, default=-1) + 1))

    def _spare(self, shape: int, beside: int = 0) -> None:
        """A hot spare of one of the case's shapes (some match no node), in the NVLink domain, rack and zone of
        node `beside`."""
        shapes = self.case.shapes or self.case.inventory.nodes
        near = self.case.inventory.node(beside % len(self.case.inventory))
        node = dataclasses.replace(shapes[shape % len(shapes)], labels=dict(near.labels))
        self.sim.add_node(node_resources(node), node_labels(node, None))

    def _resize(self, component: str, n: int) -> None:
        if self.job.state.spec is not None and self.job.state.spec.elastic_range(component) is not None:
            if self._hung(component):
                self.drains = []  # a resize waiting on hung calls holds the job's changes: the drain waits
            self.job.resize(component, n)

    def _hang(self, component: str) -> None:
        """The next calls of `step` hang until their worker's node dies: the call's own timeout must end them."""
        self.sim.behaviour.hang_method = "step"
        serving = {str(n.node_id) for n in self.job.state.live.nodes}
        by_id = self.sim.nodes_by_id
        draining = [i for i in serving if i in by_id and by_id[i].drain_deadline_ms is not None]  # 0: no deadline
        if self.drains and len(draining) > 1:
            # The simulation's limit, not the job's: two drains' waits for hung calls run nested on its one thread
            # (the later one's inside the earlier's) where Ray's watcher threads wait side by side, so an earlier
            # move can be held past its deadline here only: those drains promise nothing (run 5 seed 5003407).
            self.drains = []
        try:
            self._call(component, promise=False)
        finally:
            self.sim.behaviour.hang_method = None

    def _stop_during(self, seconds: float) -> None:
        """The user's other thread (a signal handler, say) shuts the job down `seconds` from now, in whatever the
        job is doing then: a takeover, a resize, a launch, a call waiting for a lost node (in the simulation the
        shutdown runs whole inside that wait). What was in progress ends in a documented error; nothing of the job
        is left after it (the check after shutdown); the moves after it meet a job that is shut down."""
        if self._stop_at is None:
            self._stop_at = self.sim.now() + seconds
            self.sim._fault(self._stop_at, self.job.shutdown)

    def _wait(self, seconds: float) -> None:
        self.sim.advance(seconds)

    def _gcs_restart(self, seconds: float) -> None:
        """The GCS does not answer for `seconds`. The job learns of a drain only from the GCS (its watcher reads the
        draining nodes there each period): a drain whose deadline comes before the GCS answers again and the watcher
        looks (one period) cannot be acted on in time, and loses its promise (`_drained`)."""
        self.sim.gcs_restart(seconds)
        back = self.sim.wall() + (self.sim.weather.gcs_down_until - self.sim.now()) + WATCH_PERIOD_S
        self.drains = [d for d in self.drains if d.deadline > back]
        self.sim.advance(0.1)

    def _slow_gcs(self, seed: int, delay_p: float, seconds: float) -> None:
        """For `seconds`, requests to the GCS are delayed (up to 0.2 s) at the drawn rate."""
        w = self.sim.weather
        w.rng = random.Random(seed)
        w.delay_p, w.delay_s, w.until = delay_p, 0.2, self.sim.now() + seconds

    def _slow_starts(self, seconds: float) -> None:
        self.sim.weather.start_s = seconds

    def _bad_start(self, count: int) -> None:
        self.sim.weather.bad_starts = count

    def _kill_lag(self, seconds: float) -> None:
        self.sim.weather.kill_s = seconds

    def _restart_worker(self, component: str, rank: int) -> None:
        """The user kills a worker for Ray to restart it in place (`group.kill(rank, restart=True)`)."""
        group = self._group(component)
        group.kill(rank % len(group), restart=True)

    def _other_job(self, action: str) -> None:
        """A second job on the cluster (its own driver): it starts on a GPU of the cluster's, stops, or its driver
        exits without a shutdown."""
        if action == "start" and self.other is None:
            self.other = other_job(self.sim, self.case, self._rng)
        elif action == "stop" and self.other is not None:
            self.other.shutdown()
            self.other = None
        elif action == "crash" and self.other is not None:
            self.sim.end_driver(OTHER_DRIVER)
            self.other.state.close()
            self.other = None

    def _check_nodes(self) -> None:
        """The user's code saw a call fail and asks whether a node of the job is lost (`job.check_nodes()`): every
        node serving a rank whose raylet refused connections (its processes died) when it asked is then declared
        lost, and the answer says so, unless another node took the rank over meanwhile or its components shrank off
        it (the answer is about the job when it returns: run 1 seeds 1001942 and 1005282 took a replacement and a
        spare while it probed; seed 966328899678 shrank an elastic component off the lost node at once)."""
        state = self.job.state
        serving = {r: str(state.live.node(r).node_id) for r in state.pinned_ranks()}
        refusing = [r for r, node_id in serving.items() if self.sim.nodes_by_id[node_id].refuses]
        lost = self.job.check_nodes()  # a node dying meanwhile may be probed before it does
        pinned = set(state.pinned_ranks())  # an elastic component may have shrunk off the rank meanwhile
        still = [r for r in refusing if r in pinned and str(state.live.node(r).node_id) == serving[r]]
        if not state.closed and [r for r in still if state.health(r) == NodeHealth.OK]:
            raise Violation(
                f"a refused raylet declares its node lost: nodes {refusing} refuse, state {state.troubles()}"
            )
        # a rank taken over while it asked is no longer lost: "no" is then the truth (and of a job shut down)
        if still and not lost and not state.closed:
            raise Violation(f"check_nodes says whether a node is lost: it said no, nodes {still} refuse")

    def _wait_for_takeovers(self) -> None:
        """The user waits for the lost ranks to be taken over (`job.wait_for_takeovers()`): once it returns (no
        NodeLostError), no rank lost before it began is still lost."""
        began = self.sim.now()
        self.job.wait_for_takeovers()
        # `declared` of a drain's trouble comes from the wall clock of its notice: a trouble that began during the
        # wait may read a hair earlier than `began` (run 4 seed 4002039: 1.70999995 against 1.71)
        before = began - 1e-3
        left = [r for r, t in self.job.state.troubles().items() if t.kind == NodeHealth.LOST and t.declared < before]
        if left and not self.job.state.closed:
            raise Violation(f"wait_for_takeovers returns once every lost rank is served: ranks {left} still lost")

    def _settle(self) -> None:
        """The last fault is over: the weather clears, every window and deadline passes, then every component is
        called; each must answer, except where a rank failed with no node to take it over or a worker is stuck
        for good (liveness)."""
        w = self.sim.weather
        w.until, w.bad_starts = self.sim.now(), 0
        w.start_s, w.kill_s = min(w.start_s, 2.0), min(w.kill_s, 1.0)  # later starts and kills within the bounds
        deadline = self.sim.now() + SETTLE_S
        while self.sim.now() < deadline and (self.sim.faults_pending() or self._moving()):
            self.sim.advance(0.5)
        self.sim.advance(1.0)  # the watcher looks twice more (a rank failed may be taken over yet)
        if self.job.state.closed:
            return  # shut down by `_stop_during`: nothing answers, and nothing of the job may be left (`_left_over`)
        for component, group in list(self.job.groups.items()):
            excuse = self._excuse(component)
            members = [w.name for w in group.workers]
            try:
                self._answered(
                    component, members, functools.partial(group.call, "step", self.token, timeout_s=CALL_TIMEOUT_S)
                )
            except RlplaceError as e:
                if excuse is None:
                    raise Violation(f"liveness: after the last fault {component} still fails: {first(e)}") from e
                if isinstance(e, NodeLostError) != (excuse[0] == "failed"):
                    raise Violation(f"liveness: {component} raised {type(e).__name__}, but {excuse[1]}") from e

    def _moving(self) -> bool:
        """A rank of a job on the cluster is draining or lost (its window not passed yet), or its node is down and
        the job has not noticed yet; or a worker is starting or restarting."""
        for group in self.job.groups.values():
            starting = (WorkerState.PENDING_CREATION, WorkerState.RESTARTING)
            if any(isinstance(a, SimActor) and a.state in starting for a in group.held().values()):
                return True
        for job in [self.job] + ([self.other] if self.other is not None else []):
            state = job.state
            for rank in state.pinned_ranks():
                health = state.health(rank)
                node = self.sim.nodes_by_id[str(state.live.node(rank).node_id)]
                if health in (NodeHealth.DRAINING, NodeHealth.LOST) or (health == NodeHealth.OK and not _up(node)):
                    return True
        return False

    def _shutdown(self) -> None:
        if self.other is not None:
            self._other_job("stop")
        with self.job:  # the job's context manager shuts it down
            pass

    # -- what the promises depend on ------------------------------------------------------------------------

    def _weather(self) -> bool:
        """The cluster's own trouble: the GCS restarting or slow, actors failing to start, or starting or dying too
        slowly for the job's bounds (a relaunch waits for the old actor's name to be free, then for it to start)."""
        w, now = self.sim.weather, self.sim.now()
        slow_actors = w.start_s >= self.job.timeout_s or w.kill_s >= self.job.replace_within_s
        return now < w.gcs_down_until or w.slow(now) or w.bad_starts > 0 or slow_actors

    def _disturbed(self) -> bool:
        """Anything in trouble on the cluster the job's changes would wait on, or weather, or a shutdown coming."""
        if self._weather() or self.job.state.troubles() or self._stop_at is not None:
            return True
        serving = [self.sim.nodes_by_id[str(n.node_id)] for n in self.job.state.live.nodes]
        return any(not _up(n) or n.drain_deadline_ms is not None for n in serving)

    def _hung(self, component: str) -> bool:
        group = self.job.groups.get(component)
        return group is not None and any(_stuck(a) for a in group.held().values() if isinstance(a, SimActor))

    def _calm(self, component: str) -> bool:
        """Calls on `component` must answer: no weather, no trouble, every worker's actor alive (or starting
        well) on a node that is up and not draining, none hung."""
        if self._disturbed():
            return False
        for actor in self.job.groups[component].held().values():  # launched: the moves asked `_group` first
            if not isinstance(actor, SimActor):
                continue
            p = actor.process
            if actor.state not in (WorkerState.ALIVE, WorkerState.PENDING_CREATION) or p is None:
                return False
            if actor.kills or actor.kill_asked_at is not None or p.ended_at is not None or p.error or _stuck(actor):
                return False
            if p.doomed:
                return False  # its constructor will fail
            node = self.sim.nodes_by_id[p.node_id]
            if not _up(node) or node.drain_deadline_ms is not None:
                return False  # placed by Ray on a node in trouble the job does not watch
        return True

    def _spare_for(self, node_rank: int, node_id: str) -> bool:
        """A hot spare that could take node `node_rank` over now, with nothing else in trouble wanting it."""
        return bool(self._ready_spares(node_rank)) and not self._disturbed()

    def _ready_spares(
        self, node_rank: int, idle: list[SimNode] | None = None, demand: dict[str, float] | None = None
    ) -> list[SimNode]:
        """The hot spares that could take node rank `node_rank` over now (the explorer's own reading of the rules of
        docs/runtime.md: same GPUs, model, enough CPUs and what the rank reserved free; no robot on the rank).
        `idle` and `demand` (`_idle_spares`, `_demands`): already read for every rank at once."""
        lost = self.job.state.live.node(node_rank)
        if demand is None:
            demand = self._demands().get(node_rank, {})
        if any(k not in ("CPU", "GPU", lost.accelerator_resource) for k in demand):
            return []  # a robot cannot move
        out = []
        for n in self._idle_spares() if idle is None else idle:
            if n.resources.get("GPU", 0) != lost.num_gpus or (
                lost.num_gpus and n.labels.get(ACCELERATOR_LABEL) != lost.gpu_model
            ):
                continue
            free = self.sim._free(n)
            if all(free.get(k, 0.0) + 1e-9 >= v for k, v in demand.items()):
                out.append(n)
        return out

    def _idle_spares(self) -> list[SimNode]:
        """The hot spares up, not draining and serving no rank of the job."""
        serving = {str(n.node_id) for n in self.job.state.live.nodes}
        return [
            n
            for n in self.sim.labelled(SPARE_LABEL, "true")
            if n.node_id not in serving and _up(n) and n.drain_deadline_ms is None
        ]

    def _demands(self) -> dict[int, dict[str, float]]:
        """What the plan's bundles reserve on each node rank, summed; and what the workers pinned to a node
        without a bundle ask for there (strategy `default`'s buffer shards, pinned by node affinity: a spare whose
        CPUs Ray filled with the workers it places cannot start them; run 2 seed 2007111)."""
        state = self.job.state
        out: dict[int, dict[str, float]] = {}
        for b in state.plan.bundles:
            demand = out.setdefault(b.node_rank, {})
            for k, v in bundle_resources(b, state.live.node(b.node_rank).accelerator_resource).items():
                demand[k] = demand.get(k, 0.0) + v
        for w in state.plan.workers:
            if w.node_rank is not None and w.bundle is None and not w.in_driver:
                demand = out.setdefault(w.node_rank, {})
                gpu = state.live.node(w.node_rank).accelerator_resource
                for k, v in (("CPU", w.num_cpus), (gpu, w.num_gpus)):
                    if v:
                        demand[k] = demand.get(k, 0.0) + v
        return out

    def _nearest_ready(self) -> dict[int, tuple[Node, dict[str, int]]]:
        """Before a move: for each rank, its node and how far each ready spare is from it (the nearest check)."""
        state = self.job.state
        idle = self._idle_spares()
        if state.closed or not idle:
            return {}
        demands = self._demands()
        out = {}
        for rank in state.pinned_ranks():
            spares = self._ready_spares(rank, idle, demands.get(rank, {}))
            if spares:
                lost = state.live.node(rank)
                out[rank] = (lost, dict(zip([s.node_id for s in spares], _distances(lost, spares, state), strict=True)))
        return out

    def _excuse(self, component: str) -> tuple[str, str] | None:
        """Why `component` may fail after the last fault: ("stuck", why) for a worker stuck for good, ("failed",
        why) for a failed rank no node can take over; None: it must answer. A failed rank a node could take over is a
        broken promise (Violation)."""
        state = self.job.state
        group = self.job.groups[component]
        for w in group.workers:
            if w.node_rank is not None and state.health(w.node_rank) == NodeHealth.FAILED:
                if self._ready_spares(w.node_rank) or self._replacement(w.node_rank):
                    raise Violation(f"liveness: node {w.node_rank} stays failed though a node could take it over")
                return "failed", f"node {w.node_rank} failed with no node to take it over"
        held = group.held()
        for w in group.workers:
            actor = held.get(w.name)
            if (
                state.health(w.node_rank) == NodeHealth.OK
                and isinstance(actor, SimActor)
                and (_stuck(actor) or actor.state == WorkerState.DEAD or (actor.process and actor.process.error))
            ):
                return (
                    "stuck",
                    f"worker {w.name} is stuck for good (its constructor failed, it was killed, a call hangs)",
                )
            if isinstance(actor, SimActor) and self.sim.waiting(actor):
                return "stuck", f"worker {w.name} waits for resources no node has free (Ray places it, or others)"
        return None

    def _replacement(self, node_rank: int) -> bool:
        """A node started again with the rank's label is up, serves no rank of the job and has what the rank
        reserved free: a takeover reserves the rank's bundles there (docs/runtime.md, "Node loss"), which it cannot
        while another job's workers hold part of them (they were placed there by the same rank label)."""
        serving = {str(n.node_id) for n in self.job.state.live.nodes}
        demand = self._demands().get(node_rank, {})
        for n in self.sim.nodes_by_id.values():
            if n.labels.get(NODE_RANK_LABEL) == str(node_rank) and n.node_id not in serving and _up(n):
                free = self.sim._free(n)
                if all(free.get(k, 0.0) + 1e-9 >= v for k, v in demand.items()):
                    return True
        return False

    def _on_change(self, state: Any) -> None:
        """After every change of the state: a component that changed size has a master other than the one it had
        before (the last rendezvous' store may still be open: docs/runtime.md): its master changed since its last
        resize (or launch)."""
        masters = {c: (m.address, m.port) for c, m in state.masters().items()}
        for c, m in masters.items():
            if self._masters.get(c) != m:
                self._moved.add(c)
        self._masters = masters
        resizes = state.resizes
        for c in sorted({r.component for r in resizes[self._resizes_seen :]}):  # a step's events, each once
            if c in masters and c not in self._moved and not self._stale_port:
                self._stale_port = f"a fresh port at every size: {c} kept {masters[c][0]}:{masters[c][1]} in a resize"
            self._moved.discard(c)
        self._resizes_seen = len(resizes)

    # -- invariants ------------------------------------------------------------------------------------------

    def broken(self) -> str | None:
        with self.sim.observing():
            return self._broken()

    def _broken(self) -> str | None:
        if self.job.state.closed:
            return self._left_over()
        checks = (
            self._ranks,
            self._capacity,
            self._record,
            self._status,
            self._groups,
            self._rendezvous,
            self._zombies,
            self._nearest,
            self._drained,
        )
        return next((problem for problem in (check() for check in checks) if problem), None)  # the first, in order

    def _ranks(self) -> str | None:
        state = self.job.state
        serving = collections.Counter(str(n.node_id) for r, n in enumerate(state.live.nodes) if r not in state.down)
        twice = sorted({n[:8] for n, count in serving.items() if count > 1})
        if twice:
            return f"one node serves one rank: {', '.join(twice)} serves several ranks of the job"
        for name, group in self.job.groups.items():
            workers = state.workers(name)
            if [w.rank for w in workers] != list(range(len(workers))):
                return f"ranks 0..n-1: {name} has ranks {[w.rank for w in workers]}"
            if tuple(group.workers) != tuple(workers):
                held, named = len(group.workers), len(workers)
                return f"one owner per fact: {name}'s group holds actors for {held} of the state's {named} workers"
            limits = state.spec.elastic_range(name) if state.spec is not None else None
            if limits is not None and not (limits.min <= len(workers) <= (limits.max or len(workers))):
                return f"sizes inside elastic: {name} has {len(workers)} workers, range {limits.min}..{limits.max}"
            for i, actor in enumerate(group.actors):
                p = _settled(actor, self.sim)
                placement = (p.payload or {}).get("placement") if p is not None else None
                if placement is not None and (placement["rank"], placement["world_size"]) != (i, len(workers)):
                    return (
                        f"ranks 0..n-1: {name} rank {i} of {len(workers)} believes it is rank {placement['rank']} of "
                        f"{placement['world_size']} (it was not told its new rank)"
                    )
        return None

    def _rendezvous(self) -> str | None:
        """Every settled worker's variables are its component's rendezvous; a fresh port at every size; no port
        on one address twice."""
        if self._stale_port:
            return self._stale_port
        state = self.job.state
        held: dict[tuple[str, int], str] = {}
        jobs = [(self.job, "this job's ")] + ([(self.other, "the other job's ")] if self.other is not None else [])
        for job, whose in jobs:
            for c, m in job.state.masters().items():
                clash = held.get((m.address, m.port))
                if clash is not None:
                    return f"no port twice: {whose}{c} and {clash} both listen on {m.address}:{m.port}"
                held[(m.address, m.port)] = f"{whose}{c}"
        for c, group in self.job.groups.items():
            if group.in_driver:
                continue
            workers = state.workers(c)
            if any(w.node_rank is None for w in workers):
                continue
            master = state.master(c)
            if master is None:
                return f"a pinned component has a master once launched: {c} has none"
            rank0 = state.node(workers[0].node_rank)
            assert rank0 is not None
            if master.address != rank0.address:
                return f"MASTER_ADDR is rank 0's node: {c}'s master is {master.address}, rank 0 is on {rank0.address}"
            nodes = sorted({w.node_rank for w in workers if w.node_rank is not None})
            group_rank = {n: i for i, n in enumerate(nodes)}
            on_node: dict[int | None, list[int]] = {}
            for w in workers:
                on_node.setdefault(w.node_rank, []).append(w.rank)
            for w, actor in zip(workers, group.actors, strict=False):
                p = _settled(actor, self.sim)
                env = (p.payload or {}).get("env") if p is not None else None
                if env is None:
                    continue
                here = on_node[w.node_rank]
                assert w.node_rank is not None
                expected = {
                    "RANK": str(w.rank),
                    "WORLD_SIZE": str(len(workers)),
                    "LOCAL_RANK": str(here.index(w.rank)),
                    "LOCAL_WORLD_SIZE": str(len(here)),
                    "NODE_RANK": str(w.node_rank),
                    "GROUP_RANK": str(group_rank[w.node_rank]),
                    "GROUP_WORLD_SIZE": str(len(nodes)),
                    "MASTER_ADDR": master.address,
                    "MASTER_PORT": str(master.port),
                }
                wrong = {k: (env.get(k), v) for k, v in expected.items() if env.get(k) != v}
                if wrong:
                    shown = ", ".join(f"{k}={got} (should be {want})" for k, (got, want) in sorted(wrong.items()))
                    return f"the rendezvous of {c}: {w.name} has {shown}"
        return self._exchanged()

    def _exchanged(self) -> str | None:
        """The components Ray placed agreed on their rendezvous among themselves (`rlplace.ray.exchange`): every
        settled worker of one has its rank and size now, and one MASTER_ADDR (rank 0's node, where it runs) and
        MASTER_PORT; once all are settled, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK and
        GROUP_WORLD_SIZE are those of the nodes they run on."""
        state = self.job.state
        for c, group in self.job.groups.items():
            workers = state.workers(c)
            if group.in_driver or not workers or any(w.node_rank is not None for w in workers):
                continue
            settled = [_settled(a, self.sim) for a in group.actors]
            envs = [(p.payload or {}).get("env") if p is not None else None for p in settled]
            known = [(w, p, env) for w, p, env in zip(workers, settled, envs, strict=True) if p and env]
            masters = {(env.get("MASTER_ADDR"), env.get("MASTER_PORT")) for _, _, env in known}
            for w, _, env in known:
                if (env.get("RANK"), env.get("WORLD_SIZE")) != (str(w.rank), str(len(workers))):
                    return (
                        f"the rendezvous of {c}: {w.name} (rank {w.rank} of {len(workers)}) has RANK "
                        f"{env.get('RANK')}, WORLD_SIZE {env.get('WORLD_SIZE')}"
                    )
            # A worker Ray restarted (elsewhere, say) meets the others again on its own: theirs still say where it
            # ran, and its rank 0's master where rank 0 ran (the job does not watch where Ray put them: guide).
            restarted = [isinstance(a, SimActor) and len(a.processes) > 1 for a in group.actors]
            if len(masters) > 1 and not restarted[0]:
                return f"one rendezvous per component: {c}'s workers Ray placed meet at {sorted(masters)}"
            if len(known) < len(workers) or any(restarted):
                continue
            nodes = [self.sim.nodes_by_id[p.node_id] for _, p, _ in known]
            address = next(iter(masters))[0]
            if address != nodes[0].address:
                return f"MASTER_ADDR is rank 0's node: {c}'s master is {address}, rank 0 runs on {nodes[0].address}"
            labelled = all(NODE_RANK_LABEL in n.labels for n in nodes)  # else NODE_RANK is the record's, then
            ranked = [i for _, i in sorted({(int(n.labels.get(NODE_RANK_LABEL, -1)), n.node_id) for n in nodes})]
            for (w, _, env), n in zip(known, nodes, strict=True):
                here = [v.rank for v, m in zip(workers, nodes, strict=True) if m is n]
                expected = {
                    "LOCAL_RANK": str(here.index(w.rank)),
                    "LOCAL_WORLD_SIZE": str(len(here)),
                    "GROUP_WORLD_SIZE": str(len(ranked)),
                }
                if labelled:
                    expected |= {"NODE_RANK": n.labels[NODE_RANK_LABEL], "GROUP_RANK": str(ranked.index(n.node_id))}
                wrong = {k: (env.get(k), v) for k, v in expected.items() if env.get(k) != v}
                if wrong:
                    shown = ", ".join(f"{k}={got} (should be {want})" for k, (got, want) in sorted(wrong.items()))
                    return f"the rendezvous of {c} (placed by Ray): {w.name} has {shown}"
        return None

    def _capacity(self) -> str | None:
        for node_id, free in self.sim.free_resources().items():
            over = {k: v for k, v in free.items() if v < -1e-6}
            if over:
                return f"no GPU given twice: node {node_id[:8]} is over its resources by {over}"
        return None

    def _record(self) -> str | None:
        state = self.job.state
        record = records.read(self.sim, state.namespace, state.name)
        if record is None:
            return "the record says what the state says: the job has no record"
        sizes = {c: len(state.workers(c)) for c in state.plan.components}
        written = {c: r.world_size for c, r in record.components.items()}
        if written != sizes:
            return f"the record says what the state says: record sizes {written}, state {sizes}"
        masters = {c: (m.address, m.port) for c, m in state.masters().items()}
        ports = {c: (r.master_addr, r.master_port) for c, r in record.components.items() if r.master_port}
        if ports != masters:
            return f"the record says what the state says: record masters {ports}, state {masters}"
        return self._job_says()

    def _job_says(self) -> str | None:
        """What the Job answers its user says what the state says: its record is under its name and namespace;
        each worker's plan row and node; each component's master (none where Ray places it or it runs in the
        driver); each lost or failed rank so in `node_health()`; each elastic component's last resize its size
        now; every placement group it holds on the cluster; its warnings, text."""
        job, state = self.job, self.job.state
        if records.read(self.sim, job.namespace, job.name) is None:
            return f"the job's record is under its name: none for {job.namespace}/{job.name}"
        for c in job.groups:
            workers = state.workers(c)
            for w in workers:
                if job.worker(c, w.rank) != w or job.node(w.node_rank) != state.node(w.node_rank):
                    return f"the job says what the state says: its row or node of {w.name} is not the state's"
            pinned = bool(workers) and all(w.node_rank is not None for w in workers)
            rank0 = state.node(workers[0].node_rank) if pinned else None
            known = state.master(c)
            if not pinned and job.master(c) is not None:
                return f"no master where Ray places a component or it runs in the driver: {c} has {job.master(c)}"
            if known is not None and rank0 is not None and known.node_id == rank0.node_id and job.master(c) != known:
                return f"the job says what the state says: {c}'s master {job.master(c)}, state {known}"
        marks = job.node_health()
        latest = {e.node_rank: e.kind for e in job.events}
        for rank, t in state.troubles().items():
            want = {NodeHealth.LOST: NodeMark.LOST, NodeHealth.FAILED: NodeMark.FAILED}.get(t.kind)
            if latest.get(rank) == EventKind.DRAINING:
                continue  # a drained node being left: its notice is its event, which marks nothing (rules.py)
            if want is not None and marks.get(rank, (None,))[0] != want:
                return f"node_health says what the state says: node {rank} is {t.kind}, marked {marks.get(rank)}"
        last = {e.component: e.new_size for r in job.resizes for e in (r, *r.also)}
        changed = {c: n for c, n in last.items() if c in job.groups and n != len(state.workers(c))}
        if changed:
            return f"the last resize is the size now: {changed}, state {[len(state.workers(c)) for c in changed]}"
        gone = [g for g in job.placement_groups if g.removed]
        if gone:
            return f"the job's placement groups are on the cluster: {len(gone)} of them removed"
        if not all(isinstance(w, str) and w for w in job.warnings):
            return f"the job's warnings are text: {job.warnings!r}"
        return None

    def _status(self) -> str | None:
        """`rlplace status` (read off the simulated cluster, no GPU probe: asking the workers takes time) shows
        the job's nodes the state holds lost or failed as LOST or FAILED (and no other node of the job so); every
        worker of the state whose actor is up, under its rank now, in its actor's state, on the node serving its
        rank; and no other worker of the job ALIVE."""
        state = self.job.state
        node_rows, worker_rows = status.collect_all(self.sim, probe_gpus=False)
        shown_as = {NodeHealth.LOST: NodeStatus.LOST, NodeHealth.FAILED: NodeStatus.FAILED}
        troubled = {f"node {rank}": shown_as[t.kind] for rank, t in state.troubles().items() if t.kind in shown_as}
        marked = {r.node: r.state for r in node_rows if r.state in shown_as.values() and r.job == self.sim.job_id()}
        if marked != troubled:
            return f"status says what the state says: nodes shown {marked or 'none'} lost or failed, state {troubled}"
        rows = {r.name: r for r in worker_rows if r.job == self.sim.job_id()}
        expected = set()
        for c, group in self.job.groups.items():
            if group.in_driver:
                continue
            held = group.held()
            for w in state.workers(c):
                actor = held.get(w.name)
                node = state.node(w.node_rank)
                if not isinstance(actor, SimActor) or (node is None and w.node_rank is not None):
                    continue
                expected.add(w.name)
                runs_on = None
                if node is None:  # placed by Ray: shown on the node its actor runs on (by its rank label, or IP)
                    runs_on = self.sim.nodes_by_id.get(actor.node_id)  # None: it waits for a node
                    up = runs_on is not None and _up(runs_on)
                    labels = runs_on.labels if runs_on is not None else {}
                    place = f"node {labels[NODE_RANK_LABEL]}" if NODE_RANK_LABEL in labels else ""
                else:
                    up = _up(self.sim.nodes_by_id[str(node.node_id)]) and state.health(w.node_rank) == NodeHealth.OK
                    place = f"node {w.node_rank}" + (f" (spare {node.address})" if SPARE_LABEL in node.labels else "")
                if not up or actor.state != WorkerState.ALIVE:
                    continue
                row = rows.get(w.name)
                if row is not None and runs_on is not None and not place and runs_on.address in row.node:
                    place = row.node  # an unlabelled node (a spare, say): named with its IP
                if row is None or (row.component, row.rank, row.state, row.node) != (c, w.rank, actor.state, place):
                    seen = "not shown" if row is None else f"shown {row.state} as {row.component} rank {row.rank}"
                    where = "" if row is None else f" on {row.node!r}"
                    return (
                        f"status says what the state says: {w.name} ({c} rank {w.rank}, ALIVE on {place!r}) is "
                        f"{seen}{where}"
                    )
        stray = sorted(n for n, r in rows.items() if r.state == WorkerState.ALIVE and n not in expected)
        if stray:
            return f"status says what the state says: {', '.join(stray)} shown ALIVE, not workers of the state"
        return self._status_in_driver(worker_rows)

    def _status_in_driver(self, worker_rows: list[status.WorkerRow]) -> str | None:
        """`rlplace status` shows every worker of a driver-local component (`remote_<c>: false`) as DRIVER, on
        the driver's node, and no other."""
        state = self.job.state
        shown = {
            (r.component, r.rank) for r in worker_rows if r.job == self.sim.job_id() and r.node.endswith("(driver)")
        }
        shown_as = {r.state for r in worker_rows if r.job == self.sim.job_id() and r.node.endswith("(driver)")}
        planned = {(c, w.rank) for c in state.plan.components for w in state.workers(c) if w.in_driver}
        if shown != planned or shown_as - {WorkerState.DRIVER}:
            return f"status shows the driver's workers: {sorted(shown)} ({sorted(shown_as)}), state {sorted(planned)}"
        return None

    def _groups(self) -> str | None:
        units = {(b.node_rank, b.reservation) for b in self.job.state.plan.bundles}
        live = [g for g in self.sim.live_groups() if g.driver == self.sim.job_id()]
        if len(live) > len(units):
            return f"no placement group left behind: {len(live)} on the cluster for the plan's {len(units)}"
        return None

    def _zombies(self) -> str | None:
        """No call is sent to an actor after the job asked to kill it (a worker replaced or removed)."""
        sent = self.sim.sent
        start, self._sent_seen = self._sent_seen, len(sent)
        for ref in sent[start:]:
            actor = ref.actor
            if actor is not None and actor.kill_asked_at is not None and ref.sent_at > actor.kill_asked_at:
                return (
                    f"a replaced worker acts: {ref.method or 'a function'} was sent to {actor.name} at "
                    f"{ref.sent_at:.2f} s, after the job asked to kill it at {actor.kill_asked_at:.2f} s"
                )
        return None

    def _nearest(self) -> str | None:
        """A spare that took a rank over is as near the lost node as any spare that was ready before the move and
        still is (its NVLink domain, then rack, then zone)."""
        events = self.job.state.events
        new, self._events_seen = events[self._events_seen :], len(events)
        for e in new:
            if e.kind != EventKind.SPARE or e.node_rank not in self._before or self._weather():
                continue
            lost, before = self._before[e.node_rank]
            chosen = _distances(lost, [self.sim.nodes_by_id[e.node_id]], self.job.state)[0]
            ready = {n.node_id for n in self._ready_spares(e.node_rank)} if not self.job.state.closed else set()
            nearer = sorted(n for n, far in before.items() if far < chosen and n in ready)
            if nearer:
                return (
                    f"the nearest spare takes over: node {e.node_rank} went to {e.node_id[:8]}, but "
                    f"{', '.join(n[:8] for n in nearer)} (nearer its NVLink domain, rack or zone) was ready"
                )
        return None

    def _drained(self) -> str | None:
        """A drained node with a spare ready: its workers moved to it before the deadline (not lost at it), as long
        as a spare remained for it (other ranks in trouble take spares too; weather voids the promise, except a GCS
        restart, which only voids it when it keeps the drain from the job until too late: `_gcs_restart`)."""
        state = self.job.state
        now = self.sim.wall()
        kept = []
        for d in self.drains:
            taken = (EventKind.SPARE, EventKind.REPLACEMENT)
            moved = [e for e in state.events[d.events :] if e.node_rank == d.rank and e.kind in taken]
            if moved and moved[0].at <= d.deadline:
                continue  # kept
            if not moved and self.sim.now() < self.sim.weather.gcs_down_until:
                kept.append(d)  # the GCS restarts: the drain waits (`_gcs_restart` dropped those it makes too late)
                continue
            others = [r for r, t in state.troubles().items() if r != d.rank and t.kind == NodeHealth.LOST]
            slow = self.sim.weather.start_s or self.sim.weather.kill_s  # workers may not start in time
            if not moved and (self._weather() or slow or len(self._ready_spares(d.rank)) <= len(others)):
                continue  # no spare remains for it, or the weather: no promise
            if now >= d.deadline:
                return f"a drain moves the workers before the deadline: node {d.rank}'s moved {moved[:1] or 'never'}"
            kept.append(d)
        self.drains = kept
        return None

    def _left_over(self) -> str | None:
        mine = self.sim.job_id()
        groups = [g for g in self.sim.live_groups() if g.driver == mine]
        # an actor the job asked to kill whose kill the cluster has not carried out yet is on its way: the job waits
        # 10 s for the deaths and says which outlived it (kills that lag longer: `_kill_lag`)
        dying = [a for a in self.sim.live_actors() if a.kill_asked_at is not None and a.kills]
        actors = [a for a in self.sim.live_actors() if a.driver == mine and a not in dying]
        state = self.job.state
        keys = [k for k in self.sim.kv if k == records.key(state.namespace, state.name) or state.instance in k]
        if groups or actors or keys:
            return f"nothing left after shutdown: {len(groups)} placement groups, {len(actors)} actors, KV {keys[:3]}"
        return None


def other_job(sim: SimCluster, case: Case, rng: random.Random) -> Job | None:
    """A second job (its own driver and namespace) with one worker on one GPU of a node of the cluster, launched
    and called once; None when it does not start (the GPU is taken: a documented PlacementError)."""
    from rlplace.config import load
    from rlplace.planner import plan

    node = rng.choice([n for n in case.inventory.nodes if n.num_gpus])  # every case has GPUs (node 0 at least)
    text = (
        f"cluster:\n  num_nodes: {len(case.inventory)}\n  node_groups:\n    - {{label: g, node_ranks: '{node.rank}'}}\n"
        f"  component_placement:\n    learner: {{node_group: g, placement: '{rng.randrange(node.num_gpus)}'}}\n"
    )
    spec = load(text)
    view = sim.driver(OTHER_DRIVER)
    live = inventory_from_nodes(view.nodes())
    job = Job(plan(spec, case.inventory), live, name="other", spec=spec, cluster=view, timeout_s=JOB_TIMEOUT_S)
    try:
        job.start()
        group = job.launch("learner", SimWorker)
        group.call("step", 0, timeout_s=CALL_TIMEOUT_S)
    except RlplaceError:
        job.shutdown()
        return None
    return job


def _delivered(ref: SimRef) -> bool:
    """The call ran to its end and its answer could reach the driver (not a zombie's, not lost with its node)."""
    p = ref.process
    return ref.finished_at is not None and p is not None and ref.ready_at < float("inf") and ref.ready_at <= p.known_at


def _up(node: SimNode) -> bool:
    return node.running and node.reachable and not node.reported_dead


def _stuck(actor: SimActor) -> bool:
    """A call hangs in the actor's process (it runs nothing after it)."""
    p = actor.process
    return p is not None and p.ended_at is None and any(r.hangs for r in p.pending)


def _settled(actor: Any, sim: SimCluster) -> SimProcess | None:
    """The actor's process, when it is constructed, alive and has run every call sent to it (none held back by a
    cut either: so what it installed is what it was told last); else None."""
    if not isinstance(actor, SimActor):
        return None
    p = actor.process
    if p is None or p.instance is None or p.ended_at is not None or actor.state != WorkerState.ALIVE:
        return None
    if p.busy or p.queue or actor.kill_asked_at is not None or sim.nodes_by_id[p.node_id].stalled:
        return None
    return p


def _distances(lost: Node, spares: Sequence[SimNode], state: Any) -> list[int]:
    """How far each spare is from `lost`: 0 in its NVLink domain, 1 in its rack, 2 in its zone, 3 elsewhere (the
    innermost of the job's topology levels they share)."""
    as_nodes = [Node(rank=-1, labels=dict(s.labels), node_id=s.node_id) for s in spares]
    topology = read_topology(state.levels, [lost, *as_nodes])
    units = [[topology.unit(lv, i) for i in range(len(spares) + 1)] for lv in topology.levels]
    return [next((d for d, u in enumerate(units) if u[i] == u[0]), len(units)) for i in range(1, len(spares) + 1)]


def first(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__
