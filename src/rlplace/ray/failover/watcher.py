"""Node loss, noticed and acted on: a watcher that reads node health and moves a lost rank's workers, or
fails it clearly.

One `NodeWatcher` per job. Its ticks (`Cluster.every`: a thread on Ray) read the node table (one request) every
`period_s` seconds; calls never poll the GCS themselves, they read the job state (`JobState.health`).
When a node holding the job's bundles is gone (Ray declared it dead, or its raylet refuses connections
while a call on it has just failed: the worker processes are known dead, no need to wait for Ray's health
checks), the watcher:

1. records a `lost` event in the state and has the mover drop the rank (its workers killed, so no call,
   not even a bare `ray.get`, waits on them forever; its placement group removed, which Ray would
   otherwise keep RESCHEDULING);
2. looks for a node to take the rank over (`rlplace.ray.failover.candidates`: a replacement started with
   the same rank label, else a hot spare of the same shape; hardware such as robots cannot move);
3. has the mover move the rank there (bundles reserved, the rank mapped to the node in the state, the
   workers relaunched and their `on_replaced(event)` answered), then records a `spare` or `replacement`
   event with the seconds since the loss was declared;
4. or, when no node can take it over now and every component on the node is elastic and keeps at least its
   `min` without it (docs/guide.md, "Elastic components"), has the mover shrink them (the removed workers'
   calls raise RanksRemovedError), records a `shrunk` event and keeps the rank as gone (`JobState.down`);
5. or, when `replace_within_s` passes first (0: at once), records `failed`, and every pending and new call
   on those workers raises `NodeLostError` naming the rank, the workers and what the job waited for.

A drain (Ray says a node goes at a deadline: `ray drain-node`, the autoscaler, KubeRay, a spot preemption;
`rlplace drain`) is a loss told early. The watcher reads the GCS's draining nodes each period too; when a node
serving a rank drains, it records a `draining` event with the deadline and:

- when a node could take the rank over now (the same `candidates` as for a loss) or its components could
  shrink (the same planner step), marks the rank `draining` (new calls on its workers wait) and, with a ticker of
  its own (the watcher goes on watching), gives the calls already sent there until half the time left to finish
  on the still-running node; then the rank goes the loss path at once (steps 1-4, counted from the notice: calls
  that had not finished are re-run where the workers move);
- else leaves the workers running and says (event and warning) which of them will be lost at the deadline; the
  loss is handled as any other when the node goes.

A draining node never takes a rank over and is never grown onto.

While ranks are gone after a shrink, the watcher looks for nodes that can serve them again (a replacement
with the rank's label, a spare of the lost node's shape) or that join as the next ranks, and has the mover
grow the shrunk components back onto them (a `grown` event).

The watcher decides; the `Mover` (the Job's `rlplace.ray.failover.mover.RankMover`) acts. Calls on workers of
other nodes never wait on any of this.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rlplace.errors import PlacementError, PlanError
from rlplace.inventory import Node
from rlplace.lifecycle import EventKind, NodeHealth, Takeover
from rlplace.ray.failover.rules import candidates, death_reason, joiners, lost_error, size_changes
from rlplace.ray.nodes import is_spare
from rlplace.ray.port import Cluster, Ticker
from rlplace.ray.state import Change, JobState, NodeEvent, ResizeEvent, Trouble

log = logging.getLogger(__name__)

#: How often the watcher reads the GCS node table.
WATCH_PERIOD_S = 0.5
#: How often a drain's ticker looks whether the calls on the draining node are done.
DRAIN_LOOK_S = 0.1


class Mover(Protocol):
    """What the watcher has done to a rank's workers (the Job implements it)."""

    def workers_on(self, rank: int) -> tuple[str, ...]:
        """The names of the launched workers planned on node `rank`."""

    def drop_rank(self, rank: int) -> None:
        """Node `rank` is lost: kill its workers and release its bundles, so nothing waits on them."""

    def answers_from(self, rank: int) -> Mapping[Any, str]:
        """Node `rank` drains but is still up: a no-op sent to each of its launched workers, by the reference of
        its answer (the worker's name): a worker answers once the calls already sent to it are done."""

    def shrink_refusal(self, rank: int) -> str | None:
        """Why the components on node `rank` could not shrink off it (None: they could); nothing changes."""

    def move_rank(self, rank: int, node: Node, event: NodeEvent) -> None:
        """Serve node `rank` from `node`: reserve its bundles there, map the rank to it in the state, relaunch
        its workers and return once each answered `on_replaced(event)`. Raises PlacementError with nothing of
        the attempt left (the rank mapped back)."""

    def shrink_lost(self, rank: int, done: Callable[[tuple[ResizeEvent, ...]], None]) -> tuple[ResizeEvent, ...]:
        """No node took lost node `rank` over: shrink its (elastic) components off it; `done(events)` once the
        job is at the new size. PlanError when a component there cannot shrink (nothing changed)."""

    def grow_back(
        self, joined: Mapping[int, Node], done: Callable[[tuple[ResizeEvent, ...]], None]
    ) -> tuple[ResizeEvent, ...]:
        """Serve ranks from the `joined` nodes (lost ranks, or new ones) and grow the shrunk components back."""


