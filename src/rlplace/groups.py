"""The `Group` protocol: how everything above the Ray layer talks to the workers of one component.

The Ray layer's `WorkerGroup` (and its driver-local `LocalGroup`) satisfies it; the phase engine
(`rlplace.phases`) and the runtime services (`rlplace.runtime`: buffer routing, weight sync) use only this,
so they never import the Ray layer's internals. Its `get()` turns a dead worker into a PlacementError that
names the worker and its node, so no one above shows a bare Ray traceback. No Ray import here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rlplace.plan import Worker


class Group(Protocol):
    """The slice of a WorkerGroup the runtime needs: actor handles, their ids and plan rows in rank order, `call_async`
    (calls through it are re-run on a worker moved off a lost node), `get`, and the port its calls go through."""

    component: str
    #: The port (a `rlplace.ray.port.Cluster`: Ray's, or the simulation's; typed loosely, as this module sits below
    #: the Ray layer): the runtime's own calls on the group's actors (weight sync) go through it.
    cluster: Any

    @property
    def actors(self) -> Sequence[Any]: ...

    @property
    def workers(self) -> Sequence[Worker]: ...

    @property
    def actor_ids(self) -> tuple[str, ...]: ...

    @property
    def in_driver(self) -> bool: ...

    def call_async(self, method: str, *args: Any, rank: int | None = None, **kwargs: Any) -> Any: ...

    def get(
        self, refs: list, method: str = "call", timeout_s: float | None = None, ranks: Sequence[int] = ()
    ) -> list: ...


def call_defined(group: Group, method: str, **kwargs: Any) -> tuple[list[int], list[Any]]:
    """Call `method(**kwargs)` on every worker of `group` whose class defines it; return (ranks, results).

    Workers whose class lacks the method are skipped, not failed: hooks are optional (docs/runtime.md,
    "Phases and offload hooks"). The calls run in parallel.
    """
    ranks = [i for i, a in enumerate(group.actors) if hasattr(a, method)]
    refs = [group.call_async(method, rank=rank, **kwargs) for rank in ranks]
    return ranks, group.get(refs, method, ranks=ranks)
