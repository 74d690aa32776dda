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


def _keep_groups_when_workers_go() -> contextlib.AbstractContextManager[None]:
    """Forget to remove the placement groups of workers that go (a lost node's, a shrink's)."""
    from rlplace.ray.reserve import Reservation

    stack = contextlib.ExitStack()
    stack.enter_context(_patched(Reservation, "release_bundles", lambda self, bundles: None))
    stack.enter_context(_patched(Reservation, "release", lambda self, rank: None))
    return stack


def _skip_renumbering() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.failover.mover import RankMover

    return _patched(RankMover, "_tell", lambda self, groups, events: {})


def _drop_call_in_flight() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.group import WorkerGroup

    return _patched(WorkerGroup, "_rerun", lambda self, ref, worker, method: self.cluster.put(None))


def _keep_record_at_shutdown() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.records import RecordWriter

    return _patched(RecordWriter, "delete", lambda self: None)


def _ignore_drains() -> contextlib.AbstractContextManager[None]:
    """Read the drain notices and do nothing with them: the node's workers are lost at the deadline."""
    from rlplace.ray.failover.watcher import NodeWatcher

    return _patched(NodeWatcher, "_drained", lambda self, rank, deadline, usable: None)


def _never_declare_loss() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.failover.watcher import NodeWatcher

    return _patched(NodeWatcher, "_declare", lambda self, rank, why, notice=None: None)


#: name -> what injects it; the first six were the explorer's own, the rest issue 35's (docs/ray.md's table).
MUTATIONS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "keep-groups-when-workers-go": _keep_groups_when_workers_go,
    "skip-renumbering": _skip_renumbering,
    "drop-call-in-flight": _drop_call_in_flight,
    "keep-record-at-shutdown": _keep_record_at_shutdown,
    "never-declare-loss": _never_declare_loss,
    "ignore-drains": _ignore_drains,
}