class Reserved(Protocol):
    """What the watcher reads of the reservation: what each node rank holds."""

    def demand(self, rank: int) -> dict[str, float]: ...


@dataclasses.dataclass(frozen=True)
class _Leaving:
    """A drain being left (`NodeWatcher._leave`): the rank, its `draining` event, until when (monotonic) the calls
    already sent to its workers may finish there, and the workers' answers that say they did."""

    rank: int
    notice: NodeEvent
    finish_by: float
    answers: Mapping[Any, str]


class NodeWatcher:
    """The node-loss watcher of one job (see the module docstring)."""

    def __init__(
        self, cluster: Cluster, state: JobState, reserved: Reserved, mover: Mover, *, period_s: float = WATCH_PERIOD_S
    ):
        self._cluster = cluster
        self._state = state
        self._reserved = reserved
        self._mover = mover
        self.period_s = period_s
        self._raylets: dict[str, tuple[str, int]] = {}  # node id -> raylet (host, port)
        self._tried: set[str] = set()  # nodes a growth back onto failed, and nodes lost: never grown onto
        #: nodes declared lost (their raylet refused, or Ray declared them dead): never take anything over, though
        #: Ray may list them alive for a health-check delay yet
        self._lost: set[str] = set()
        self._notices: set[str] = set()  # draining nodes acted on (once per drain)
        self._work = cluster.lock()  # one declaration or takeover at a time (they create and remove groups)
        self._ticker: Ticker | None = None
        self._leaving: list[Ticker] = []  # the drains' tickers (`_leave`)

    # -- life cycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        if not self._state.pinned_ranks():
            return  # nothing pinned to a node: Ray alone decides where the workers run
        self._read_nodes()
        self._ticker = self._cluster.every(self.period_s, self._run_once, f"rlplace-watcher-{self._state.name}")

    def stop(self) -> None:
        """Stop watching (the job's state is closed: calls waiting on a lost node woke up and raise)."""
        for ticker in [self._ticker, *self._leaving]:
            if ticker is not None:
                ticker.stop(self._state.timeout_s + 5)

    def _wake(self) -> None:
        """Look again at once (a loss was just declared: its takeover need not wait a period)."""
        if self._ticker is not None:
            self._ticker.wake()

    # -- what calls ask (in memory; never a GCS request on the fast path) --------------------------------

    def health(self, rank: int | None) -> NodeHealth:
        """OK, DRAINING, LOST (waiting for a spare or replacement) or FAILED."""
        return self._state.health(rank)

    def check(self, rank: int) -> bool:
        """A call on a worker of node `rank` just failed: is the node lost? Declares the loss at once when the
        node's raylet refuses connections (its processes are known dead) without waiting for Ray's health
        checks; waits for Ray's verdict while the probe is inconclusive. The node is the one serving the rank when
        asked: once the rank is declared lost meanwhile (by the watcher's tick) the answer is yes, and a node that
        took the rank over since is never declared lost for it (found by the explorer, docs/ray.md)."""
        if self._state.health(rank) != NodeHealth.OK:
            return True
        node = self._state.live.node(rank)
        node_id = str(node.node_id)
        deadline = self._cluster.now() + max(self._state.replace_within_s, 30.0)
        while not self._state.closed:
            if self._state.health(rank) != NodeHealth.OK or str(self._state.live.node(rank).node_id) != node_id:
                return True
            raylet = self._raylets.get(node_id)
            refused = self._cluster.raylet_refuses(*raylet) if raylet is not None else None
            if refused and raylet is not None:
                why = f"its raylet at {raylet[0]}:{raylet[1]} refuses connections (processes gone)"
                self._declare(rank, why, node_id=node_id)
                return True
            if node_id not in {n["NodeID"] for n in self._read_nodes() if n.get("Alive")}:
                self._declare(rank, "Ray declared it dead", node_id=node_id)
                return True
            if refused is False or self._cluster.now() >= deadline:
                return False
            self._cluster.sleep(self.period_s)
        return self._state.health(rank) != NodeHealth.OK

    def wait_usable(self, rank: int | None, deadline: float | None = None) -> bool:
        """Block while node `rank` is lost: True once its workers answer again (on a spare or replacement),
        False when the caller's `deadline` (monotonic) came first. Raises NodeLostError once the window
        passed, PlacementError when the job is shut down meanwhile."""
        state = self._state
        with state.changed:
            while True:
                trouble = None if rank is None else state.trouble(rank)
                if trouble is not None and trouble.error is not None:
                    raise trouble.error
                if state.closed:
                    if trouble is not None:
                        raise PlacementError(f"job {state.name} was shut down while node {rank} was lost")
                    return True
                if trouble is None:
                    return True
                stuck = self._cluster.now() > trouble.deadline + 2 * self.period_s + 5
                if rank is not None and trouble.kind == NodeHealth.LOST and stuck:
                    self._fail(rank)  # the watcher is stuck: the window is a promise
                    continue
                wait = None if deadline is None else deadline - self._cluster.now()
                if wait is not None and wait <= 0:
                    return False
                self._cluster.wait_on(state.changed, wait if wait is not None else 1.0)

    def wait_all(self) -> None:
        """Block until no rank is lost (or raise the NodeLostError of one that failed): taken over, or its
        components shrunk (a rank the shrink emptied is no longer pinned, but is waited for until it is done)."""
        for rank in sorted({*self._state.pinned_ranks(), *self._state.troubles()}):
            self.wait_usable(rank)

    def check_all(self) -> bool:
        """Is any node of the job lost? (Probes every node; see `check`.)"""
        return any([self.check(rank) for rank in self._state.pinned_ranks()])

    # -- the ticks (a thread on Ray, a timer in the simulation) ------------------------------------------

    def _run_once(self) -> bool:
        """One look at the nodes; False ends the ticks (the job was shut down, or the cluster went away)."""
        if not self._state.closed:
            try:
                self._tick()
                return True
            except Exception as e:  # never let the watcher die silently: say so, try again next period
                if not self._state.closed and self._cluster.connected():
                    log.warning("rlplace node watcher of job %s: %s", self._state.name, e, exc_info=True)
                    return True
        # Ray went away under the job (or it was shut down): the job is over, and no call may wait on a watcher
        # that is gone (closing the state wakes them)
        self._state.close()
        return False

    def _tick(self) -> None:
        raw = self._read_nodes()
        draining = self._cluster.draining_nodes()
        alive = {n["NodeID"] for n in raw if n.get("Alive")}
        for rank in self._state.pinned_ranks():
            node_id = self._state.live.node(rank).node_id
            if self._state.health(rank) == NodeHealth.OK and str(node_id) not in alive:
                dead = next((n for n in raw if n["NodeID"] == node_id), {})
                self._declare(rank, "Ray declared it dead" + death_reason(dead), node_id=str(node_id))
        usable = [n for n in raw if n["NodeID"] not in draining]  # a node that goes takes nothing over
        self._notices &= set(draining)  # a drain cancelled is forgotten: the node may be drained again later
        for rank in self._state.pinned_ranks():
            node_id = str(self._state.live.node(rank).node_id)
            if node_id in draining and node_id not in self._notices and self._state.health(rank) == NodeHealth.OK:
                self._notices.add(node_id)
                self._drained(rank, draining[node_id] / 1000 or None, usable)
        for rank, trouble in sorted(self._state.troubles().items()):
            if trouble.kind != NodeHealth.DRAINING:  # lost, or failed: a node may still take it over
                self._resolve(rank, usable)
        moving = any(t.kind in (NodeHealth.DRAINING, NodeHealth.LOST) for t in self._state.troubles().values())
        if self._state.down and not moving:  # a rank being moved first: growth must not take its spare
            self._grow_back(usable)

    def _read_nodes(self) -> list[dict[str, Any]]:
        raw = self._cluster.nodes()
        for n in raw:
            if n.get("Alive") and n.get("NodeManagerPort"):
                self._raylets[n["NodeID"]] = (n["NodeManagerAddress"], int(n["NodeManagerPort"]))
        return raw

    # -- deciding --------------------------------------------------------------------------------------

    def _declare(self, rank: int, why: str, *, node_id: str | None = None, notice: NodeEvent | None = None) -> None:
        """Node `rank` is lost (records a `lost` event); or, given the `notice` of its drain (its `draining` event,
        recorded already), it is being left: the loss counts from the notice, and the window from now. `node_id`:
        the node found lost; nothing happens when another serves the rank by now (it took over meanwhile)."""
        with self._work:
            expected = NodeHealth.OK if notice is None else NodeHealth.DRAINING
            if self._state.health(rank) != expected or self._state.closed:
                return
            node = self._state.live.node(rank)
            if node_id is not None and str(node.node_id) != node_id:
                return
            self._tried.add(str(node.node_id))  # declared lost before Ray's verdict, it may still look alive
            if notice is None:
                self._lost.add(str(node.node_id))
            workers = self._mover.workers_on(rank)
            now, wall = self._cluster.now(), self._cluster.wall()
            window = self._state.replace_within_s
            since = (now, wall) if notice is None else (now - (wall - notice.at), notice.at)
            trouble = Trouble(NodeHealth.LOST, since[1], wall + window, node, workers, since[0], now + window)
            event = None if notice is not None else self._event(EventKind.LOST, rank, workers, why)
            self._state.apply(Change(trouble={rank: trouble}, event=event))
            if event is not None:
                log.warning("rlplace job %s: %s; workers %s", self._state.name, event, ", ".join(workers))
            self._mover.drop_rank(rank)  # kill its workers, release its group: nothing waits on them from now on
            if window == 0 and notice is None and not self._shrink(rank):
                self._fail(rank)
        self._wake()

    def _drained(self, rank: int, deadline: float | None, usable: list[dict[str, Any]]) -> None:
        """Node `rank` drains by `deadline` (wall clock; None: Ray gave none): act on it while it is up, or say what
        the deadline will take (see the module docstring)."""
        with self._work:
            if self._state.health(rank) != NodeHealth.OK or self._state.closed:
                return
            node = self._state.live.node(rank)
            workers = self._mover.workers_on(rank)
            now, wall = self._cluster.now(), self._cluster.wall()
            left = self._state.timeout_s if deadline is None else max(0.0, deadline - wall)
            when = "no deadline" if deadline is None else f"deadline {_clock(deadline)} (in {left:.0f} s)"
            refusals: dict[str, str] = {}  # no trouble yet: the probe's refusals only go into its event
            takers = self._takers(rank, node, usable, refusals)
            refusal = None if takers else self._mover.shrink_refusal(rank)
            if takers or refusal is None:
                how, taker = takers[0] if takers else ("", node)
                act = f"{how} {taker.address} takes its workers over" if takers else "its elastic components shrink"
                event = self._event(EventKind.DRAINING, rank, workers, f"{when}; {act} before then", deadline)
                trouble = Trouble(NodeHealth.DRAINING, wall, wall + left, node, workers, now, now + left)
                self._state.apply(Change(trouble={rank: trouble}, event=event))
                log.warning("rlplace job %s: %s; workers %s", self._state.name, event, ", ".join(workers))
                try:
                    answers = self._mover.answers_from(rank)
                except Exception as e:  # the node went meanwhile, say: its calls fail and run again where they move
                    log.warning("rlplace job %s: asking draining node %d's workers: %s", self._state.name, rank, e)
                    answers = {}
                leaving = _Leaving(rank, event, now + left / 2, answers)
                name = f"rlplace-drain-{self._state.name}-{rank}"
                self._leaving.append(self._cluster.every(DRAIN_LOOK_S, lambda: self._leave(leaving), name))
                return
            why = "; ".join(refusals.values()) or "no hot spare or node with its rank label is free"
            what = (
                f"{when}; nothing takes it over ({why}) and its components cannot shrink ({refusal}): its workers "
                f"({', '.join(workers) or 'none launched'}) will be lost at the deadline"
            )
            event = self._event(EventKind.DRAINING, rank, workers, what, deadline)
            self._state.apply(Change(event=event, warnings=(str(event),)))
            log.warning("rlplace job %s: %s", self._state.name, event)

    def _event(
        self, kind: EventKind, rank: int, workers: tuple[str, ...], why: str, deadline: float | None = None
    ) -> NodeEvent:
        """A `lost` or `draining` event of the node serving `rank` now."""
        node = self._state.live.node(rank)
        address = node.address or "?"
        detail = f"{address} (id {str(node.node_id)[:8]}): {why}"
        at = self._cluster.wall()
        return NodeEvent(kind, rank, workers, at, str(node.node_id), address, detail, deadline=deadline)

    def _leave(self, leaving: _Leaving) -> bool:
        """One look of a drain's ticker (`Cluster.every`, beside the watcher's, which goes on watching): have the
        draining rank's workers answered, that is finished the calls sent to them before the notice? Until the
        drain's `finish_by` the ticker looks again a period later; then, in any case, the rank goes the loss path
        (the watcher's next tick moves or shrinks it). A ticker that looks, not a thread that waits: the
        simulation runs the job's threads one inside the other, and there one drain's wait for a hung call held up
        another drain's move past its deadline (found by the explorer, run seed 66013; docs/decisions.md)."""
        try:
            _, late = self._cluster.wait(list(leaving.answers), 0.0)
        except Exception as e:  # the node went meanwhile, say: its calls fail and run again where the workers move
            log.warning("rlplace job %s: the calls on draining node %d: %s", self._state.name, leaving.rank, e)
            late = []
        if late and self._cluster.now() < leaving.finish_by and not self._state.closed:
            return True
        if late:
            log.warning(
                "rlplace job %s: calls on %s had not finished on draining node %d by half the time left; they run "
                "again where the workers move",
                self._state.name,
                ", ".join(sorted(leaving.answers[ref] for ref in late)),
                leaving.rank,
            )
        self._declare(leaving.rank, "drained", notice=leaving.notice)
        return False

    def _takers(
        self, rank: int, lost: Node, raw: list[dict[str, Any]], refusals: dict[str, str]
    ) -> list[tuple[Takeover, Node]]:
        """The nodes that may take `rank` (served by `lost`) over now (`failover.candidates`; why a node is not
        taken goes into `refusals`). A node declared lost is none of them, though Ray lists it alive until its health
        checks fail: its processes are gone, a takeover would wait on it until the timeout (found by the explorer,
        docs/ray.md)."""
        alive = [n for n in raw if n.get("Alive") and n["NodeID"] not in self._lost]
        spares = any(is_spare(n) for n in alive)  # free resources matter to spares only (one request less)
        free: Mapping[str, Mapping[str, float]] = self._cluster.free_resources() if spares else {}
        serving = {str(n.node_id) for n in self._state.live.nodes}
        demand, levels = self._reserved.demand(rank), self._state.levels
        return candidates(
            rank, lost, alive, serving=serving, demand=demand, free=free, levels=levels, refusals=refusals
        )

    def _resolve(self, rank: int, raw: list[dict[str, Any]]) -> None:
        with self._work:
            trouble = self._state.trouble(rank)
            if trouble is None or trouble.kind == NodeHealth.DRAINING or self._state.closed:
                return
            refusals = dict(trouble.refusals)  # this look's refusals join the earlier ones (the error names them)
            for how, node in self._takers(rank, trouble.node, raw, refusals):
                try:
                    self._take_over(rank, trouble, node, how)
                    return
                except PlacementError as e:
                    if self._state.closed:
                        return  # the job was shut down during the takeover
                    refusals[str(node.node_id)] = f"{how} {node.address} failed: {e}"
                    log.warning(
                        "rlplace job %s: %s %s could not take node %d: %s", self._state.name, how, node.address, rank, e
                    )
            self._amend(rank, refusals=refusals)
            if self._shrink(rank):
                return
            if self._cluster.now() >= trouble.deadline:
                self._fail(rank)

    def _amend(self, rank: int, **fields: Any) -> None:
        """Change fields of the rank's trouble (a new record through the state; nothing when unchanged). Read and
        replaced under the state's lock: a waiting call may fail the rank meanwhile (`_fail`); only the watcher's
        own thread, which amends it, clears a trouble (a takeover, a shrink)."""
        with self._state.changed:
            old = self._state.trouble(rank)
            assert old is not None, f"node {rank} has no trouble to amend"
            new = dataclasses.replace(old, **fields)
            if new != old:
                self._state.apply(Change(trouble={rank: new}))

    def _shrink(self, rank: int) -> bool:
        """No node takes the rank over now: shrink its components instead, if they are all elastic (tried once per
        loss; why not goes into the rank's trouble, and so into the NodeLostError)."""
        trouble = self._state.trouble(rank)
        if trouble is None or trouble.shrink_refusal is not None or not self._state.plan.elastic:
            return False

        def done(events: tuple[ResizeEvent, ...]) -> None:
            detail = f"no spare or replacement: {size_changes(events)} (elastic components shrank)"
            node = trouble.node
            event = NodeEvent(
                EventKind.SHRUNK,
                rank,
                trouble.workers,
                self._cluster.wall(),
                str(node.node_id),
                node.address or "?",
                detail,
                self._cluster.now() - trouble.declared,
            )
            self._state.apply(Change(trouble={rank: None}, down={rank: True}, event=event))
            log.warning("rlplace job %s: %s", self._state.name, event)

        try:
            self._mover.shrink_lost(rank, done)
        except PlanError as e:
            self._amend(rank, shrink_refusal=str(e))
            return False
        except PlacementError as e:
            if self._state.trouble(rank) is not None:  # the shrink itself failed before its commit
                self._amend(rank, shrink_refusal=f"the shrink failed: {e}")
                log.warning("rlplace job %s: shrinking off node %d failed: %s", self._state.name, rank, e)
                return False
            log.warning("rlplace job %s: %s", self._state.name, e)  # shrunk; an on_resized failed
        return True

    def _grow_back(self, raw: list[dict[str, Any]]) -> None:
        """Ranks are gone after a shrink: nodes that can serve them again, or join as new ranks, take them, and
        the shrunk components grow back onto them."""
        with self._work:
            state = self._state
            serving = {str(n.node_id) for n in state.live.nodes}
            alive = [n for n in raw if n.get("Alive") and n["NodeID"] not in self._tried]
            joined = joiners(sorted(state.down), state.live, alive, serving=serving, levels=state.levels)
            if not joined or self._state.closed:
                return

            def done(events: tuple[ResizeEvent, ...]) -> None:
                for rank, (how, node) in sorted(joined.items()):
                    detail = f"{how} {node.address} (id {str(node.node_id)[:8]}) serves node {rank}"
                    detail += f": {size_changes(events)}" if events else "; nothing to grow back"
                    added = tuple(r.name for e in events for r in e.added if r.node_rank == rank)
                    at, address = self._cluster.wall(), node.address or "?"
                    event = NodeEvent(EventKind.GROWN, rank, added, at, str(node.node_id), address, detail)
                    state.apply(Change(event=event))
                    log.warning("rlplace job %s: %s", state.name, event)

            try:
                self._mover.grow_back({rank: node for rank, (_, node) in joined.items()}, done)
            except (PlacementError, PlanError) as e:
                self._tried.update(str(node.node_id) for _, node in joined.values())
                log.warning("rlplace job %s: growing back onto %s failed: %s", state.name, sorted(joined), e)

    def _take_over(self, rank: int, trouble: Trouble, node: Node, how: Takeover) -> None:
        """Move the rank to `node` (a spare or a replacement); the event (handed to `on_replaced` first) is
        recorded once the workers answer there, with the seconds since the loss was declared."""
        what = "hot spare" if how == Takeover.SPARE else "replacement node"
        detail = f"{what} {node.address} (id {str(node.node_id)[:8]}) took over node {rank}"
        at, address = self._cluster.wall(), node.address or "?"
        event = NodeEvent(EventKind(how), rank, trouble.workers, at, str(node.node_id), address, detail)
        self._mover.move_rank(rank, node, event)
        done = dataclasses.replace(event, at=self._cluster.wall(), seconds=self._cluster.now() - trouble.declared)
        self._state.apply(Change(trouble={rank: None}, event=done))
        log.warning("rlplace job %s: %s", self._state.name, done)

    def _fail(self, rank: int) -> None:
        """The window passed: the rank fails (once; the state's lock, not the takeover's, so that a waiting
        call can fail a rank whose takeover hangs)."""
        with self._state.changed:
            trouble = self._state.trouble(rank)
            if trouble is None or trouble.kind != NodeHealth.LOST:
                return
            error = lost_error(rank, trouble, self._reserved.demand(rank), self._state.replace_within_s)
            now = self._cluster.now()
            event = NodeEvent(
                EventKind.FAILED,
                rank,
                trouble.workers,
                self._cluster.wall(),
                str(trouble.node.node_id),
                trouble.node.address or "?",
                str(error),
                now - trouble.declared,
            )
            failed = dataclasses.replace(trouble, kind=NodeHealth.FAILED, error=error)
            self._state.apply(Change(trouble={rank: failed}, event=event))


def _clock(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))
