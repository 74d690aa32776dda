"""A WorkerGroup: the actors of one component, called together or by rank.

A dead worker surfaces as a PlacementError naming the worker and its node (not a bare Ray
traceback), so a job stops with a message a user can act on. A worker whose node is lost is different:
calls on it wait (at most until the job's replacement window ends) while the job moves it to a spare or a
replacement node (`rlplace.ray.watcher`), and are then re-run on the new worker, or raise NodeLostError.
To re-run a call the group remembers what it sent (method and arguments) until the result is fetched
through `get()`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import ray
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError

from rlplace.errors import NodeLostError, PlacementError
from rlplace.plan import Worker
from rlplace.ray import _compat
from rlplace.ray.worker import WorkerPlacement, placement

#: How long one wait on a result lasts before the group looks whether the worker's node was lost meanwhile.
_SLICE_S = 0.25
#: Calls remembered per group for re-running after a node loss (those fetched with `get()` are forgotten at
#: once; this bounds what refs fetched some other way can hold).
_REMEMBERED = 4096


def _own_placement(_instance: object) -> WorkerPlacement:
    """Runs inside the actor through `__ray_call__`, so worker classes need no method for it."""
    return placement()


@dataclass
class _Call:
    rank: int
    method: str
    args: tuple
    kwargs: dict
    generation: int  # which incarnation of the rank's worker it was sent to (see `replace`)


class NodeHealth(Protocol):
    """What a group asks about the nodes of its workers (the job's node watcher answers; in memory)."""

    def health(self, rank: int | None) -> str:
        """`ok`, `lost` or `failed` for node rank `rank` (None: a worker Ray placed itself: `ok`)."""

    def check(self, rank: int) -> bool:
        """A call on node `rank` just failed: is the node lost?"""

    def wait_usable(self, rank: int | None, deadline: float | None = None) -> bool:
        """Wait while node `rank` is lost; False when `deadline` came first; NodeLostError past the window."""


class _NodeDown(Exception):
    """The node of the worker being waited on was declared lost while waiting."""


class WorkerGroup:
    """All workers of one component; `actors[i]` and `workers[i]` are rank i.

    `health` is the job's node watcher (None: calls on a lost node fail like any dead worker);
    `relaunch` starts one worker again (the job passes it; used when a node is lost).
    """

    def __init__(
        self,
        component: str,
        workers: Sequence[Worker],
        actors: Sequence[ActorHandle],
        *,
        health: NodeHealth | None = None,
        relaunch: Callable[[Worker], ActorHandle] | None = None,
    ):
        self.component = component
        self.workers: tuple[Worker, ...] = tuple(workers)
        self.actors: list[ActorHandle] = list(actors)
        self.relaunch = relaunch
        self._health = health
        self._calls: OrderedDict[bytes, _Call] = OrderedDict()
        self._generation = [0] * len(self.actors)

    def __len__(self) -> int:
        return len(self.actors)

    @property
    def in_driver(self) -> bool:
        """Whether the workers are plain objects in the driver (`remote_<component>: false`): their calls run
        to their end when made, so calls that wait for each other must not be made one after another."""
        return False

    @property
    def actor_ids(self) -> tuple[str, ...]:
        """The workers' actor ids in rank order (a driver-local worker has one too): who they are right now,
        so a rank relaunched after a node loss counts as a new member."""
        return tuple(_compat.actor_id(a) for a in self.actors)

    def __getstate__(self) -> dict[str, Any]:
        """A copy shipped to a worker (inside a ShardRouter, say) calls the actors but watches no node."""
        return {**self.__dict__, "_health": None, "relaunch": None, "_calls": OrderedDict()}

    def replace(self, rank: int, actor: ActorHandle) -> None:
        """Worker `rank` runs as `actor` from now on (it was relaunched after its node was lost)."""
        self.actors[rank] = actor
        self._generation[rank] += 1

    def __repr__(self) -> str:
        return f"WorkerGroup({self.component!r}, {len(self)} workers)"

    def call_async(self, method: str, *args: Any, rank: int | None = None, **kwargs: Any) -> Any:
        """Start `method` on every worker (list of refs, rank order) or on worker `rank` (one ref).

        A worker whose node is lost gets its call once a spare or replacement took over (this waits, at
        most until the replacement window ends); workers on healthy nodes get theirs first.
        """
        if rank is not None:
            self._actor(rank)
            return self._submit(rank, method, args, kwargs)
        order = sorted(range(len(self)), key=lambda r: self._state(r) != "ok")
        refs = {r: self._submit(r, method, args, kwargs) for r in order}
        return [refs[r] for r in range(len(self))]

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
        order = sorted(range(len(self)), key=lambda r: self._state(r) != "ok")
        refs = {
            i: self._submit(i, method, tuple(a[i] for a in args), {k: v[i] for k, v in kwargs.items()}) for i in order
        }
        return self.get([refs[i] for i in range(len(self))], method, timeout_s)

    def get(self, refs: list, method: str = "call", timeout_s: float | None = None, ranks: Sequence[int] = ()) -> list:
        """`ray.get` of one ref per rank (`ranks`, default all in order); a dead or silent worker becomes a
        PlacementError that names it. Refs are awaited one by one so the failing rank is known. A call whose
        worker's node was lost is re-run on the worker that took over (or raises NodeLostError)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        return [
            self._get_one(rank, ref, method, timeout_s, deadline)
            for rank, ref in zip(ranks or range(len(refs)), refs, strict=True)
        ]

    # -- one call, through node losses ----------------------------------------------------------------------

    def _submit(self, rank: int, method: str, args: tuple, kwargs: dict) -> Any:
        self._usable(rank, None)
        ref = getattr(self.actors[rank], method).remote(*args, **kwargs)
        self._calls[ref.binary()] = _Call(rank, method, args, kwargs, self._generation[rank])
        while len(self._calls) > _REMEMBERED:
            self._calls.popitem(last=False)
        return ref

    def _get_one(self, rank: int, ref: Any, method: str, timeout_s: float | None, deadline: float | None) -> Any:
        worker = self.workers[rank]
        while True:
            try:
                value = self._wait(ref, rank, method, timeout_s, deadline)
            except _NodeDown:
                pass
            except (RayActorError, ObjectLostError) as e:
                if not self._replaced(ref, rank) and not self._node_lost(rank):
                    self._calls.pop(ref.binary(), None)
                    raise PlacementError(
                        f"worker {worker.name} on node {worker.node_rank} died during {method}(): {_first_line(e)}"
                    ) from e
            else:
                self._calls.pop(ref.binary(), None)
                return value
            if not self._usable(rank, deadline):
                raise PlacementError(
                    f"worker {worker.name} did not finish {method}() within {timeout_s:g} s (its node "
                    f"{worker.node_rank} was lost and no spare or replacement took over yet)"
                )
            ref = self._rerun(ref, rank, method)

    def _wait(self, ref: Any, rank: int, method: str, timeout_s: float | None, deadline: float | None) -> Any:
        """`ray.get(ref)` in slices, so a loss of the worker's node is noticed while waiting."""
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return ray.get(ref, timeout=_SLICE_S if left is None else min(_SLICE_S, left))
            except GetTimeoutError as e:
                if self._state(rank) != "ok":
                    raise _NodeDown from e
                if left is not None and left <= _SLICE_S:
                    raise PlacementError(
                        f"worker {self.workers[rank].name} did not finish {method}() within {timeout_s:g} s"
                    ) from e

    def _rerun(self, ref: Any, rank: int, method: str) -> Any:
        """The worker of `rank` was replaced: send the call that `ref` stood for to the new worker."""
        call = self._calls.pop(ref.binary(), None)
        if call is None:
            worker = self.workers[rank]
            raise NodeLostError(
                f"worker {worker.name} was moved off lost node {worker.node_rank}, but its call {method}() was not "
                "made through this WorkerGroup, so it cannot be re-run: call it again",
                node_rank=worker.node_rank if worker.node_rank is not None else -1,
                workers=(worker.name,),
            )
        return self._submit(call.rank, call.method, call.args, call.kwargs)

    def _state(self, rank: int) -> str:
        if self._health is None:
            return "ok"
        return self._health.health(self.workers[rank].node_rank)

    def _replaced(self, ref: Any, rank: int) -> bool:
        """Was `ref` sent to an earlier incarnation of worker `rank` (since moved off a lost node)?"""
        call = self._calls.get(ref.binary())
        return call is not None and call.generation != self._generation[rank]

    def _node_lost(self, rank: int) -> bool:
        node_rank = self.workers[rank].node_rank
        return self._health is not None and node_rank is not None and self._health.check(node_rank)

    def _usable(self, rank: int, deadline: float | None) -> bool:
        """Wait while the worker's node is lost; False if `deadline` came first (NodeLostError past the window)."""
        if self._health is None or self._state(rank) == "ok":
            return True
        return self._health.wait_usable(self.workers[rank].node_rank, deadline)

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
        if not restart and wait_dead([_compat.actor_id(actor)], timeout_s):
            raise PlacementError(f"worker {self.workers[rank].name} was killed but is not dead after {timeout_s:g} s")

    def _actor(self, rank: int) -> ActorHandle:
        if not 0 <= rank < len(self.actors):
            raise IndexError(f"{self.component} has ranks 0-{len(self.actors) - 1}, not {rank}")
        return self.actors[rank]


def wait_dead(actor_ids: Sequence[str], timeout_s: float) -> set[str]:
    """Poll the GCS actor table until every actor in `actor_ids` is DEAD; return those still not dead."""
    left = set(actor_ids)
    deadline = time.monotonic() + timeout_s
    while left:
        table = _compat.actor_table()
        left = {i for i in left if table.get(i, {}).get("State", "DEAD") != "DEAD"}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return left


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__
