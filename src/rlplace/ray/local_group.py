"""Components that run in the driver process instead of as Ray actors (RLightning's `remote_<c>: false`).

RLightning's debugging switch builds the component's workers as plain objects in the driver: as many as
it would have started as actors, each constructed with the same arguments, so a breakpoint or a traceback
lands in the user's own process. `LocalGroup` keeps WorkerGroup's interface (`call`, `call_async`,
`call_sharded`, `get`, `placements`, `actors[i].method.remote(...)`), so the training script and rlplace's
runtime (phases, buffer router, weight sync) do not change when the switch flips.

Differences a user can notice, by design of the switch: a method runs at once, in the driver, when it is
called (`call_async` returns references to results already computed, via `ray.put`); references passed as
arguments are resolved first, as Ray does for an actor; an exception raises at the call, with the driver's
own traceback; there is nothing to kill or restart. A driver-local worker cannot be handed to an actor
(inside a `ShardRouter`, say): the actor would get a copy of it, so that is an error naming the switch.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from rlplace.errors import PlacementError
from rlplace.inventory import Inventory
from rlplace.plan import Worker
from rlplace.ray.group import Rows, WorkerGroup
from rlplace.ray.port import Cluster
from rlplace.ray.worker import WorkerPlacement


class _LocalMethod:
    """`handle.method.remote(*args)` for an object in the driver: runs the method now, returns a reference."""

    def __init__(self, cluster: Cluster, call: Callable[..., Any]):
        self._cluster = cluster
        self._call = call

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        args = tuple(self._resolved(a) for a in args)
        kwargs = {k: self._resolved(v) for k, v in kwargs.items()}
        return self._cluster.put(self._call(*args, **kwargs))

    def _resolved(self, value: Any) -> Any:
        """A reference passed as an argument is its value by the time the method runs, as with an actor."""
        return self._cluster.get(value) if self._cluster.is_result(value) else value


class LocalHandle:
    """Stands in for an actor handle: attribute access gives the instance's methods with a `.remote()`."""

    def __init__(self, instance: object, cluster: Cluster):
        self.instance = instance
        self.cluster = cluster
        self.actor_id = f"local-{uuid.uuid4().hex}"  # what the port's `actor_id` answers for it

    def __getattr__(self, name: str) -> _LocalMethod:
        if name == "__ray_call__":  # run a function on the instance, as Ray's actors allow
            return _LocalMethod(self.cluster, lambda fn, *a, **k: fn(self.instance, *a, **k))
        return _LocalMethod(self.cluster, getattr(self.instance, name))  # AttributeError: no such method

    def __repr__(self) -> str:
        return f"LocalHandle({type(self.instance).__name__})"

    def __reduce__(self) -> Any:
        raise PlacementError(
            f"a driver-local {type(self.instance).__name__} (remote_<component>: false) cannot be sent to an "
            "actor: the actor would get a copy of it. Call it from the driver, or launch its component as actors"
        )


class LocalGroup(WorkerGroup):
    """All workers of a driver-local component; `instances[i]` is rank i's object (also `actors[i].instance`)."""

    def __init__(
        self,
        component: str,
        workers: Sequence[Worker],
        instances: Sequence[object],
        driver: WorkerPlacement,
        *,
        cluster: Cluster,
        rows: Rows | None = None,
    ):
        handles = [LocalHandle(i, cluster) for i in instances]
        super().__init__(component, workers, handles, cluster=cluster, rows=rows)
        self._driver = driver

    @property
    def instances(self) -> list[object]:
        """The workers' objects in rank order (an elastic component's change with its size)."""
        return [a.instance for a in self.actors]

    def __repr__(self) -> str:
        return f"LocalGroup({self.component!r}, {len(self)} workers in the driver)"

    @property
    def in_driver(self) -> bool:
        return True

    def placements_async(self) -> list:
        return [self.cluster.put(p) for p in self._placements()]

    def placements(self, timeout_s: float | None = 60) -> list[WorkerPlacement]:
        return self._placements()

    def _placements(self) -> list[WorkerPlacement]:
        d = self._driver
        return [
            WorkerPlacement(
                component=w.component,
                rank=w.rank,
                world_size=w.world_size,
                node_rank=d.node_rank,
                local_rank=w.rank,
                group=None,
                gpus=(),
                planned_gpus=(),
                gpu_fraction=0.0,
                planned_node_rank=None,  # not pinned: it runs wherever the driver runs
                accelerator=d.accelerator,
                python=sys.executable,
                node_id=d.node_id,
                actor_name="",
            )
            for w in self.workers
        ]

    def kill(self, rank: int, *, restart: bool = False, timeout_s: float = 10.0) -> None:
        raise PlacementError(
            f"{self.component} worker {rank} runs in the driver process (remote_{self.component}: false): there is "
            "no actor to kill or restart"
        )


def launch_local(
    cluster: Cluster,
    component: str,
    workers: Sequence[Worker],
    cls: Any,
    args: tuple,
    kwargs: dict,
    live: Inventory,
    rows: Rows | None = None,
) -> tuple[LocalGroup, Callable[[Worker], LocalHandle]]:
    """Construct `cls(*args, **kwargs)` once per planned worker of `component`, in rank order, in the driver (the
    user's class behind a `ray.remote` one: a driver-local component is not an actor); `rows`: the job's state,
    where the group reads its workers' rows. Returns the group and how to start one more of its workers (a
    growth)."""
    plain = cluster.user_class(cls)[0]

    def start(_worker: Worker) -> LocalHandle:
        return LocalHandle(plain(*args, **kwargs), cluster)

    driver = _driver_placement(live, cluster.driver_node_id())
    instances = [plain(*args, **kwargs) for _ in workers]
    return LocalGroup(component, workers, instances, driver, cluster=cluster, rows=rows), start


def _driver_placement(live: Inventory, node_id: str) -> WorkerPlacement:
    """Where the driver runs: its node's rank in the live inventory (None if the driver is not a node of it)."""
    node = next((n for n in live.nodes if n.node_id == node_id), None)
    return WorkerPlacement(
        component="driver",
        rank=0,
        world_size=1,
        node_rank=node.rank if node else None,
        local_rank=0,
        group=None,
        gpus=(),
        planned_gpus=(),
        gpu_fraction=0.0,
        planned_node_rank=None,
        accelerator=node.gpu_model if node else None,
        node_id=node_id,
    )
