"""A WorkerGroup: the actors of one component, called together or by rank.

A dead worker surfaces as a PlacementError naming the worker and its node (not a bare Ray
traceback), so a job stops with a message a user can act on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, RayActorError

from rlplace.errors import PlacementError
from rlplace.plan import Worker
from rlplace.ray.worker import WorkerPlacement, placement


def _own_placement(_instance: object) -> WorkerPlacement:
    """Runs inside the actor through `__ray_call__`, so worker classes need no method for it."""
    return placement()


class WorkerGroup:
    """All workers of one component; `actors[i]` and `workers[i]` are rank i."""

    def __init__(self, component: str, workers: Sequence[Worker], actors: Sequence[ActorHandle]):
        self.component = component
        self.workers: tuple[Worker, ...] = tuple(workers)
        self.actors: list[ActorHandle] = list(actors)

    def __len__(self) -> int:
        return len(self.actors)

    def __repr__(self) -> str:
        return f"WorkerGroup({self.component!r}, {len(self)} workers)"

    def call_async(self, method: str, *args: Any, rank: int | None = None, **kwargs: Any) -> Any:
        """Start `method` on every worker (list of refs, rank order) or on worker `rank` (one ref)."""
        if rank is not None:
            return getattr(self._actor(rank), method).remote(*args, **kwargs)
        return [getattr(a, method).remote(*args, **kwargs) for a in self.actors]

    def call(
        self, method: str, *args: Any, rank: int | None = None, timeout_s: float | None = None, **kwargs: Any
    ) -> Any:
        """Run `method` on every worker and return the results in rank order (or one result for `rank`)."""
        refs = self.call_async(method, *args, rank=rank, **kwargs)
        if rank is not None:
            return self.get([refs], method, timeout_s)[0]
        return self.get(refs, method, timeout_s)

    def call_sharded(
        self, method: str, *args: Sequence[Any], timeout_s: float | None = None, **kwargs: Sequence[Any]
    ) -> list:
        """Rank i gets item i of every argument (each a sequence with one item per worker)."""
        for name, value in [*((f"argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]:
            if len(value) != len(self):
                raise ValueError(f"{name} has {len(value)} shards for {len(self)} {self.component} workers")
        refs = [
            getattr(actor, method).remote(*(a[i] for a in args), **{k: v[i] for k, v in kwargs.items()})
            for i, actor in enumerate(self.actors)
        ]
        return self.get(refs, method, timeout_s)

    def get(self, refs: list, method: str = "call", timeout_s: float | None = None) -> list:
        """`ray.get` with a dead or silent worker turned into a PlacementError that names it."""
        try:
            return ray.get(refs, timeout=timeout_s)
        except RayActorError as e:
            raise PlacementError(
                f"{self._who(getattr(e, 'actor_id', None))} died during {method}(): {_first_line(e)}"
            ) from e
        except GetTimeoutError as e:
            raise PlacementError(f"{self.component} workers did not finish {method}() within {timeout_s:g} s") from e

    def placements(self, timeout_s: float | None = 60) -> list[WorkerPlacement]:
        """Each worker's own view of its placement (no method needed on the worker class)."""
        return self.get(self.placements_async(), "placement", timeout_s)

    def placements_async(self) -> list:
        """Refs to each worker's placement, to gather several groups at once."""
        return self.call_async("__ray_call__", _own_placement)

    def kill(self, rank: int, *, restart: bool = False) -> None:
        """Kill worker `rank`; with `restart` Ray restarts it in its bundle if max_restarts allows."""
        ray.kill(self._actor(rank), no_restart=not restart)

    def _actor(self, rank: int) -> ActorHandle:
        if not 0 <= rank < len(self.actors):
            raise IndexError(f"{self.component} has ranks 0-{len(self.actors) - 1}, not {rank}")
        return self.actors[rank]

    def _who(self, actor_id: Any) -> str:
        wanted = actor_id.hex() if hasattr(actor_id, "hex") else str(actor_id)
        for worker, actor in zip(self.workers, self.actors, strict=True):
            if actor._actor_id.hex() == wanted:
                return f"worker {worker.name} on node {worker.node_rank}"
        return f"a {self.component} worker"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__
