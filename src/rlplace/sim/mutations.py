"""Mutations: realistic bugs written into the control plane, one at a time, that the explorer must catch (the proof
that it can fail: docs/ray.md, "The simulation"). `scripts/explore.py --mutate NAME` runs the explorer with one.

Each is a context manager that patches one service while it is open and puts it back after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def _patched(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _keep_groups_when_workers_go() -> contextlib.AbstractContextManager[Any]:
    """Forget to remove the placement groups of workers that go (a lost node's, a shrink's)."""
    from rlplace.ray.reserve import Reservation

    stack = contextlib.ExitStack()
    stack.enter_context(_patched(Reservation, "release_bundles", lambda self, bundles: None))
    stack.enter_context(_patched(Reservation, "release", lambda self, rank: None))
    return stack


def _skip_renumbering() -> contextlib.AbstractContextManager[Any]:
    from rlplace.ray.failover.mover import RankMover

    return _patched(RankMover, "_tell", lambda self, groups, events: {})


def _drop_call_in_flight() -> contextlib.AbstractContextManager[Any]:
    from rlplace.ray.group import WorkerGroup

    return _patched(WorkerGroup, "_rerun", lambda self, ref, worker, method: self.cluster.put(None))


def _keep_record_at_shutdown() -> contextlib.AbstractContextManager[Any]:
    from rlplace.ray.records import RecordWriter

    return _patched(RecordWriter, "delete", lambda self: None)


def _ignore_drains() -> contextlib.AbstractContextManager[Any]:
    """Read the drain notices and do nothing with them: the node's workers are lost at the deadline."""
    from rlplace.ray.failover.watcher import NodeWatcher

    return _patched(NodeWatcher, "_drained", lambda self, rank, deadline, usable: None)


def _never_declare_loss() -> contextlib.AbstractContextManager[Any]:
    from rlplace.ray.failover.watcher import NodeWatcher

    return _patched(NodeWatcher, "_declare", lambda self, rank, why, **where: None)


# -- issue 35's ten: each a bug of a kind the explorer had not been shown (docs/ray.md's table) -------------------


def _spare_farthest_first() -> contextlib.AbstractContextManager[Any]:
    """A wrong failure domain: a lost node's workers go to the spare farthest from it (the order reversed)."""
    from rlplace.ray.failover import rules

    nearest_first = rules.spare_order
    return _patched(rules, "spare_order", lambda lost, spares, levels: nearest_first(lost, spares, levels)[::-1])


def _rerun_without_waiting() -> contextlib.AbstractContextManager[Any]:
    """A race: a call in flight on a lost node is sent again at once, before the takeover is done (to the worker
    the group still holds: the one on the lost node, which the job has asked to kill)."""
    from rlplace.ray.group import WorkerGroup

    get_one = WorkerGroup._get_one

    def hasty(self: Any, *args: Any) -> Any:
        self._usable = lambda rank, deadline: True  # the instance's, for this call only
        try:
            return get_one(self, *args)
        finally:
            del self._usable

    return _patched(WorkerGroup, "_get_one", hasty)


def _retry_late_answers() -> contextlib.AbstractContextManager[Any]:
    """A doubled effect: a call whose answer is late (its first slice of waiting passed) is sent again to the same
    worker, and the second answer taken."""
    from rlplace.ray.group import _SLICE_S, WorkerGroup
    from rlplace.ray.port import CallTimedOut

    wait = WorkerGroup._wait

    def impatient(self: Any, ref: Any, worker: Any, method: str, timeout_s: Any, deadline: Any) -> Any:
        try:
            return self.cluster.get(ref, _SLICE_S)
        except CallTimedOut:
            call = self._calls.get(self.cluster.result_key(ref))
            if call is not None and call.sent:
                with self._sending():
                    ref = self._submit(worker, call.method, call.args, call.kwargs)
            return wait(self, ref, worker, method, timeout_s, deadline)

    return _patched(WorkerGroup, "_wait", impatient)


def _stale_serving_set() -> contextlib.AbstractContextManager[Any]:
    """A stale view: the watcher keeps the nodes serving the job as they were at its first takeover, so a spare
    that took a rank over since looks free to take another."""
    from rlplace.ray.failover import watcher
    from rlplace.ray.failover.rules import candidates

    def takers(self: Any, rank: int, lost: Any, raw: list, refusals: dict) -> list:
        alive = [n for n in raw if n.get("Alive")]
        serving = self.__dict__.setdefault("_seen_serving", {str(n.node_id) for n in self._state.live.nodes})
        return candidates(
            rank,
            lost,
            alive,
            serving=serving,
            demand=self._reserved.demand(rank),
            free=self._cluster.free_resources(),
            levels=self._state.levels,
            refusals=refusals,
        )

    return _patched(watcher.NodeWatcher, "_takers", takers)


def _group_rank_from_one() -> contextlib.AbstractContextManager[Any]:
    """An off-by-one: GROUP_RANK counts a component's nodes from 1."""
    from rlplace.ray.layout import Layout

    of = Layout.of

    def shifted(cls: type[Layout], node_ranks: Any) -> Layout | None:
        layout = of(node_ranks)
        if layout is None:
            return None
        return Layout(layout.local_rank, {n: (count, g + 1) for n, (count, g) in layout.per_node.items()})

    return _patched(Layout, "of", classmethod(shifted))


