"""The state of one job, at the bottom of the Ray layer: what it is, where its ranks run, what happened.

No Ray call in here. Reservation, rendezvous, launch, the node watcher and the job record read it; nothing
but `JobState.apply` changes it. `apply` takes one `Change` (nodes that now serve ranks, the workers a
component now has, masters, node trouble, an event), makes it under the state's lock, wakes every thread
waiting on the state (calls waiting on a lost node) and then tells the subscribers (the job record, which
is rewritten from the state). A takeover and a resize are changes of the same kind: "these ranks run there
now", "the plan (and so each component's workers) is this now".
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlplace.errors import ConfigError, NodeLostError, Problem
from rlplace.inventory import Inventory, Node
from rlplace.lifecycle import EventKind, NodeHealth, ResizeCause
from rlplace.model import JobSpec, TopologyLevel
from rlplace.plan import Plan, Worker
from rlplace.ray.topology import job_levels


@dataclass(frozen=True)
class NodeEvent:
    """Something that happened to a node of the job; `job.events` lists them in order.

    kind: `lost` (the node is gone; `node_id` is the lost node), `draining` (Ray says the node goes at a
    deadline, a preemption notice: `deadline` is when, wall clock; `detail` says what the job does before then,
    or which workers will be lost then), `spare` or `replacement` (the rank's workers answer again on
    `node_id`; `seconds` since the loss was declared, or since the drain notice), `failed` (the window
    passed; `seconds` likewise), `shrunk` (no spare or replacement, and every component on the node is
    elastic: they shrank instead, `job.resizes` has how; `seconds` likewise), `grown` (a node serves the rank
    again, or joined as a new one, and the shrunk components grew back onto it; `node_id` is that node).
    """

    kind: EventKind
    node_rank: int
    workers: tuple[str, ...]
    at: float  # wall clock (`Cluster.wall`)
    node_id: str
    address: str
    detail: str
    seconds: float | None = None
    deadline: float | None = None  # a `draining` event's deadline (wall clock)

    def __str__(self) -> str:
        took = f" after {self.seconds:.1f} s" if self.seconds is not None else ""
        return f"node {self.node_rank} {self.kind}{took}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeEvent:
        return cls(**{**d, "kind": EventKind(d["kind"]), "workers": tuple(d["workers"])})


@dataclass(frozen=True)
class ResizedRank:
    """A worker a resize added or removed: its rank (the new one when added, the one it had when removed), actor
    name, node rank (None: Ray placed it) and node-local GPUs."""

    rank: int
    name: str
    node_rank: int | None
    gpus: tuple[int, ...]

    def __str__(self) -> str:
        where = "placed by Ray" if self.node_rank is None else f"node {self.node_rank}"
        gpus = f" GPU {','.join(map(str, self.gpus))}" if self.gpus else ""
        return f"{self.name} ({where}{gpus})"


@dataclass(frozen=True)
class ResizeEvent:
    """One elastic component changing size (`job.resize`, a lost node's shrink, growing back); `job.resizes`
    lists them in order, and every worker of the component gets it in `on_resized(event)`.

    `renumbered` maps the old rank of every worker kept to its new rank (survivors keep their actor names);
    `cause` is `resize`, `node lost` or `grow back` (`node_rank`: the node lost or joined); `also` the events of
    the components that changed with this one in the same step (an env following its eval, buffer shards
    following train); `seconds` from the start of the step until every worker answered at the new size.
    """

    component: str
    old_size: int
    new_size: int
    added: tuple[ResizedRank, ...]
    removed: tuple[ResizedRank, ...]
    renumbered: dict[int, int] = field(hash=False)
    cause: ResizeCause
    at: float  # wall clock (`Cluster.wall`)
    seconds: float
    node_rank: int | None = None
    also: tuple[ResizeEvent, ...] = ()

    def __str__(self) -> str:
        where = f" (node {self.node_rank})" if self.node_rank is not None else ""
        parts = [f"{self.component} {self.old_size} -> {self.new_size} ({self.cause}{where}, {self.seconds:.1f} s)"]
        if self.added:
            parts.append("added " + ", ".join(map(str, self.added)))
        if self.removed:
            parts.append("removed " + ", ".join(map(str, self.removed)))
        moved = {old: new for old, new in self.renumbered.items() if old != new}
        if moved:
            parts.append("renumbered " + ", ".join(f"{old}->{new}" for old, new in sorted(moved.items())))
        return "; ".join(parts)


@dataclass(frozen=True)
class Master:
    """Where a component's rank 0 listens (MASTER_ADDR, MASTER_PORT)."""

    node_rank: int
    node_id: str | None
    address: str
    port: int


@dataclass(frozen=True)
class Trouble:
    """A node rank that is draining (its node goes at a deadline and a spare, a free node or a shrink will serve
    it: the calls already sent there are finishing, new ones wait), lost (waiting for a spare or a replacement)
    or failed (the window passed; a spare or replacement may still take it over).

    The one record of a rank's trouble: `status` and the job record read its kind and wall-clock times, the
    node watcher everything else (what it moves, when the window ends, what to say if it fails). It changes
    only by a new record through `JobState.apply` (`dataclasses.replace`), never in place."""

    kind: NodeHealth  # DRAINING, LOST or FAILED
    since: float  # wall clock of the loss's declaration (of the drain notice, for a drained node)
    until: float  # wall clock end of the replacement window (the drain's deadline, while draining)
    node: Node  # the node that served the rank when the trouble began (the lost node, as the job knew it)
    workers: tuple[str, ...]  # the names of the launched workers planned on it then
    declared: float  # `since` on the cluster's monotonic clock (`Cluster.now`)
    deadline: float  # `until` on the monotonic clock: past it, a lost rank fails
    refusals: Mapping[str, str] = field(default_factory=dict)  # spare or replacement node id -> why not taken
    shrink_refusal: str | None = None  # why its components could not shrink instead (tried once)
    error: NodeLostError | None = field(default=None, compare=False)  # set once it failed


@dataclass(frozen=True)
class Change:
    """One update of a job's state; what is left empty stays as it is."""

    nodes: Mapping[int, Node] = field(default_factory=dict)  # node rank -> the node serving it from now on
    workers: Mapping[str, tuple[Worker, ...]] = field(default_factory=dict)  # component -> its workers now
    masters: Mapping[str, Master] = field(default_factory=dict)
    trouble: Mapping[int, Trouble | None] = field(default_factory=dict)  # None: the rank is healthy again
    event: NodeEvent | None = None
    plan: Plan | None = None  # the plan after a resize step: each component's workers follow it
    #: True: the rank's node is gone and its components shrank (no node serves it); False: a node serves it again.
    down: Mapping[int, bool] = field(default_factory=dict)
    resizes: tuple[ResizeEvent, ...] = ()
    warnings: tuple[str, ...] = ()  # appended to the job's warnings


Subscriber = Callable[["JobState"], None]


class JobState:
    """What one job is (name, Ray namespace, plan and the config it came from, timeouts) and where it stands
    (rank -> node map, each component's workers, masters, node trouble, ranks gone after a shrink, node events,
    resizes, warnings). Thread-safe: the node watcher changes it while callers read it."""

    def __init__(
        self,
        plan: Plan,
        live: Inventory,
        *,
        name: str,
        namespace: str,
        timeout_s: float,
        replace_within_s: float,
        spec: JobSpec | None = None,
    ):
        if replace_within_s < 0:
            raise ValueError(f"replace_within_s must be 0 (fail at once) or more seconds, not {replace_within_s}")
        self.plan = plan
        self.spec = spec  # what the plan was made from (None when handed a Plan): growing needs it
        #: The topology levels (and their label keys) that bundle selectors carry and failover goes by.
        self.levels: tuple[TopologyLevel, ...] = job_levels(spec, plan)
        self.name = name
        self.namespace = namespace
        self.timeout_s = timeout_s
        self.replace_within_s = float(replace_within_s)
        self.instance = uuid.uuid4().hex  # unique per job object: two runs under one name never mix
        self.warnings: list[str] = list(plan.warnings)
        self.changed = threading.Condition(threading.RLock())  # notified by every change and by close()
        self._live = live
        self._workers = {c: tuple(plan.by_component(c)) for c in plan.components}
        self._masters: dict[str, Master] = {}
        self._trouble: dict[int, Trouble] = {}
        self._events: list[NodeEvent] = []
        self._resizes: list[ResizeEvent] = []
        self._down: set[int] = set()
        self._subscribers: list[Subscriber] = []
        self._closed = False

    # -- reading ---------------------------------------------------------------------------------------

    @property
    def live(self) -> Inventory:
        """The rank -> node map: the live inventory, with each rank's current node (a spare after a takeover)."""
        return self._live

    def node(self, node_rank: int | None) -> Node | None:
        """The node serving `node_rank` now (None for workers the plan leaves to Ray)."""
        return None if node_rank is None else self._live.node(node_rank)

    @property
    def components(self) -> list[str]:
        return list(self._workers)

    def workers(self, component: str) -> tuple[Worker, ...]:
        """The workers `component` has now, in rank order."""
        return self._workers.get(component, ())

    def planned(self, component: str) -> tuple[Worker, ...]:
        """The workers `component` has now; a ConfigError naming the planned components when it has none (what
        `job.launch` and `job.resize` say of a component the plan does not hold)."""
        workers = self.workers(component)
        if not workers:
            raise ConfigError(
                Problem(
                    path="component",
                    value=component,
                    message=f"{component!r} is not in the plan; planned: {self.plan.components}",
                )
            )
        return workers

    def worker(self, component: str, rank: int) -> Worker:
        workers = self.workers(component)
        if 0 <= rank < len(workers):
            return workers[rank]
        raise ConfigError(
            Problem(
                path=f"{component}.rank",
                value=rank,
                message=f"{component} rank {rank} is not in the plan; planned ranks: {[w.rank for w in workers]}",
            )
        )

    def pinned_ranks(self) -> list[int]:
        """The node ranks that hold a worker or a bundle of the job (the nodes a watcher must watch)."""
        pinned = {w.node_rank for ws in self._workers.values() for w in ws if w.node_rank is not None}
        return sorted(pinned | {b.node_rank for b in self.plan.bundles})

    def masters(self) -> dict[str, Master]:
        return dict(self._masters)

    def master(self, component: str) -> Master | None:
        return self._masters.get(component)

    def health(self, node_rank: int | None) -> NodeHealth:
        """OK, DRAINING (its workers move off a node that goes; calls sent there finish, new ones wait), LOST
        (waiting for a spare or replacement) or FAILED (the replacement window passed)."""
        trouble = None if node_rank is None else self._trouble.get(node_rank)
        return trouble.kind if trouble else NodeHealth.OK

    def trouble(self, node_rank: int) -> Trouble | None:
        return self._trouble.get(node_rank)

    def troubles(self) -> dict[int, Trouble]:
        return dict(self._trouble)

    @property
    def events(self) -> list[NodeEvent]:
        """What happened to the job's nodes, in order: `lost`, then `spare` / `replacement`, or `failed`."""
        return list(self._events)

    @property
    def resizes(self) -> list[ResizeEvent]:
        """Every change of an elastic component's size, in order."""
        return list(self._resizes)

    @property
    def down(self) -> frozenset[int]:
        """Node ranks lost without a spare or replacement, whose components shrank instead (no node serves them)."""
        return frozenset(self._down)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- changing ----------------------------------------------------------------------------------------

    def apply(self, change: Change) -> None:
        """Make `change` (one locked update), wake whoever waits on the state, then tell the subscribers."""
        with self.changed:
            if change.nodes:
                nodes = [change.nodes.get(n.rank, n) for n in self._live.nodes]
                while len(nodes) in change.nodes:  # a new rank joins at the end (ranks stay contiguous)
                    nodes.append(change.nodes[len(nodes)])
                self._live = Inventory(tuple(nodes))
            if change.plan is not None:
                self.plan = change.plan
                for c in dict.fromkeys([*self._workers, *change.plan.components]):
                    workers = tuple(change.plan.by_component(c))
                    if workers != self._workers.get(c):
                        self._workers[c] = workers
            self._workers.update({c: tuple(ws) for c, ws in change.workers.items()})
            self._masters.update(change.masters)
            for rank, trouble in change.trouble.items():
                if trouble is None:
                    self._trouble.pop(rank, None)
                else:
                    self._trouble[rank] = trouble
            if change.event is not None:
                self._events.append(change.event)
            self._resizes.extend(change.resizes)
            self.warnings.extend(change.warnings)
            for rank, gone in change.down.items():
                if gone:
                    self._down.add(rank)
                else:
                    self._down.discard(rank)
            self.changed.notify_all()
            subscribers = list(self._subscribers)
        for notify in subscribers:
            notify(self)

    def subscribe(self, notify: Subscriber) -> None:
        """Call `notify(state)` after every change (in the changing thread)."""
        with self.changed:
            self._subscribers.append(notify)

    def close(self) -> None:
        """The job is shut down: no subscriber is told anything any more, and every waiter wakes up."""
        with self.changed:
            self._closed = True
            self._subscribers.clear()
            self.changed.notify_all()
