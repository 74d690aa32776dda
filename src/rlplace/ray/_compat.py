"""Every private Ray API rlplace uses, in one place (checked against Ray 2.60).

Ray keeps several things rlplace needs outside its public API: the internal key-value store of the GCS,
the node/actor/job tables without the dashboard, the address resolution `ray.init` does, the variable
each accelerator masks with, actor ids, and the user class behind a `ray.remote` one. A Ray upgrade that
moves one of them breaks this module only; nothing else in rlplace imports `ray._private`, calls
`internal_kv._internal_kv_*` or reads `_actor_id` (an import-linter contract and a test check it).

Imports of Ray's private modules happen inside the functions: a worker process importing
`rlplace.ray.worker` pays for none of them until it asks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

#: The internal-KV namespace of everything rlplace stores (job records, rendezvous exchanges).
KV_NAMESPACE = "rlplace"


# -- the GCS's internal key-value store ------------------------------------------------------------------


def kv_put(key: str, value: bytes | str) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key, value, overwrite=True, namespace=KV_NAMESPACE)


def kv_get(key: str | bytes) -> bytes | None:
    from ray.experimental import internal_kv

    return internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)


def kv_keys(prefix: str) -> list[bytes]:
    from ray.experimental import internal_kv

    return list(internal_kv._internal_kv_list(prefix, namespace=KV_NAMESPACE))


def kv_delete(key: str, *, by_prefix: bool = False) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_del(key, del_by_prefix=by_prefix, namespace=KV_NAMESPACE)


# -- GCS tables (no dashboard needed) ---------------------------------------------------------------------


def available_resources_per_node() -> dict[str, dict[str, float]]:
    """Node id -> the resources free there now (placement-group bookkeeping entries included)."""
    from ray._private import state

    return state.available_resources_per_node()


def actor_table() -> dict[str, dict[str, Any]]:
    """Actor id (hex) -> its GCS record (State, Name, Address, Pid, JobID, NumRestarts, StartTime, ...)."""
    from ray._private import state

    return state.actors()


def live_ray_jobs() -> set[str]:
    """The ids (hex) of the Ray jobs whose driver still runs."""
    from ray._private import state

    return {j["JobID"] for j in state.jobs() if not j.get("IsDead")}


# -- drains (preemption notices) ---------------------------------------------------------------------------

#: The drain reasons `drain_node` takes, by the name rlplace uses (`rlplace drain --reason`). Ray 2.60 knows
#: IDLE_TERMINATION (refused while anything runs on the node) and PREEMPTION; an operator's maintenance is a
#: preemption announced by hand (the node goes whatever runs on it), with the reason in the message.
DRAIN_REASONS = ("preemption", "maintenance")


def draining_nodes() -> dict[str, int]:
    """Node id (hex) -> the deadline of its drain, wall clock in ms (0: none given), for every node being drained
    (`ray drain-node`, the autoscaler, KubeRay, a spot preemption). One GCS request; a draining node stays alive
    and its actors answer until it is removed."""
    from ray._private import state

    return {str(k): int(v) for k, v in state.state.get_draining_nodes().items()}


def drain_node(address: str, node_id: str, deadline_ms: int, reason: str = "preemption", message: str = "") -> None:
    """Ask the GCS at `address` to drain node `node_id` by `deadline_ms` (wall clock, ms), as Ray's autoscaler does
    before it takes a node away. Raises RuntimeError with Ray's words when the GCS refuses."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # compiled: not in Ray's type stubs
    from ray.core.generated import autoscaler_pb2

    if reason not in DRAIN_REASONS:
        raise ValueError(f"drain reason {reason!r}: one of {', '.join(DRAIN_REASONS)}")
    text = f"{reason}: {message}" if message else reason
    accepted, why = GcsClient(address=address).drain_node(
        node_id,
        autoscaler_pb2.DRAIN_NODE_REASON_PREEMPTION,  # type: ignore[attr-defined]  # generated protobuf: no stubs
        text,
        int(deadline_ms),
    )
    if not accepted:
        raise RuntimeError(f"Ray refused to drain node {node_id}: {why or 'no reason given'}")


# -- addresses ---------------------------------------------------------------------------------------------