def _keep_group_of_failed_takeover() -> contextlib.AbstractContextManager[Any]:
    """A leak: a takeover undone (its workers did not start on the spare) keeps the placement group it reserved
    there."""
    from rlplace.ray.failover.mover import RankMover

    move = RankMover.move_rank

    def leaky(self: Any, rank: int, node: Any, event: Any) -> None:
        self._reservation.release = lambda rank: None  # the instance's, for this takeover only
        try:
            move(self, rank, node, event)
        finally:
            del self._reservation.release

    return _patched(RankMover, "move_rank", leaky)


def _masters_unrecorded() -> contextlib.AbstractContextManager[Any]:
    """A lost effect: a change of masters alone is made in the state without telling its subscribers (the job
    record keeps the old master: other jobs may take its port, `rlplace status` shows the old one)."""
    from rlplace.ray.state import Change, JobState

    apply = JobState.apply

    def quiet(self: Any, change: Change) -> None:
        if change.masters and change == Change(masters=change.masters):
            with self.changed:
                self._masters.update(change.masters)
                self.changed.notify_all()
            return
        apply(self, change)

    return _patched(JobState, "apply", quiet)


def _no_lock_between_changes() -> contextlib.AbstractContextManager[Any]:
    """A race: the mover's lock is left out, so a takeover or a shrink can run inside a resize (one waiting for
    its new workers) and the other way round."""
    from rlplace.ray.failover.mover import RankMover

    init = RankMover.__init__

    def unlocked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._lock = contextlib.nullcontext()

    return _patched(RankMover, "__init__", unlocked)


def _keep_fillers() -> contextlib.AbstractContextManager[Any]:
    """A leak: the placement groups that keep a node's idle GPUs aside while the plan's groups are placed are never
    removed (they hold those GPUs as long as the job runs, and stay after it)."""
    from rlplace.ray.reserve import Reservation

    create, remove = Reservation._create, Reservation._remove

    def create_kept(self: Any, bundles: list, node: Any, kind: str, step: int = 0) -> Any:
        pg = create(self, bundles, node, kind, step)
        if kind == "filler":
            self.__dict__.setdefault("_kept", set()).add(id(pg))
        return pg

    def remove_but_fillers(self: Any, pg: Any) -> None:
        if id(pg) not in self.__dict__.get("_kept", ()):
            remove(self, pg)
        elif pg in self._created:
            self._created.remove(pg)  # forgotten: never removed

    stack = contextlib.ExitStack()
    stack.enter_context(_patched(Reservation, "_create", create_kept))
    stack.enter_context(_patched(Reservation, "_remove", remove_but_fillers))
    return stack


def _tell_the_leader_only() -> contextlib.AbstractContextManager[Any]:
    """A lost effect: a resize tells its new ranks to the component asked for, not to those that change with it
    (an env following its eval, buffer shards following train)."""
    from rlplace.ray.failover.mover import RankMover

    tell = RankMover._tell

    def leader_only(self: Any, groups: dict, events: dict) -> dict:
        lead = next(iter(events))
        return tell(self, {c: g for c, g in groups.items() if c == lead}, events)

    return _patched(RankMover, "_tell", leader_only)


def _status_hides_spares() -> contextlib.AbstractContextManager[Any]:
    """A stale view in `rlplace status`: a worker on a spare is shown on the spare's address, not under the rank
    the spare serves."""
    from rlplace.ray import status
    from rlplace.ray.nodes import is_spare

    names = status._node_names

    def plain(raw_nodes: list, records: list) -> dict[str, str]:
        spares = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in raw_nodes if is_spare(n)}
        return {**names(raw_nodes, records), **spares}

    stack = contextlib.ExitStack()
    stack.enter_context(_patched(status, "_node_names", plain))
    stack.enter_context(_patched(status, "_spares_by_job", lambda raw_nodes, records: {}))
    return stack


#: name -> what injects it; the first six were the explorer's own, the rest issue 35's (docs/ray.md's table).
MUTATIONS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "keep-groups-when-workers-go": _keep_groups_when_workers_go,
    "skip-renumbering": _skip_renumbering,
    "drop-call-in-flight": _drop_call_in_flight,
    "keep-record-at-shutdown": _keep_record_at_shutdown,
    "never-declare-loss": _never_declare_loss,
    "ignore-drains": _ignore_drains,
    "spare-farthest-first": _spare_farthest_first,
    "rerun-without-waiting": _rerun_without_waiting,
    "tell-the-leader-only": _tell_the_leader_only,
    "retry-late-answers": _retry_late_answers,
    "stale-serving-set": _stale_serving_set,
    "group-rank-from-one": _group_rank_from_one,
    "keep-group-of-failed-takeover": _keep_group_of_failed_takeover,
    "masters-unrecorded": _masters_unrecorded,
    "no-lock-between-changes": _no_lock_between_changes,
    "keep-fillers": _keep_fillers,
    "status-hides-spares": _status_hides_spares,
}
