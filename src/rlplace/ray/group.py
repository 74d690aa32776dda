"""A WorkerGroup: the actors of one component, called together or by rank.

A dead worker surfaces as a PlacementError naming the worker and its node (not a bare Ray
traceback), so a job stops with a message a user can act on. A worker whose node is lost is different:
calls on it wait (at most until the job's replacement window ends) while the job moves it to a spare or a
replacement node (`rlplace.ray.failover.watcher`), and are then re-run on the new worker, or raise NodeLostError.
To re-run a call the group remembers what it sent (`rlplace.ray.calls`) until the result is fetched through
`get()`. When the job shrinks an elastic component instead (no spare, docs/guide.md "Elastic components"), the
calls on the removed workers raise RanksRemovedError carrying the other calls' results. A resize changes the
members only between calls being sent (`rlplace.ray.gate`); waiting on a node's health is the watcher's
(`NodeWatch`); starting a worker again is the job's (`rlplace.ray.failover.mover`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from rlplace.errors import NodeLostError, PlacementError, RanksRemovedError, first_line
from rlplace.lifecycle import NodeHealth, WorkerState
from rlplace.plan import Worker
from rlplace.ray.calls import Call, CallMemory
from rlplace.ray.gate import ResizeGate
from rlplace.ray.port import CallTimedOut, Cluster, WorkerDied
from rlplace.ray.ray_port import RAY
from rlplace.ray.worker import WorkerPlacement, placement

#: How long one wait on a result lasts before the group looks whether the worker's node was lost meanwhile.
_SLICE_S = 0.25


def _own_placement(_instance: object) -> WorkerPlacement:
    """Runs inside the actor through `__ray_call__`, so worker classes need no method for it."""
    return placement()


class NodeWatch(Protocol):
    """What a group asks about the nodes of its workers (the job's node watcher answers; in memory)."""

    def health(self, rank: int | None) -> NodeHealth:
        """The health of node rank `rank` (None: a worker Ray placed itself: OK)."""

    def check(self, rank: int) -> bool:
        """A call on node `rank` just failed: is the node lost?"""

    def wait_usable(self, rank: int | None, deadline: float | None = None) -> bool:
        """Wait while node `rank` is lost; False when `deadline` came first; NodeLostError past the window."""


class Rows(Protocol):
    """Where a group reads its workers' plan rows (the job's state: one owner for who the members are)."""

    def workers(self, component: str) -> tuple[Worker, ...]:
        """The workers `component` has now, in rank order."""


class _Untroubled:
    """The health of a group that watches no node (a copy shipped to a worker, or no watcher): every node is ok,
    and a failed call is a dead worker."""

    def health(self, rank: int | None) -> NodeHealth:
        return NodeHealth.OK

    def check(self, rank: int) -> bool:
        return False

    def wait_usable(self, rank: int | None, deadline: float | None = None) -> bool:
        return True


_UNTROUBLED = _Untroubled()


class _NodeDown(Exception):
    """The node of the worker being waited on was declared lost while waiting."""


class _Removed(Exception):
    """The worker a call went to was removed by a shrink before the call finished."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class WorkerGroup:
    """All workers of one component; `actors[i]` and `workers[i]` are rank i.

    `cluster` is the port the calls go through; `health` is the job's node watcher (None: calls on a lost node
    fail like any dead worker). `rows` is the job's state: the group holds the actors (by worker name) and reads
    the workers' plan rows from it, so a resize's renumbering is the state's alone; the members are the state's
    workers the group holds an actor for (a resize's new workers join at its commit, `reshape`, inside `pause`).
    Without `rows` (a copy shipped to a worker, a group built by hand) the rows given stay the members'. Calls are
    made to workers by name, so a call in flight keeps its worker through renumbering.
    """

    def __init__(
        self,
        component: str,
        workers: Sequence[Worker],
        actors: Sequence[Any],
        *,
        cluster: Cluster = RAY,
        health: NodeWatch | None = None,
        rows: Rows | None = None,
    ):
        self.component = component
        self.cluster = cluster
        self._health: NodeWatch = health or _UNTROUBLED
        self._rows = rows
        self._own_rows = tuple(workers)  # the members' rows when there is no `rows` to read
        self._actors: dict[str, Any] = {w.name: a for w, a in zip(workers, actors, strict=True)}
        self._calls = CallMemory()
        self._gate = ResizeGate()
        self._seen: tuple[tuple[Worker, ...], tuple[Worker, ...], dict[str, int]] | None = None  # rows -> members

    def __len__(self) -> int:
        return len(self.workers)

    @property
    def workers(self) -> tuple[Worker, ...]:
        """The members' plan rows, in rank order."""
        return self._view()[0]

    @property
    def actors(self) -> list[Any]:
        """The members' actors, in rank order."""
        with self._gate.lock:
            return [self._actors[w.name] for w in self._view()[0]]

    def _view(self) -> tuple[tuple[Worker, ...], dict[str, int]]:
        """(members, worker name -> rank): the rows that have an actor here, recomputed when the rows changed."""
        with self._gate.lock:
            rows = self._own_rows if self._rows is None else self._rows.workers(self.component)
            if self._seen is None or self._seen[0] is not rows:
                members = tuple(w for w in rows if w.name in self._actors)
                self._seen = (rows, members, {w.name: i for i, w in enumerate(members)})
            return self._seen[1], self._seen[2]

    @property
    def in_driver(self) -> bool:
        """Whether the workers are plain objects in the driver (`remote_<component>: false`): their calls run
        to their end when made, so calls that wait for each other must not be made one after another."""
        return False

    @property
    def actor_ids(self) -> tuple[str, ...]:
        """The workers' actor ids in rank order (a driver-local worker has one too): who they are right now,
        so a rank relaunched after a node loss counts as a new member."""
        return tuple(self.cluster.actor_id(a) for a in self.actors)

    def __getstate__(self) -> dict[str, Any]:
        """A copy shipped to a worker (inside a ShardRouter, say) calls the actors but watches no node."""
        members = self.workers
        state = {**self.__dict__, "_health": _UNTROUBLED, "_rows": None, "_own_rows": members, "_seen": None}
        state["_actors"] = {w.name: self._actors[w.name] for w in members}
        del state["_calls"], state["_gate"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._calls = CallMemory()
        self._gate = ResizeGate()

    def replace(self, name: str, actor: Any) -> None:
        """Worker `name` runs as `actor` from now on (it was relaunched after its node was lost)."""
        with self._gate.lock:
            self._actors[name] = actor

    def reshape(self, added: Mapping[str, Any], removed: Sequence[str]) -> None:
        """The component was resized (the rows already say so): the `added` workers (name -> actor) are members
        now, the `removed` ones not; the calls still remembered for those raise RanksRemovedError from `get()`
        unless they finished."""
        gone = set(removed)
        with self._gate.lock:
            for name in gone:
                self._actors.pop(name, None)
            self._actors.update(added)
            self._seen = None
        self._calls.removed(gone)

    def held(self) -> dict[str, Any]:
        """Worker name -> actor, for every actor the group holds: in a resize, until its commit (`reshape`), also
        those of the workers the rows no longer name."""
        with self._gate.lock:
            return dict(self._actors)

    def pairs(self) -> list[tuple[Worker, Any]]:
        """(plan row, actor) of every worker, in rank order, as one consistent snapshot."""
        with self._gate.lock:
            return [(w, self._actors[w.name]) for w in self._view()[0]]

    def pause(self) -> AbstractContextManager[None]:
        """Calls made meanwhile wait until the block ends (a resize changes the members in it); calls being sent
        when it starts are sent first."""
        return self._gate.pause()

    def __repr__(self) -> str:
        return f"WorkerGroup({self.component!r}, {len(self)} workers)"

    def call_async(self, method: str, *args: Any, rank: int | None = None, **kwargs: Any) -> Any:
        """Start `method` on every worker (list of refs, rank order) or on worker `rank` (one ref).

        A worker whose node is lost gets its call once a spare or replacement took over (this waits, at
        most until the replacement window ends); workers on healthy nodes get theirs first. A call made while
        the component is being resized waits for the resize and goes to the workers there are then.
        """
        if rank is not None:
            worker = self._actor_row(rank)
            self._usable(worker.node_rank, None)
            with self._sending():
                return self._submit(worker, method, args, kwargs)
        return self._fan_out(method, lambda _: (args, kwargs))

    def call(
        self, method: str, *args: Any, rank: int | None = None, timeout_s: float | None = None, **kwargs: Any
    ) -> Any:
        """Run `method` on every worker and return the results in rank order (or one result for `rank`)."""
        refs = self.call_async(method, *args, rank=rank, **kwargs)
        if rank is not None:
            return self.get([refs], method, timeout_s, ranks=[rank])[0]
        return self.get(refs, method, timeout_s)

    def call_sharded(
        self, method: str, *args: Sequence[Any], timeout_s: float | None = None, **kwargs: Sequence[Any]
    ) -> list:
        """Rank i gets item i of every argument (each a sequence with one item per worker)."""
        members = self._members()  # checked again where the calls are sent (a resize may come in between)
        for name, value in [*((f"argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]:
            if len(value) != len(members):
                raise ValueError(f"{name} has {len(value)} shards for {len(members)} {self.component} workers")
        refs = self._fan_out(method, lambda i: (tuple(a[i] for a in args), {k: v[i] for k, v in kwargs.items()}))
        return self.get(refs, method, timeout_s)

    def get(self, refs: list, method: str = "call", timeout_s: float | None = None, ranks: Sequence[int] = ()) -> list:
        """The results of one ref per rank (`ranks`, default all in order); a dead or silent worker becomes a
        PlacementError that names it. Refs are awaited one by one so the failing rank is known. A call whose
        worker's node was lost is re-run on the worker that took over (or raises NodeLostError); calls whose
        workers a shrink removed raise RanksRemovedError, with the other calls' results, once those are in."""
        deadline = None if timeout_s is None else self.cluster.now() + timeout_s
        results, removed = [], []
        for rank, ref in zip(ranks or range(len(refs)), refs, strict=True):
            try:
                results.append(self._get_one(rank, ref, method, timeout_s, deadline))
            except _Removed as gone:
                removed.append(gone.name)
        if removed:
            raise RanksRemovedError(
                f"{self.component}: {', '.join(removed)} left the component before {method}() finished there (its "
                f"node was lost and the component shrank to {len(self)} worker(s)); the other {len(results)} "
                "call(s) finished: their results are on this error's `results`. Redo the step at the new size",
                component=self.component,
                removed=tuple(removed),
                results=results,
            )
        return results

    # -- one call, through node losses and resizes ------------------------------------------------------------

    def _members(self) -> tuple[Worker, ...]:
        """The workers now (after any resize in progress)."""
        with self._gate.open():
            return self.workers

    @contextmanager
    def _sending(self) -> Iterator[tuple[Worker, ...]]:
        """While calls are being sent: no resize changes the members (`ResizeGate.sending`). Yields them."""
        with self._gate.sending():
            yield self.workers

    def _fan_out(self, method: str, arguments: Callable[[int], tuple[tuple, dict]]) -> list:
        """One call per worker (`arguments(i)` for rank i), all sent to the same members: those on healthy
        nodes at once, the others once their node is usable again."""
        with self._sending() as members:
            refs = {
                i: self._submit(w, method, *arguments(i))
                for i, w in enumerate(members)
                if self._health.health(w.node_rank) == NodeHealth.OK
            }
        for i, w in enumerate(members):
            if i not in refs:
                self._usable(w.node_rank, None)
                with self._sending():
                    refs[i] = self._submit(w, method, *arguments(i))
        return [refs[i] for i in range(len(members))]

    def _submit(self, worker: Worker, method: str, args: tuple, kwargs: dict) -> Any:
        """Send one call to `worker` (by name: its rank may have changed). Inside `_sending` only."""
        with self._gate.lock:
            actor = self._actors.get(worker.name) if worker.name in self._view()[1] else None
        if actor is None:  # removed by a shrink while the call waited for its node: it never runs
            ref = self.cluster.put(None)
            call = Call(worker.name, method, args, kwargs, "", worker.node_rank, removed=True, sent=False)
        else:
            ref = self._send(actor, method, args, kwargs)
            call = Call(worker.name, method, args, kwargs, self.cluster.actor_id(actor), worker.node_rank)
        self._calls.remember(self.cluster.result_key(ref), call)
        return ref

    def _send(self, actor: Any, method: str, args: tuple, kwargs: dict) -> Any:
        """One call on the port: `__ray_call__` (run a function on the instance) is the port's `run_on`."""
        if method == "__ray_call__":
            return self.cluster.run_on(actor, *args, **kwargs)
        return self.cluster.call(actor, method, *args, **kwargs)

    def _get_one(self, rank: int, ref: Any, method: str, timeout_s: float | None, deadline: float | None) -> Any:
        key = self.cluster.result_key
        call = self._calls.get(key(ref))
        worker = self._worker_of(call, rank)
        while True:
            if call is not None and not call.sent:
                self._calls.forget(key(ref))
                raise _Removed(call.name)
            try:
                value = self._wait(ref, worker, method, timeout_s, deadline)
            except _NodeDown:
                pass
            except WorkerDied as e:
                moved = call is not None and (call.removed or self._replaced(call))
                if not moved and not self._node_lost(worker.node_rank):
                    self._calls.forget(key(ref))
                    raise PlacementError(
                        f"worker {worker.name} on node {worker.node_rank} died during {method}(): {first_line(e)}"
                    ) from e
            else:
                self._calls.forget(key(ref))
                return value
            if not self._usable(worker.node_rank, deadline):
                raise PlacementError(
                    f"worker {worker.name} did not finish {method}() within {timeout_s:g} s (its node "
                    f"{worker.node_rank} was lost and no spare or replacement took over yet)"
                )
            if call is not None and call.removed:
                self._calls.forget(key(ref))
                raise _Removed(call.name)
            ref = self._rerun(ref, worker, method)
            call = self._calls.get(key(ref))

    def _worker_of(self, call: Call | None, rank: int) -> Worker:
        """The worker a call went to: by name (its rank may have changed since), else the one at `rank`."""
        members, rank_of = self._view()
        at = rank_of.get(call.name) if call is not None else rank
        if at is not None and 0 <= at < len(members):
            return members[at]
        assert call is not None, f"{self.component} has ranks 0-{len(members) - 1}, not {rank}"
        return Worker(self.component, rank, 0, call.node_rank, (), 0.0, 0.0, None, actor_name=call.name)

    def _wait(self, ref: Any, worker: Worker, method: str, timeout_s: float | None, deadline: float | None) -> Any:
        """The result of `ref`, fetched in slices, so a loss of the worker's node is noticed while waiting (a
        draining node is still up: its calls may finish there)."""
        while True:
            left = None if deadline is None else max(0.0, deadline - self.cluster.now())
            try:
                return self.cluster.get(ref, _SLICE_S if left is None else min(_SLICE_S, left))
            except CallTimedOut as e:
                if self._health.health(worker.node_rank) not in (NodeHealth.OK, NodeHealth.DRAINING):
                    return self._answer_in(ref, e)
                if left is not None and left <= _SLICE_S:
                    raise PlacementError(
                        f"worker {worker.name} did not finish {method}() within {timeout_s:g} s"
                    ) from e

    def _answer_in(self, ref: Any, timed_out: CallTimedOut) -> Any:
        """The worker's node was declared lost while this thread waited: the answer may have come in before (a call
        that finished on a draining node, whose small results live with the caller); running it again would run it
        twice. _NodeDown when it did not come in."""
        try:
            return self.cluster.get(ref, 0.0)
        except (CallTimedOut, WorkerDied):
            raise _NodeDown from timed_out

    def _rerun(self, ref: Any, worker: Worker, method: str) -> Any:
        """The worker was replaced: send the call that `ref` stood for to the new worker."""
        call = self._calls.forget(self.cluster.result_key(ref))
        if call is None:
            raise NodeLostError(
                f"worker {worker.name} was moved off lost node {worker.node_rank}, but its call {method}() was not "
                "made through this WorkerGroup, so it cannot be re-run: call it again",
                node_rank=worker.node_rank if worker.node_rank is not None else -1,
                workers=(worker.name,),
            )
        self._usable(worker.node_rank, None)
        with self._sending():
            return self._submit(worker, call.method, call.args, call.kwargs)

    def _replaced(self, call: Call) -> bool:
        """Was the call sent to an earlier incarnation of its worker (since moved off a lost node)?"""
        with self._gate.lock:
            actor = self._actors.get(call.name) if call.name in self._view()[1] else None
            return actor is not None and self.cluster.actor_id(actor) != call.actor

    def _node_lost(self, node_rank: int | None) -> bool:
        return node_rank is not None and self._health.check(node_rank)

    def _usable(self, node_rank: int | None, deadline: float | None) -> bool:
        """Wait while the node is lost; False if `deadline` came first (NodeLostError past the window)."""
        return self._health.health(node_rank) == NodeHealth.OK or self._health.wait_usable(node_rank, deadline)

    def placements(self, timeout_s: float | None = 60) -> list[WorkerPlacement]:
        """Each worker's own view of its placement (no method needed on the worker class)."""
        return self.get(self.placements_async(), "placement", timeout_s)

    def placements_async(self) -> list:
        """Refs to each worker's placement, to gather several groups at once."""
        return self.call_async("__ray_call__", _own_placement)

    def kill(self, rank: int, *, restart: bool = False, timeout_s: float = 10.0) -> None:
        """Kill worker `rank`; with `restart` Ray restarts it in its bundle if max_restarts allows.

        A kill only sends the request: a call made right after it can still run on the old process.
        Without `restart` this returns once the GCS reports the actor dead, so the next call fails.
        """
        actor = self._actor(rank)
        self.cluster.kill(actor, restart=restart)
        if not restart and wait_dead(self.cluster, [self.cluster.actor_id(actor)], timeout_s):
            raise PlacementError(f"worker {self.workers[rank].name} was killed but is not dead after {timeout_s:g} s")

    def _actor_row(self, rank: int) -> Worker:
        with self._gate.open():
            self._actor(rank)
            return self.workers[rank]

    def _actor(self, rank: int) -> Any:
        with self._gate.lock:
            members = self.workers
            if not 0 <= rank < len(members):
                raise IndexError(f"{self.component} has ranks 0-{len(members) - 1}, not {rank}")
            return self._actors[members[rank].name]


def wait_dead(cluster: Cluster, actor_ids: Sequence[str], timeout_s: float) -> set[str]:
    """Poll the actor table until every actor in `actor_ids` is DEAD; return those still not dead."""
    left = set(actor_ids)
    deadline = cluster.now() + timeout_s
    while left:
        table = cluster.actor_table()
        left = {i for i in left if table.get(i, {}).get("State", WorkerState.DEAD) != WorkerState.DEAD}
        if not left or cluster.now() >= deadline:
            break
        cluster.sleep(0.05)
    return left
