"""The one port between rlplace's control plane and a cluster (docs/ray.md, "The port").

The services of `rlplace.ray` (reservation, launch, rendezvous, failover: the node watcher and the rank mover),
weight sync (`rlplace.runtime.sync`) and the commands that look at a running job ask a cluster a small set of
questions and give it a small set of orders: which nodes there are, with which labels and free resources, and
which are draining; placement groups created, polled and removed; actors started, called, killed and waited dead;
functions run on one actor or on one node; results fetched with a bound; a key-value store; a clock. `Cluster`
names exactly that. `RayCluster` (`rlplace.ray.ray_port`) answers it with Ray and is the only module of the
control plane that imports `ray` (an import-linter contract checks it), so another implementation (`SimCluster`,
`rlplace.sim.memory_port`: in memory, for the explorer of fault sequences) stands in for Ray without touching a
service.

Handles (placement groups, actors, results) are opaque to the services: they pass them back to the port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol


class CallTimedOut(Exception):
    """`Cluster.get` gave up: the results were not ready within its timeout (nothing was cancelled)."""


class WorkerDied(Exception):
    """`Cluster.get` of a call whose actor died (or whose result was lost with its node) before it answered.
    An exception the user's method raised is not this: it comes back as the cluster raised it."""


class Ticker(Protocol):
    """A repeated task of `Cluster.every`."""

    def wake(self) -> None:
        """Run the next tick now rather than a period from now."""

    def stop(self, timeout_s: float) -> None:
        """No tick starts after this; waits up to `timeout_s` for one under way (not when called from a tick)."""