def bootstrap_address(address: str) -> str | None:
    """What `ray.init(address=...)` would connect to ("auto" -> $RAY_ADDRESS or this machine's cluster);
    None for "local" (start a new one). ConnectionError when "auto" finds nothing, ValueError when malformed.
    Ray's warning that it found several heads here and picked the latest is held back: the caller says which
    cluster it joins, or refuses to guess (`gcs_addresses_on_this_machine` lists them)."""
    from ray._private import services

    logger = logging.getLogger(services.__name__)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return services.canonicalize_bootstrap_address(address)
    finally:
        logger.setLevel(level)


def node_ip_address() -> str:
    """This machine's IP as Ray picks it (without a running Ray)."""
    from ray._private import services

    return services.get_node_ip_address()


def gcs_addresses_on_this_machine() -> list[str]:
    """HOST:PORT of every Ray head (GCS) running on this machine."""
    from ray._private import services

    return list(services.find_gcs_addresses())


def quiet_raylet_deaths() -> None:
    """Stop the driver from echoing a dead raylet's last log lines (a node removed on purpose). A private
    switch of Ray 2.60, left alone where it does not exist."""
    import ray._private.worker as ray_worker

    if hasattr(ray_worker, "_worker_logs_enabled"):
        ray_worker._worker_logs_enabled = False


# -- token authentication (Ray 2.52+) -------------------------------------------------------------------------


def reload_auth_settings() -> None:
    """Make Ray's cached config (it reads RAY_AUTH_MODE once) and its cached token follow os.environ again, as
    Ray's own `_enable_token_auth` does after changing the environment."""
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # compiled: no stubs

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


class GcsUnreachable(ConnectionError):
    """Nothing answered as a Ray head (GCS) at an address within Ray's connect timeouts."""


def gcs_accepts(address: str) -> bool:
    """Ask the GCS at `address` for its cluster id (one request), with the auth settings os.environ holds now:
    True when it answers, False when it refuses the token or its absence. Raises GcsUnreachable when nothing
    answers as a GCS within Ray's connect timeouts (RAY_gcs_rpc_server_connect_timeout_s, ...)."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # compiled: not in Ray's type stubs
    from ray.exceptions import AuthenticationError, RpcError

    reload_auth_settings()
    try:
        GcsClient(address=address)
    except AuthenticationError:
        return False
    except RpcError as e:
        raise GcsUnreachable(str(e)) from e
    return True


# -- accelerators ------------------------------------------------------------------------------------------


def visible_devices_var(resource: str = "GPU") -> str:
    """The variable Ray sets to mask an accelerator resource: CUDA_VISIBLE_DEVICES for "GPU",
    ASCEND_RT_VISIBLE_DEVICES for "NPU", HABANA_VISIBLE_MODULES for "HPU", ..."""
    from ray._private.accelerators import get_accelerator_manager_for_resource

    try:
        manager = get_accelerator_manager_for_resource(resource)
    except Exception:  # an accelerator Ray does not know: nothing masks it
        manager = None
    var = manager.get_visible_accelerator_ids_env_var() if manager else None
    return var or "CUDA_VISIBLE_DEVICES"


# -- actors ------------------------------------------------------------------------------------------------


def actor_id(handle: Any) -> str:
    """The id (hex) of an actor handle; a driver-local handle (`remote_<c>: false`) answers with its own
    `actor_id`, so code keyed by workers' identity works for both."""
    from ray.actor import ActorHandle

    if isinstance(handle, ActorHandle):
        return handle._actor_id.hex()
    return str(handle.actor_id)


def user_class(cls: Any) -> tuple[type, Mapping[str, Any]]:
    """The user's class behind `cls` and the actor options written on it (`@ray.remote(num_cpus=2)`);
    a plain class comes back as it is, with no options."""
    from ray.actor import ActorClass

    if isinstance(cls, ActorClass):
        metadata = cls.__ray_metadata__  # type: ignore[attr-defined]  # set by @ray.remote, undeclared
        options = cls._default_options  # type: ignore[attr-defined]  # set by @ray.remote, undeclared
        return metadata.modified_class.__ray_actor_class__, dict(options)
    return cls, {}
