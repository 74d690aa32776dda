"""A WorkerGroup: the actors of one component, called together or by rank.

A dead worker surfaces as a PlacementError naming the worker and its node (not a bare Ray
traceback), so a job stops with a message a user can act on.
"""

from __future__ import annotations

import time
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
            return self.get([refs], method, timeout_s, ranks=[rank])[0]
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

    def get(self, refs: list, method: str = "call", timeout_s: float | None = None, ranks: Sequence[int] = ()) -> list:
        """`ray.get` of one ref per rank (`ranks`, default all in order); a dead or silent worker becomes a
        PlacementError that names it. Refs are awaited one by one so the failing rank is known."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        results = []
        for rank, ref in zip(ranks or range(len(refs)), refs, strict=True):
            worker = self.workers[rank]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                results.append(ray.get(ref, timeout=left))
            except RayActorError as e:
                raise PlacementError(
                    f"worker {worker.name} on node {worker.node_rank} died during {method}(): {_first_line(e)}"
                ) from e
            except GetTimeoutError as e:
                raise PlacementError(f"worker {worker.name} did not finish {method}() within {timeout_s:g} s") from e
        return results

    def placements(self, timeout_s: float | None = 60) -> list[WorkerPlacement]:
        """Each worker's own view of its placement (no method needed on the worker class)."""
        return self.get(self.placements_async(), "placement", timeout_s)

    def placements_async(self) -> list:
        """Refs to each worker's placement, to gather several groups at once."""
        return self.call_async("__ray_call__", _own_placement)

    def kill(self, rank: int, *, restart: bool = False, timeout_s: float = 10.0) -> None:
        """Kill worker `rank`; with `restart` Ray restarts it in its bundle if max_restarts allows.

        `ray.kill` only sends the request: a call made right after it can still run on the old process.
        Without `restart` this returns once the GCS reports the actor dead, so the next call fails.
        """
        actor = self._actor(rank)
        ray.kill(actor, no_restart=not restart)
        if not restart and wait_dead([actor._actor_id.hex()], timeout_s):
            raise PlacementError(f"worker {self.workers[rank].name} was killed but is not dead after {timeout_s:g} s")

    def _actor(self, rank: int) -> ActorHandle:
        if not 0 <= rank < len(self.actors):
            raise IndexError(f"{self.component} has ranks 0-{len(self.actors) - 1}, not {rank}")
        return self.actors[rank]


def wait_dead(actor_ids: Sequence[str], timeout_s: float) -> set[str]:
    """Poll the GCS actor table until every actor in `actor_ids` is DEAD; return those still not dead."""
    from ray._private import state

    left = set(actor_ids)
    deadline = time.monotonic() + timeout_s
    while left:
        table = state.actors()
        left = {i for i in left if table.get(i, {}).get("State", "DEAD") != "DEAD"}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return left


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__