class Cluster(Protocol):
    """What the control plane needs from a cluster; see the module docstring."""

    # -- the connection and the clock -----------------------------------------------------------------

    def connected(self) -> bool:
        """Is this process connected to a cluster now?"""

    def gcs_address(self) -> str:
        """HOST:PORT of the cluster this process is connected to."""

    def driver_ip(self) -> str:
        """The address of this process's own node."""

    def driver_node_id(self) -> str:
        """The id (hex) of this process's own node."""

    def namespace(self) -> str:
        """The namespace this driver's actors are named in."""

    def job_id(self) -> str:
        """The id (hex) of this driver's job on the cluster."""

    def now(self) -> float:
        """Seconds on a monotonic clock: deadlines are measured on it."""

    def wall(self) -> float:
        """Seconds since the epoch: the clock of drain deadlines and of the times events carry."""

    def sleep(self, seconds: float) -> None:
        """Let `seconds` pass on the clock of `now`."""

    def every(self, period_s: float, tick: Callable[[], bool], name: str) -> Ticker:
        """Run `tick()` every `period_s` until it returns False or the ticker is stopped (the node watcher: a
        thread on Ray, a timer on the simulation's clock)."""

    def wait_on(self, condition: threading.Condition, timeout_s: float | None) -> None:
        """Wait on `condition` (the caller holds it) until notified or `timeout_s` passed on the clock of `now`."""

    def lock(self) -> Any:
        """A re-entrant lock for a service's one-change-at-a-time rule (a `threading.RLock` on Ray; in the
        simulation one that keeps the watcher's ticks out while a change holds it, as a thread would wait)."""

    # -- nodes ----------------------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        """Every node the cluster knows, alive or dead, as records shaped like `ray.nodes()`'s (NodeID, Alive,
        NodeManagerAddress, Resources, Labels, ...)."""

    def free_resources(self) -> dict[str, dict[str, float]]:
        """Node id -> the resources free there now."""

    def draining_nodes(self) -> dict[str, int]:
        """Node id -> the deadline (ms since the epoch; 0: none given) of every node being drained."""

    def visible_devices_var(self, resource: str) -> str:
        """The variable that masks accelerator `resource` for a worker (CUDA_VISIBLE_DEVICES for "GPU")."""

    def raylet_refuses(self, host: str, port: int) -> bool | None:
        """Does the raylet at `host:port` refuse connections (True: its processes are gone), accept them (False),
        or not answer in time (None: the host may be down or cut off)? A probe faster than Ray's health checks."""

    # -- placement groups -----------------------------------------------------------------------------

    def create_group(self, bundles: list[dict[str, float]], name: str, selectors: list[dict[str, str]]) -> Any:
        """A PACK placement group of `bundles`, bundle i only on a node whose labels match `selectors[i]`.
        ValueError (or another exception) when the cluster refuses its shape."""

    def group_state(self, group: Any) -> tuple[str, str]:
        """(state, scheduling state) of a group, in Ray's words (`rlplace.lifecycle.GroupState`): (CREATED, _),
        (REMOVED, _), (_, INFEASIBLE), ..."""

    def group_table(self) -> dict[str, dict[str, Any]]:
        """Every placement group the cluster knows, by id (to say who holds a busy node's resources)."""

    def group_id(self, group: Any) -> str:
        """The id (hex) of a group."""

    def remove_group(self, group: Any) -> None:
        """Release a group; an exception when it is already gone with its cluster."""

    def in_group(self, group: Any, index: int) -> Any:
        """The scheduling option that starts an actor in bundle `index` of `group`."""

    def on_node(self, node_id: str) -> Any:
        """The scheduling option that starts an actor or a task on node `node_id` only."""

    # -- actors and calls -------------------------------------------------------------------------------

    def actor_class(self, cls: type, options: Mapping[str, Any]) -> Any:
        """`cls` as an actor class, with the options written on the user's class."""

    def user_class(self, cls: Any) -> tuple[type, Mapping[str, Any]]:
        """The user's class behind an actor class and the options written on it; a plain class as it is."""

    def start_actor(self, actor_class: Any, options: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        """Start one actor of `actor_class` with `options` (name, namespace, resources, scheduling, env)."""

    def is_actor(self, handle: Any) -> bool:
        """Is `handle` an actor of the cluster (not a driver-local stand-in)?"""

    def actor_id(self, handle: Any) -> str:
        """The id (hex) of an actor; a driver-local stand-in answers its own `actor_id`."""

    def actor_table(self) -> dict[str, dict[str, Any]]:
        """Actor id -> its record (State, Name, Address, Pid, JobID, ...)."""

    def named_actors(self) -> list[dict[str, str]]:
        """Every named actor of every namespace: [{"name": ..., "namespace": ...}]."""

    def get_actor(self, name: str, namespace: str) -> Any:
        """The handle of a named actor; ValueError when there is none."""

    def kill(self, handle: Any, *, restart: bool = False) -> None:
        """Ask the cluster to stop an actor (it may still answer a call made right after)."""

    def call(self, handle: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        """Start `method` on an actor; a result handle. A result handle among the arguments is its value when the
        method runs (weight sync hands the sources' results to the targets so): the call waits for it, and fails
        with it."""

    def run_on(self, handle: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `function(instance, *args, **kwargs)` inside an actor, after the calls sent to it before (arguments
        as for `call`)."""

    def run_task(self, function: Callable[..., Any], *args: Any, node_id: str | None = None) -> Any:
        """Run `function(*args)` once as a zero-CPU task, on node `node_id` where given; a result handle."""

    # -- results -----------------------------------------------------------------------------------------

    def put(self, value: Any) -> Any:
        """A result handle that is already `value`."""

    def is_result(self, value: Any) -> bool:
        """Is `value` a result handle of the cluster?"""

    def result_key(self, ref: Any) -> bytes:
        """A key naming the call behind a result handle (stable across copies of the handle)."""

    def get(self, refs: Any, timeout_s: float | None = None) -> Any:
        """The value of one result handle, or the values of a list of them. CallTimedOut past `timeout_s`;
        WorkerDied when the actor behind a call died; the user's own exception as raised."""

    def wait(self, refs: Sequence[Any], timeout_s: float) -> tuple[list[Any], list[Any]]:
        """(ready, not ready) after at most `timeout_s`."""

    def cancel(self, ref: Any) -> None:
        """Stop a task that has not answered."""

    def object_nodes(self, refs: Sequence[Any]) -> dict[Any, dict[str, Any]]:
        """Where each object lives and how big it is (`object_size`, `node_ids`)."""

    # -- the key-value store and the jobs ----------------------------------------------------------------

    def kv_put(self, key: str, value: bytes | str) -> None: ...

    def kv_get(self, key: str | bytes) -> bytes | None: ...

    def kv_keys(self, prefix: str) -> list[bytes]: ...

    def kv_delete(self, key: str, *, by_prefix: bool = False) -> None: ...

    def live_jobs(self) -> set[str]:
        """The ids (hex) of the cluster's jobs whose driver still runs."""
