"""Changing the set of ranks of a running job: what a takeover and a resize both are (docs/decisions.md, "One
mover for every change of ranks").

`RankMover` is the Job's mover (`rlplace.ray.failover.watcher.Mover`): it drops a lost node's workers, moves them
to a spare or replacement, shrinks elastic components off a lost node, and grows them back when a node joins;
`job.resize` uses it too. Every change goes the same way: a planner step (`rlplace.planner.resize`: pure, nothing
moves), the step's new bundles reserved as new placement groups (`Reservation.reserve_step`), the state given the
new plan (so the rendezvous, the record and `rlplace status` follow), the new workers started through the
launcher's one path and answering, and only then the commit: removed workers stopped and their groups released, the
WorkerGroups reshaped, and every worker of a changed component told its new rank and rendezvous and its
`on_resized(event)` run. A failure before the commit undoes the step: nothing reserved or started is left, and
the state is the old one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from typing import Any

from rlplace import planner
from rlplace.errors import ConfigError, PlacementError, PlanError, Problem, first_line
from rlplace.inventory import Node
from rlplace.lifecycle import NodeHealth, ResizeCause
from rlplace.plan import Worker
from rlplace.planner import Resize, SizeChange
from rlplace.ray.group import WorkerGroup, wait_dead
from rlplace.ray.launch import Launcher, answer, apply_rendezvous, apply_resize
from rlplace.ray.port import Cluster
from rlplace.ray.rendezvous import Rendezvous
from rlplace.ray.reserve import Reservation
from rlplace.ray.state import Change, JobState, Master, NodeEvent, ResizedRank, ResizeEvent

log = logging.getLogger(__name__)

#: Told when a shrink or growth of the node watcher's is done (the job at its new size), with its events.
Done = Callable[[tuple[ResizeEvent, ...]], None]

#: How long killed workers may take until Ray reports them dead (their names are free for reuse then).
DEATH_WAIT_S = 10.0


class RankMover:
    """Which workers run on which node rank, and every change of that: takeovers and resizes (see the module
    docstring). Acts on what the job owns (its groups, the reservation, the launcher, the rendezvous) and
    records the outcome in the state; one change at a time."""

    def __init__(
        self,
        cluster: Cluster,
        state: JobState,
        reservation: Reservation,
        rendezvous: Rendezvous,
        launcher: Launcher,
        groups: dict[str, WorkerGroup],
        starters: Mapping[str, Callable[[Worker], Any]],
    ):
        self._cluster = cluster
        self._state = state
        self._reservation = reservation
        self._rendezvous = rendezvous
        self._launcher = launcher
        self._groups = groups  # the Job's own dict: components launched later are seen too
        self._starters = starters  # the Job's too: how to start one more worker of each launched component
        self._lock = cluster.lock()  # a resize, a takeover and a launch never interleave

    @property
    def changing(self) -> Any:
        """The lock every change of which workers run where holds (re-entrant). `Job.launch` holds it too: a takeover
        moves launched groups only, so one that ran while a component's workers were starting would leave them with
        the lost node's rendezvous (found by the explorer, run seed 421110)."""
        return self._lock

    # -- node loss: dropping and moving a rank (rlplace.ray.failover.watcher) -----------------------------

    def workers_on(self, rank: int) -> tuple[str, ...]:
        return tuple(w.name for g in list(self._groups.values()) for w in g.workers if w.node_rank == rank)

    def answers_from(self, rank: int) -> dict[Any, str]:
        return self._answers(self._on(rank))

    def shrink_refusal(self, rank: int) -> str | None:
        if not self._state.plan.elastic:
            return "no component of the job is elastic"
        try:
            planner.shrink_lost_node(self._state.plan, rank)  # the step shrink_lost takes (pure: nothing moves)
        except PlanError as e:
            return str(e)
        return None

    def drop_rank(self, rank: int) -> None:
        with self._lock:
            doomed = [a for _, a in self._on(rank)]
            self._kill(doomed)
            self._reservation.release(rank)
            self._wait_dead(doomed, f"workers of lost node {rank}")

    def _on(self, rank: int) -> list[tuple[Worker, Any]]:
        """(plan row, actor) of every launched worker on node `rank`."""
        return [(w, a) for g in list(self._groups.values()) for w, a in g.pairs() if w.node_rank == rank]

    def move_rank(self, rank: int, node: Node, event: NodeEvent) -> None:
        with self._lock:
            self._check_open()
            self._reservation.reserve_on(rank, node)
            previous, masters = self._state.live.node(rank), self._state.masters()
            self._state.apply(Change(nodes={rank: node}))
            self._launcher.node_changed(rank)  # interpreters are probed on the new node
            relaunched: list[tuple[WorkerGroup, str, Any]] = []
            try:
                for group in list(self._groups.values()):
                    for w in group.workers:
                        if w.node_rank == rank:
                            self._check_open()
                            relaunched.append((group, w.name, self._starters[group.component](w)))
                first = [self._first_call(handle, event) for _, _, handle in relaunched]
                self._cluster.get(first, self._state.timeout_s)
                self._check_open()
            except BaseException as e:
                # Dead before the next try (another spare, the next tick): their names are free only then (found by
                # the explorer: the next spare tried at once was refused the name, and the rank failed).
                self.stop([handle for _, _, handle in relaunched], f"workers relaunched for node {rank}")
                self._reservation.release(rank)
                # Undone: the rank is the lost node's again, and so are the masters chosen on `node` meanwhile;
                # a worker Ray restarted meanwhile read them from the job record: it is told them again.
                moved = self._moved_masters(masters)
                self._state.apply(Change(nodes={rank: previous}, masters=masters))
                self._retell(moved)
                if isinstance(e, PlacementError):
                    raise
                raise PlacementError(f"the workers relaunched on {node.address} did not answer: {e}") from e
            for group, name, handle in relaunched:
                group.replace(name, handle)
            # A component whose rank 0 moved with the rank has a new master: its other workers are told (docs/
            # runtime.md, "Restarts and spares"), so that every worker of it names the same MASTER_ADDR and PORT.
            self._retell(self._moved_masters(masters))

    def _moved_masters(self, before: Mapping[str, Master]) -> list[str]:
        """The components whose master is not what it was `before`."""
        return sorted(c for c, m in self._state.masters().items() if before.get(c) != m)

    def _retell(self, components: Iterable[str]) -> None:
        """Send every running worker of `components` its rendezvous as the state has it now (those relaunched with a
        rank being moved know it already: their rank is still lost meanwhile). An actor runs
        its calls in order: it has it before any call made after this. For a component whose master moved, and
        after a change undone: a worker Ray restarted meanwhile read the job record of the change being tried (its
        constructor's arguments are the first ones, `launch.current`)."""
        for c in components:
            group = self._groups.get(c)
            if group is None or group.in_driver:
                continue
            for w, actor in self._running(group):
                self._cluster.run_on(actor, apply_rendezvous, self._rendezvous.payload(w))

    # -- resizing -----------------------------------------------------------------------------------------

    def resize(self, component: str, n: int, timeout_s: float) -> ResizeEvent:
        """`job.resize`: `component` to `n` workers (see `Job.resize`)."""
        with self._lock:
            self._check_open()
            state = self._state
            size = len(state.planned(component))
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ConfigError(Problem(path="n", value=n, message="the new size must be a whole number >= 0"))
            start = self._cluster.now()
            # The planner decides whether that is a growth or a shrink (a size kept: nothing, or its PlanError
            # when the component is not elastic or a growth has no config to read).
            step = planner.resize(state.spec, state.plan, state.live, component, n, down=self._unusable())
            if not step.changes:
                return self._event(SizeChange(component, size, size, (), ()), ResizeCause.RESIZE, None, 0.0)
            # What growing back aims for from now on is the size asked for last.
            ranges = {**step.plan.elastic, component: dataclasses.replace(step.plan.elastic[component], start=n)}
            step = dataclasses.replace(step, plan=dataclasses.replace(step.plan, elastic=ranges))
            return self._realise(step, ResizeCause.RESIZE, None, start + timeout_s, drain=True)[0]

    def shrink_lost(self, rank: int, done: Done) -> tuple[ResizeEvent, ...]:
        """Node `rank` is lost and no node took it over: shrink every component on it (they are all elastic
        and stay at or above their `min`, else PlanError saying which cannot). Its workers are dropped already.
        `done(events)` runs once the job is at the new size, before calls made meanwhile go on and before the
        survivors' `on_resized` are awaited."""
        with self._lock:
            self._check_open()
            step = planner.shrink_lost_node(self._state.plan, rank)
            deadline = self._cluster.now() + self._state.timeout_s
            return self._realise(step, ResizeCause.NODE_LOST, rank, deadline, drain=False, done=done)

    def grow_back(self, joined: Mapping[int, Node], done: Done) -> tuple[ResizeEvent, ...]:
        """Nodes joined: each serves a rank lost earlier (a replacement or spare) or a new rank. Map them in the
        state, then grow every elastic component below its aim back toward it, as far as the nodes hold;
        `done(events)` as for `shrink_lost`."""
        with self._lock:
            self._check_open()
            state = self._state
            state.apply(Change(nodes=joined, down={r: False for r in joined if r in state.down}))
            for rank in joined:
                self._launcher.node_changed(rank)
            if state.spec is None:
                log.warning("job %s: nodes joined, but a job started from a Plan cannot grow back", state.name)
                done(())
                return ()
            step = planner.grow_back(state.spec, state.plan, state.live, down=self._unusable())
            deadline = self._cluster.now() + state.timeout_s
            return self._realise(step, ResizeCause.GROW_BACK, min(joined), deadline, drain=True, done=done)

    def _unusable(self) -> set[int]:
        """Node ranks growth must not use: lost (waiting, failed) or gone after a shrink."""
        return set(self._state.down) | set(self._state.troubles())

    def _realise(
        self,
        step: Resize,
        cause: ResizeCause,
        node_rank: int | None,
        deadline: float,
        *,
        drain: bool,
        done: Done = lambda events: None,
    ) -> tuple[ResizeEvent, ...]:
        """Make the step true on Ray (see the module docstring); the leader's event first. Raises PlacementError
        with the step undone when it fails before the commit, and after it when an `on_resized` failed."""
        if not step.changes:
            done(())
            return ()
        begun = self._cluster.now()
        state = self._state
        changes = step.changes
        groups = {c.component: self._groups[c.component] for c in changes if c.component in self._groups}
        with ExitStack() as paused:
            for group in groups.values():
                paused.enter_context(group.pause())
            if drain:
                self._drain(groups, deadline)
            before = (state.plan, state.masters())
            started: dict[str, Any] = {}
            try:
                self._check_open()
                if step.reserve:
                    self._reservation.reserve_step(step.reserve, deadline)
                state.apply(Change(plan=step.plan))
                self._rendezvous.renew(
                    [c.component for c in changes], joining=[w.name for c in changes for w in c.added]
                )
                for c in changes:
                    launched = groups.get(c.component)
                    if launched is None or not c.added:
                        continue  # not launched yet: it launches at its new size
                    if not launched.in_driver:
                        self._launcher.check_names(c.added)
                    for w in c.added:
                        started[w.name] = self._starters[c.component](w)
                self._answered(started, deadline)
                self._check_open()
            except BaseException as e:
                self._rendezvous.joined()
                self._kill(list(started.values()))
                self._wait_dead(list(started.values()), "workers started by a failed resize")
                self._reservation.release_bundles(step.reserve)
                state.apply(Change(plan=before[0], masters=before[1]))
                if not state.closed:
                    self._retell(groups)  # a worker Ray restarted meanwhile read the size being tried
                if isinstance(e, (PlacementError, PlanError)) or not isinstance(e, Exception):
                    raise  # the job's own errors as they are; Ctrl-C (KeyboardInterrupt) stays Ctrl-C
                raise PlacementError(f"resizing {changes[0].component} failed, nothing changed: {e}") from e
            self._rendezvous.joined()
            self._commit(step, groups, started)
            seconds = self._cluster.now() - begun
            events = [self._event(c, cause, node_rank, seconds) for c in changes]
            events[0] = dataclasses.replace(events[0], also=tuple(events[1:]))
            told = self._tell(groups, {e.component: e for e in events})  # before any later call
            # recorded while the groups are paused: a call that sees the new size finds the job's events say so
            state.apply(Change(resizes=tuple(events)))
            log.info("rlplace job %s: %s", state.name, "; ".join(map(str, events)))
            done(tuple(events))
        failures = self._awaited(told, deadline)
        if failures:
            lead, why = changes[0].component, "; ".join(failures)
            raise PlacementError(f"{lead} is at its new size ({events[0]}), but on_resized failed: {why}")
        return tuple(events)

    def _commit(self, step: Resize, groups: dict[str, WorkerGroup], started: dict[str, Any]) -> None:
        """Stop the removed workers (their names are free once Ray reports them dead), free their groups, and
        give each launched component its new members."""
        for c in step.changes:
            group = groups.get(c.component)
            if group is None:
                continue
            gone = {w.name for w in c.removed}
            doomed = [a for name, a in group.held().items() if name in gone]
            self._kill(doomed)
            self._wait_dead(doomed, f"removed {c.component} workers")
            group.reshape({w.name: started[w.name] for w in c.added}, sorted(gone))
        self._reservation.release_bundles(step.release)

    def _drain(self, groups: dict[str, WorkerGroup], deadline: float) -> None:
        """Wait until the calls already sent to the groups' workers are done; new calls wait for the resize (the
        groups are paused)."""
        late = self._still_running([p for g in groups.values() for p in self._running(g)], deadline)
        if late:
            names = ", ".join(late)
            raise PlacementError(
                f"resize not started: calls made before it still run on {names} at its timeout_s; nothing was changed "
                "(a call started after resize() sees the new size; the ones before it finish at the old one)"
            )

    def _answered(self, started: dict[str, Any], deadline: float) -> None:
        """Every new worker has run its constructor; else PlacementError naming it (the caller undoes the step)."""
        refs = {self._first_call(h, None): name for name, h in started.items()}
        ready, late = self._cluster.wait(list(refs), max(0.0, deadline - self._cluster.now()))
        if late:
            names = ", ".join(sorted(refs[r] for r in late))
            raise PlacementError(f"the new workers {names} did not start within timeout_s; nothing was changed")
        for ref in ready:
            try:
                self._cluster.get(ref)
            except Exception as e:  # the constructor raised, or the worker died starting
                raise PlacementError(f"new worker {refs[ref]} did not start: {first_line(e)}") from e

    def _tell(self, groups: dict[str, WorkerGroup], events: dict[str, ResizeEvent]) -> dict[Any, str]:
        """Send every worker of a changed component its new rank and rendezvous (the new ones too: where Ray
        placed the component, they agree on it with the others now), then its `on_resized(event)` (an actor runs
        its calls in order: before any call made after the resize); ref -> worker name."""
        refs: dict[Any, str] = {}
        for c, group in groups.items():
            for w, actor in self._running(group):
                payload = None if group.in_driver else self._rendezvous.payload(w)  # new workers too: see renew
                refs[self._cluster.run_on(actor, apply_resize, payload, events[c])] = w.name
        return refs

    def _running(self, group: WorkerGroup) -> list[tuple[Worker, Any]]:
        """(plan row, actor) of the group's workers that run: not those on a rank lost or failed, gone with their
        node (the job killed them; relaunched by a takeover, they start with the state's rendezvous then; found
        by the explorer: a resize told them, and failed)."""
        healthy = (NodeHealth.OK, NodeHealth.DRAINING)
        return [(w, a) for w, a in group.pairs() if self._state.health(w.node_rank) in healthy]

    # -- helpers ---------------------------------------------------------------------------------------------

    def stop(self, handles: list[Any], what: str) -> None:
        """Kill `handles` and wait until Ray reports them dead (their names are free then)."""
        self._kill(handles)
        self._wait_dead(handles, what)

    def _kill(self, handles: Iterable[Any]) -> None:
        for handle in handles:
            if self._cluster.is_actor(handle):
                try:
                    self._cluster.kill(handle)
                except Exception as e:  # already dead
                    log.debug("kill %s: %s", handle, e)

    def _wait_dead(self, handles: Iterable[Any], what: str) -> None:
        ids = [self._cluster.actor_id(h) for h in handles if self._cluster.is_actor(h)]
        if wait_dead(self._cluster, ids, DEATH_WAIT_S):
            log.warning("job %s: %s not reported dead after %.0f s", self._state.name, what, DEATH_WAIT_S)

    def _check_open(self) -> None:
        if self._state.closed:
            raise PlacementError(f"job {self._state.name} is shut down")

    def _answers(self, pairs: Iterable[tuple[Worker, Any]]) -> dict[Any, str]:
        """A no-op sent to each of these workers now, by its answer's reference: an actor runs its calls in order,
        so it answers once the calls already sent to it are done."""
        return {self._cluster.run_on(a, answer): w.name for w, a in pairs}

    def _still_running(self, pairs: Iterable[tuple[Worker, Any]], deadline: float) -> list[str]:
        """Wait until the calls already sent to these workers are done, at most until `deadline` (monotonic); the
        workers still busy then."""
        pending = self._answers(pairs)
        if not pending:
            return []
        _, late = self._cluster.wait(list(pending), max(0.0, deadline - self._cluster.now()))
        return sorted(pending[r] for r in late)

    def _awaited(self, refs: dict[Any, str], deadline: float) -> list[str]:
        """Wait for the `on_resized` calls (at least a second); what failed or did not finish, by worker name."""
        if not refs:
            return []
        ready, late = self._cluster.wait(list(refs), max(1.0, deadline - self._cluster.now()))
        failures = [f"{refs[r]} did not finish on_resized within timeout_s" for r in late]
        for ref in ready:
            try:
                self._cluster.get(ref)
            except Exception as e:  # on_resized raised, or the worker died
                failures.append(f"{refs[ref]}: {first_line(e)}")
        return failures

    def _first_call(self, handle: Any, event: NodeEvent | None) -> Any:
        """The first call a relaunched worker gets: `on_replaced(event)` if its class defines it (to reload a
        checkpoint), else a no-op that returns once the worker is up. A new worker of a resize (`event` None)
        gets the no-op: its `on_resized` comes with everyone's."""
        if event is not None and hasattr(handle, "on_replaced"):
            return self._cluster.call(handle, "on_replaced", event)
        return self._cluster.run_on(handle, answer)

    def _event(self, change: SizeChange, cause: ResizeCause, node_rank: int | None, seconds: float) -> ResizeEvent:
        """The event of one component's change, at the cluster's wall clock (the simulation's is virtual)."""
        return ResizeEvent(
            change.component,
            change.old_size,
            change.new_size,
            tuple(_rank(w) for w in change.added),
            tuple(_rank(w) for w in change.removed),
            dict(change.renumbered),
            cause,
            self._cluster.wall(),
            seconds,
            node_rank,
        )


def _rank(w: Worker) -> ResizedRank:
    return ResizedRank(w.rank, w.name, w.node_rank, w.gpus)
