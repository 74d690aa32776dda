"""`RayCluster`: the port (`rlplace.ray.port.Cluster`) answered by Ray, and the only module of the control plane
that imports `ray` (with `_compat`, its half for Ray's private API; an import-linter contract checks both).

Every call here is one Ray call, translated where the services need it to be: a result that timed out becomes
`CallTimedOut`, a call whose actor died `WorkerDied` (the user's own exceptions pass as Ray raised them).
Ray is imported inside the methods that need it, so importing this module (the CLI, `rlplace plan`) costs
nothing until a cluster is asked something.
"""

from __future__ import annotations

import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlplace.ray import _compat
from rlplace.ray.port import CallTimedOut, WorkerDied

#: A TCP connection to a raylet's port that neither connects nor is refused within this is inconclusive.
PROBE_TIMEOUT_S = 0.5
#: One remote function per Python function run as a task (Ray exports a function's code once per wrapper).
_tasks: weakref.WeakKeyDictionary[Callable[..., Any], Any] = weakref.WeakKeyDictionary()


class RayCluster:
    """The cluster this process's Ray connection reaches (`ray.init` done by `rlplace.connect` or the user)."""

    # -- the connection and the clock -----------------------------------------------------------------

    def connected(self) -> bool:
        import ray

        return ray.is_initialized()

    def connect(self, address: str | None, **options: Any) -> None:
        """`ray.init(address=..., **options)`."""
        import ray

        ray.init(address=address, **options)

    def disconnect(self) -> None:
        import ray

        ray.shutdown()

    def gcs_address(self) -> str:
        import ray

        return ray.get_runtime_context().gcs_address

    def driver_ip(self) -> str:
        import ray

        return ray.util.get_node_ip_address()

    def driver_node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def namespace(self) -> str:
        import ray

        return ray.get_runtime_context().namespace

    def job_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_job_id()

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def every(self, period_s: float, tick: Callable[[], bool], name: str) -> _ThreadTicker:
        return _ThreadTicker(period_s, tick, name)

    def wait_on(self, condition: threading.Condition, timeout_s: float | None) -> None:
        condition.wait(timeout=timeout_s)

    def lock(self) -> Any:
        return threading.RLock()

    # -- nodes ----------------------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        import ray

        return ray.nodes()

    def free_resources(self) -> dict[str, dict[str, float]]:
        return _compat.available_resources_per_node()

    def draining_nodes(self) -> dict[str, int]:
        return _compat.draining_nodes()

    def drain_node(self, node_id: str, deadline_ms: int, reason: str, message: str) -> None:
        """Ask Ray to drain a node by `deadline_ms` (wall clock): `rlplace drain`, as the autoscaler does."""
        _compat.drain_node(self.gcs_address(), node_id, deadline_ms, reason, message)

    def visible_devices_var(self, resource: str) -> str:
        return _compat.visible_devices_var(resource)

    def raylet_refuses(self, host: str, port: int) -> bool | None:
        return raylet_refuses(host, port)

    # -- placement groups -----------------------------------------------------------------------------

    def create_group(self, bundles: list[dict[str, float]], name: str, selectors: list[dict[str, str]]) -> Any:
        from ray.util.placement_group import placement_group

        return placement_group(bundles, strategy="PACK", name=name, bundle_label_selector=selectors)

    def group_state(self, group: Any) -> tuple[str, str]:
        from ray.util.placement_group import placement_group_table

        entry = placement_group_table(group)
        return entry.get("state", ""), (entry.get("stats") or {}).get("scheduling_state", "")

    def group_table(self) -> dict[str, dict[str, Any]]:
        from ray.util.placement_group import placement_group_table

        return placement_group_table()

    def group_id(self, group: Any) -> str:
        return group.id.hex()

    def remove_group(self, group: Any) -> None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(group)

    def in_group(self, group: Any, index: int) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)

    def on_node(self, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    # -- actors and calls -------------------------------------------------------------------------------

    def actor_class(self, cls: type, options: Mapping[str, Any]) -> Any:
        import ray

        return ray.remote(**options)(cls) if options else ray.remote(cls)

    def user_class(self, cls: Any) -> tuple[type, Mapping[str, Any]]:
        return _compat.user_class(cls)

    def start_actor(self, actor_class: Any, options: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        return actor_class.options(**options).remote(*args, **kwargs)

    def is_actor(self, handle: Any) -> bool:
        from ray.actor import ActorHandle

        return isinstance(handle, ActorHandle)

    def actor_id(self, handle: Any) -> str:
        return _compat.actor_id(handle)

    def actor_table(self) -> dict[str, dict[str, Any]]:
        return _compat.actor_table()

    def named_actors(self) -> list[dict[str, str]]:
        import ray

        return ray.util.list_named_actors(all_namespaces=True)

    def get_actor(self, name: str, namespace: str) -> Any:
        import ray

        return ray.get_actor(name, namespace=namespace)

    def kill(self, handle: Any, *, restart: bool = False) -> None:
        import ray

        ray.kill(handle, no_restart=not restart)

    def call(self, handle: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(handle, method).remote(*args, **kwargs)

    def run_on(self, handle: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return handle.__ray_call__.remote(function, *args, **kwargs)

    def run_task(self, function: Callable[..., Any], *args: Any, node_id: str | None = None) -> Any:
        import ray

        if function not in _tasks:
            _tasks[function] = ray.remote(num_cpus=0, max_retries=0)(function)
        task = _tasks[function]
        if node_id is not None:
            task = task.options(scheduling_strategy=self.on_node(node_id))
        return task.remote(*args)

    # -- results -----------------------------------------------------------------------------------------

    def put(self, value: Any) -> Any:
        import ray

        return ray.put(value)

    def is_result(self, value: Any) -> bool:
        import ray

        return isinstance(value, ray.ObjectRef)

    def result_key(self, ref: Any) -> bytes:
        return ref.binary()

    def get(self, refs: Any, timeout_s: float | None = None) -> Any:
        import ray
        from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError

        try:
            return ray.get(refs, timeout=timeout_s)
        except GetTimeoutError as e:
            raise CallTimedOut(str(e)) from e
        except (RayActorError, ObjectLostError) as e:
            raise WorkerDied(str(e)) from e

    def wait(self, refs: Sequence[Any], timeout_s: float) -> tuple[list[Any], list[Any]]:
        import ray

        if not refs:
            return [], []
        return ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)

    def cancel(self, ref: Any) -> None:
        import ray

        ray.cancel(ref, force=True)

    def object_nodes(self, refs: Sequence[Any]) -> dict[Any, dict[str, Any]]:
        import ray

        return ray.experimental.get_object_locations(list(refs))

    # -- the key-value store and the jobs ----------------------------------------------------------------

    def kv_put(self, key: str, value: bytes | str) -> None:
        _compat.kv_put(key, value)

    def kv_get(self, key: str | bytes) -> bytes | None:
        return _compat.kv_get(key)

    def kv_keys(self, prefix: str) -> list[bytes]:
        return _compat.kv_keys(prefix)

    def kv_delete(self, key: str, *, by_prefix: bool = False) -> None:
        _compat.kv_delete(key, by_prefix=by_prefix)

    def live_jobs(self) -> set[str]:
        return _compat.live_ray_jobs()


class _ThreadTicker:
    """`RayCluster.every`: a daemon thread that calls `tick` every period (at once after `wake`)."""

    def __init__(self, period_s: float, tick: Callable[[], bool], name: str):
        self._period_s = period_s
        self._tick = tick
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped and self._tick():
            self._wake.wait(self._period_s)
            self._wake.clear()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout_s)


def raylet_refuses(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool | None:
    """True when nothing listens on the raylet's port any more (its process is gone), False when it accepts
    a connection, None when inconclusive (no answer: the host may be down or unreachable)."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return None
    return False


#: The process's one connection to Ray, for the callers that have no job to take a port from (commands,
#: the runtime's driver-side helpers). Stateless: every method asks Ray afresh.
RAY = RayCluster()
