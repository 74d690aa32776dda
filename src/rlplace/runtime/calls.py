"""Calling methods on a component's workers, and turning a dead worker into an error that names it.

Everything in `rlplace.runtime` talks to workers through the two attributes below, which the Ray layer's
WorkerGroup has; tests may pass any object that has them. A worker that dies (its process killed, its
node lost) surfaces from Ray as `ActorDiedError`/`ActorUnavailableError`; the user must learn *which*
worker on *which* node, not read a Ray traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import ray
from ray.exceptions import RayActorError

from rlplace.errors import PlacementError
from rlplace.plan import Worker


class Group(Protocol):
    """The slice of a WorkerGroup the runtime needs: actor handles and their plan entries, in rank order."""

    @property
    def actors(self) -> Sequence[Any]: ...

    @property
    def workers(self) -> Sequence[Worker]: ...


def describe(worker: Worker) -> str:
    """`worker rlplace:train:1 on node 2` (or `unpinned` when the plan left the node to Ray)."""
    where = f"node {worker.node_rank}" if worker.node_rank is not None else "an unpinned node"
    return f"worker {worker.name} on {where}"


def call_defined(group: Group, method: str, *args: Any, **kwargs: Any) -> tuple[list[int], list[Any]]:
    """Call `method` on every worker of `group` that defines it; return (ranks called, results).

    Workers whose class lacks the method are skipped, not failed: hooks are optional (spec "Offload
    Support"). All calls run in parallel; the first dead worker raises `PlacementError` naming it.
    """
    called = [(w, a) for w, a in zip(group.workers, group.actors, strict=True) if hasattr(a, method)]
    refs = [getattr(a, method).remote(*args, **kwargs) for _, a in called]
    return [w.rank for w, _ in called], gather(refs, called)


def gather(refs: Sequence[ray.ObjectRef], calls: Sequence[tuple[Worker, Any]]) -> list[Any]:
    """`ray.get` results of calls made on `calls` (worker, actor) pairs, same order as `refs`.

    A dead worker becomes a PlacementError naming it and its node.
    """
    try:
        return ray.get(list(refs))
    except RayActorError as e:
        culprit = next((w for w, a in calls if a._actor_id.hex() == e.actor_id), None)
        who = describe(culprit) if culprit else f"a worker (actor {e.actor_id})"
        raise PlacementError(f"{who} died: {_reason(e)}") from e


def _reason(error: Exception) -> str:
    """Ray's death cause in one line (its messages run over many, with tab-indented fields)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and not line.startswith("\t")]
    text = " ".join(lines).split(" Some common causes")[0]  # Ray's generic troubleshooting list
    return text[:300] if text else type(error).__name__
