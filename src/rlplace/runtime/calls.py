"""Calling a hook on the workers of a component that define it.

Everything in `rlplace.runtime` talks to workers through the `Group` protocol below, which the Ray
layer's `WorkerGroup` satisfies; its `get()` turns a dead worker into a PlacementError that names the
worker and its node, so the runtime never shows a bare Ray traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rlplace.plan import Worker


class Group(Protocol):
    """The slice of a WorkerGroup the runtime needs: actor handles, their ids and plan rows in rank order, `call_async`
    (calls through it are re-run on a worker moved off a lost node) and `get`."""

    component: str

    @property
    def actors(self) -> Sequence[Any]: ...

    @property
    def workers(self) -> Sequence[Worker]: ...

    @property
    def actor_ids(self) -> tuple[str, ...]: ...

    def call_async(self, method: str, *args: Any, rank: int | None = None, **kwargs: Any) -> Any: ...

    def get(
        self, refs: list, method: str = "call", timeout_s: float | None = None, ranks: Sequence[int] = ()
    ) -> list: ...


def call_defined(group: Group, method: str, **kwargs: Any) -> tuple[list[int], list[Any]]:
    """Call `method(**kwargs)` on every worker of `group` whose class defines it; return (ranks, results).

    Workers whose class lacks the method are skipped, not failed: hooks are optional (spec "Offload
    Support"). The calls run in parallel.
    """
    ranks = [i for i, a in enumerate(group.actors) if hasattr(a, method)]
    refs = [group.call_async(method, rank=rank, **kwargs) for rank in ranks]
    return ranks, group.get(refs, method, ranks=ranks)
