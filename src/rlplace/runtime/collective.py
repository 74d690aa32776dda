"""torch.distributed inside placed workers: a component's process group in one call, and the weight-sync
groups that join train workers with eval workers without touching either component's default group.

Inside a worker launched by rlplace:

    group = init_component_group()          # NCCL where the worker has GPUs, Gloo otherwise
    torch.distributed.all_reduce(grad)      # the default group is the component's

`init_component_group()` reads the rendezvous rlplace set before the constructor ran (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; see `rlplace.ray.rendezvous`), opens the component's TCPStore,
and checks that every rank arrives within `rendezvous_timeout_s` (default 120 s, well before torch's
30 minutes); a rank that does not arrive is named, with its node, in a `RendezvousError`. Only then is
the process group created on that store, so torch's own rendezvous never waits on a missing peer.

Weight sync (`rlplace.runtime.sync.sync_weights(..., transport="collective")`) uses the `sync_*`
functions below through Ray's `__ray_call__`, so worker classes need only a `weight_tensors()`
method. One group per source rank (source -> every target), built on one TCPStore that the first source
hosts on a port the OS gives it (no port to choose, none to collide); each group is a
`ProcessGroupGloo`/`ProcessGroupNCCL` object of its own, outside torch's default world. Tensors go in
flat buckets per device and dtype (`rlplace.runtime.offload.group_buckets`, the offload layout), one
broadcast per bucket (per operation Gloo costs milliseconds, far more than copying into and out of a
staging buffer), double-buffered so that the copies overlap the transfer. A bucket holding one
contiguous tensor is broadcast in place.

Needs torch (`pip install rlplace[torch]`); `rlplace.runtime` itself does not import this module.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from rlplace.config.ranges import format_ranks
from rlplace.errors import RendezvousError, RlplaceError, first_line
from rlplace.ray.worker import RENDEZVOUS_TIMEOUT_ENV, here, job_record, placement
from rlplace.ray.worker import rendezvous_timeout_s as wait_seconds
from rlplace.runtime.offload import flat_views, group_buckets, unique_tensors

DEFAULT_BUCKET_MB = 256.0
_MASTER_GRACE_S = 1.0

__all__ = [
    "ComponentGroup",
    "destroy_component_group",
    "init_component_group",
]


@dataclass(frozen=True)
class ComponentGroup:
    """The component's torch.distributed default group, as `init_component_group()` made it."""

    component: str
    rank: int
    world_size: int
    backend: str
    device: torch.device  # where this worker's tensors for collectives belong (cuda:0 = its first own GPU)
    master_addr: str
    master_port: int
    seconds: float  # rendezvous + process-group creation


_component: ComponentGroup | None = None
_component_store: Any = None  # rank 0 hosts the TCPStore server: keep it alive with the group


def init_component_group(
    backend: str | None = None,
    *,
    rendezvous_timeout_s: float | None = None,
    timeout_s: float | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> ComponentGroup:
    """Initialise torch.distributed's default group for this worker's component; returns it (idempotent while the
    rendezvous stays the same).

    `backend`: "nccl" where this worker has GPUs (and CUDA works), else "gloo"; pass one to override.
    `rendezvous_timeout_s`: how long to wait for every rank to arrive (default 120 s, or
    $RLPLACE_RENDEZVOUS_TIMEOUT_S); `timeout_s`: torch's timeout for each collective (default torch's).
    The rendezvous is the one in the environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: set by
    rlplace, or changed by the worker before this call); `master_addr`/`master_port` override it.
    With GPUs, the current CUDA device becomes the worker's first own GPU (cuda:0 under Ray's mask).

    After the component changed size (`job.resize`, a lost node's shrink, growing back) rlplace has given this
    worker a new rendezvous (RANK, WORLD_SIZE, a fresh MASTER_PORT) before its `on_resized(event)`: called there,
    on every worker of the component, this destroys the old group and forms the new one at the new size.
    """
    global _component, _component_store
    if _component is not None:
        wanted = _wanted(master_addr, master_port)
        if wanted == (_component.rank, _component.world_size, _component.master_addr, _component.master_port):
            return _component
        destroy_component_group()  # the component changed size: the group is re-formed at the new one
    if dist.is_initialized():
        raise RlplaceError(
            "torch.distributed is already initialised in this process by other code; init_component_group() "
            "creates the component's default group itself: call it instead of init_process_group(), not after"
        )
    start = time.perf_counter()
    p = placement()
    rank, world, addr, port = _wanted(master_addr, master_port)
    has_gpu = bool(p.gpus) and torch.cuda.is_available()
    backend = backend or ("nccl" if has_gpu else "gloo")
    device = torch.device("cpu")
    if has_gpu:
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    wait_s = wait_seconds(rendezvous_timeout_s)
    who = f"component {p.component!r}"
    store = _rendezvous(addr, port, rank, world, wait_s, who, _where(p))
    timeout = datetime.timedelta(seconds=timeout_s) if timeout_s else None  # None: torch's default
    dist.init_process_group(
        backend, store=dist.PrefixStore("rlplace/pg", store), rank=rank, world_size=world, timeout=timeout
    )
    _component_store = store
    _component = ComponentGroup(p.component, rank, world, backend, device, addr, port, time.perf_counter() - start)
    return _component


def _wanted(master_addr: str | None, master_port: int | None) -> tuple[int, int, str, int]:
    """(rank, world size, master address, port) the environment (rlplace's rendezvous) and the overrides say."""
    p = placement()
    env = os.environ
    rank, world = int(env.get("RANK", p.rank)), int(env.get("WORLD_SIZE", p.world_size))
    addr = master_addr or env.get("MASTER_ADDR") or p.master_addr
    return rank, world, addr, int(master_port or env.get("MASTER_PORT") or p.master_port)


def destroy_component_group() -> None:
    """Destroy the component's group (e.g. to rejoin after a peer restarted: every rank destroys, then
    every rank calls `init_component_group()` again, with the same rendezvous)."""
    global _component, _component_store
    if _component is not None and dist.is_initialized():
        dist.destroy_process_group()
    _component = _component_store = None


def _where(p: Any) -> str:
    return f"node {p.node_rank} ({here().address})"


def _rendezvous(addr: str, port: int, rank: int, world: int, wait_s: float, who: str, where: str) -> Any:
    """Rank 0 hosts a fresh TCPStore; every rank draws a ticket, checks in (`arrived/<rank>` = its node) and
    waits until all `world` have. A ticket above `world` means the store is an earlier generation's (a
    rank rejoining before rank 0 re-created it): let go and connect again. Rank 0 waits a little longer
    than the others, so that they name the missing ranks themselves before its store goes away."""
    if not addr or not port:
        raise RendezvousError(
            f"{who} rank {rank}: no MASTER_ADDR/MASTER_PORT in the environment; init_component_group() works in "
            "workers launched by rlplace (job.launch), or pass master_addr= and master_port="
        )
    deadline = time.monotonic() + wait_s
    while True:
        store = _open_store(addr, port, rank, world, max(0.1, deadline - time.monotonic()), who)
        if store.add("arrived", 1) <= world:
            break
        del store
        if time.monotonic() >= deadline:
            raise RendezvousError(
                f"{who} rank {rank}: rank 0 at {addr}:{port} did not open a new rendezvous within {wait_s:g} s "
                "(its store still holds the last one): every rank must call destroy_component_group() and then "
                "init_component_group() to rejoin"
            )
        time.sleep(0.1)
    store.set(f"arrived/{rank}", where)
    deadline += _MASTER_GRACE_S if rank == 0 else 0.0
    pause = 0.005
    try:
        while store.add("arrived", 0) < world:
            if time.monotonic() >= deadline:
                missing = [r for r in range(world) if not store.check([f"arrived/{r}"])]
                del store  # rank 0 stops listening now, not when the traceback is collected
                raise RendezvousError(_missing_message(who, missing, world, wait_s))
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
    except dist.DistError as e:
        raise RendezvousError(
            f"{who} rank {rank}: rank 0 at {addr}:{port} closed the rendezvous before every rank arrived "
            f"({first_line(e, limit=200)}): it gave up waiting (its own error names who is missing) or died"
        ) from e
    return store


def _open_store(addr: str, port: int, rank: int, world: int, wait_s: float, who: str) -> Any:
    """Rank 0 hosts the TCPStore; the others connect to it, or say that rank 0 never listened."""
    timeout = datetime.timedelta(seconds=wait_s)
    try:
        return dist.TCPStore(addr, port, world, rank == 0, timeout=timeout, wait_for_workers=False)
    except Exception as e:
        why = first_line(e, limit=200)
        if rank == 0:
            raise RendezvousError(
                f"{who} rank 0 could not listen on {addr}:{port} ({why}); another process holds the "
                "port: pass master_port= to init_component_group(), or set RLPLACE_MASTER_PORT_RANGE for the job"
            ) from e
        raise RendezvousError(
            f"{who} rank {rank}: rank 0 did not arrive at {addr}:{port} within {wait_s:g} s "
            f"({why}). Rank 0 must call init_component_group() too; if it died or is stuck in its "
            f"constructor it never does: check `rlplace status`. Wait longer with "
            f"init_component_group(rendezvous_timeout_s=...) or {RENDEZVOUS_TIMEOUT_ENV}"
        ) from e


def _missing_message(who: str, missing: list[int], world: int, wait_s: float) -> str:
    p = placement()
    record = job_record()
    nodes = []
    for r in missing[:8]:
        node = record.node_of(p.component, r) if record else None
        address = record.nodes[node].address if record and node is not None and node in record.nodes else None
        nodes.append(f"rank {r} on node {node} ({address})" if node is not None else f"rank {r} (placed by Ray)")
    more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
    arrived = [r for r in range(world) if r not in set(missing)]
    return (
        f"{who}: {', '.join(nodes)}{more} did not arrive within {wait_s:g} s (ranks {format_ranks(arrived)} of "
        f"{world} did). Every worker of the component must call init_component_group(); a worker that died, "
        f"is stuck in its constructor or was never launched does not arrive: check `rlplace status`. Wait "
        f"longer with init_component_group(rendezvous_timeout_s=...) or {RENDEZVOUS_TIMEOUT_ENV}"
    )


# -- weight-sync groups (worker side; the driver is rlplace.runtime.sync) -------------------------------


@dataclass
class _SyncMember:
    """This worker's part in one sync group: its process groups (source index -> group and own rank)."""

    store: Any
    groups: dict[int, tuple[Any, int]] = field(default_factory=dict)


#: (sync name, id of the worker object) -> its part: one member per worker process, except in the driver, where
#: the workers of a driver-local component (`remote_eval: false`) are members side by side.
_sync: dict[tuple[str, int], _SyncMember] = {}
#: Two staging buffers per worker object, device and dtype, whatever the groups.
_staging: dict[tuple[int, str, torch.dtype, int], torch.Tensor] = {}


def sync_host(instance: object, name: str, wait_s: float) -> tuple[str, int]:
    """On the first source: host the group's TCPStore on a port the OS picks; returns (address, port)."""
    store = dist.TCPStore("0.0.0.0", 0, None, True, timeout=datetime.timedelta(seconds=wait_s), wait_for_workers=False)
    _sync[(name, id(instance))] = _SyncMember(store=store)
    return here().address, store.port


def sync_join(
    instance: object,
    name: str,
    address: str,
    port: int,
    memberships: list[tuple[int, int, int]],
    backend: str,
    wait_s: float,
) -> float:
    """Join the groups `memberships` = [(source index, my rank in its group, its size)] in order."""
    start = time.perf_counter()
    timeout = datetime.timedelta(seconds=wait_s)
    member = _sync.get((name, id(instance)))
    if member is None:
        store = dist.TCPStore(address, port, None, False, timeout=timeout, wait_for_workers=False)
        member = _sync[(name, id(instance))] = _SyncMember(store=store)
    for source, rank, size in memberships:
        prefixed = dist.PrefixStore(f"{name}/{source}", member.store)
        member.groups[source] = (_process_group(backend, prefixed, rank, size, timeout), rank)
    return time.perf_counter() - start


def sync_leave(instance: object, name: str) -> None:
    _sync.pop((name, id(instance)), None)


def sync_describe(instance: object, method: str, bucket_mb: float, counts: list[int] | None = None) -> dict[str, Any]:
    """This worker's tensors' layout (one hash per part: `counts` tensors per source, for a target fed by
    several sources; None: one part) and device, asked when the groups are built."""
    tensors = _tensors(instance, method)
    return {
        "layouts": [_layout_hash(part, bucket_mb) for part in _parts(tensors, counts)],
        "tensors": len(tensors),
        "bytes": sum(t.numel() * t.element_size() for t in tensors),
        "cuda": torch.cuda.is_available() and all(t.is_cuda for t in tensors),
        "gpu": f"{here().node_id}:{list(here().gpus)}",  # NCCL needs one rank per GPU
    }


def sync_send(instance: object, name: str, source: int, method: str, bucket_mb: float, ticket: dict) -> dict:
    """Broadcast this source's tensors, bucket by bucket, to its group (after the readiness check)."""
    tensors = _tensors(instance, method)
    return _transfer(instance, name, {source: tensors}, [_layout_hash(tensors, bucket_mb)], bucket_mb, ticket)


def sync_receive(
    instance: object,
    name: str,
    counts: list[int],
    method: str,
    bucket_mb: float,
    done_method: str,
    ticket: dict,
    sources: Sequence[int],
) -> dict:
    """Receive the tensors of `sources` (indices of the sync's sources, in order) in place (`counts`: tensors
    per source), then call `done_method()` if the class defines it."""
    parts = _parts(_tensors(instance, method), counts)
    layouts = [_layout_hash(part, bucket_mb) for part in parts]
    stats = _transfer(instance, name, dict(zip(sources, parts, strict=True)), layouts, bucket_mb, ticket)
    done = getattr(instance, done_method, None)
    if callable(done) and "aborted" not in stats:
        done()
    return stats


def _transfer(
    instance: object,
    name: str,
    parts: dict[int, list[torch.Tensor]],
    layouts: list[str],
    bucket_mb: float,
    ticket: dict,
) -> dict:
    """Check readiness with every member of the sync, then broadcast; `{"aborted": why}` if any member
    cannot take part (not in the groups any more, or its tensors changed), so that nobody broadcasts."""
    start = time.perf_counter()
    member = _sync.get((name, id(instance)))
    if member is None:
        return _abort(ticket, name, "restarted since the groups were built")
    if layouts != [ticket["layouts"][s] for s in parts]:
        return _abort(ticket, name, "weight tensors changed since the groups were built", member.store)
    verdict = _ready(member.store, name, ticket)
    if verdict != _GO:
        return {"aborted": verdict}
    moved = 0
    with torch.no_grad():
        for source, tensors in parts.items():
            group, rank = member.groups[source]
            buckets = group_buckets(tensors, int(bucket_mb * 2**20))
            moved += _broadcast_buckets(group, buckets, is_root=rank == 0, owner=id(instance))
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return {"bytes": moved, "seconds": time.perf_counter() - start}


#: The verdict of a sync every member checked in for: broadcast (any other verdict says why not).
_GO = "ok"


def _ready(store: Any, name: str, ticket: dict) -> str:
    """All members of sync `seq` check in on the group's store; the last one says `_GO`. A member that cannot
    take part says "abort: ..." instead, and never checks in, so nobody starts a broadcast that would wait
    for it. One store round trip each instead of a Ray round trip per sync from the driver."""
    seq = ticket["seq"]
    verdict_key = f"{name}/sync/{seq}"
    try:
        if store.add(f"{name}/ready/{seq}", 1) == ticket["members"]:
            store.compare_set(verdict_key, "", _GO)
            store.delete_key(f"{name}/ready/{seq - 1}")
            store.delete_key(f"{name}/sync/{seq - 1}")
        store.wait([verdict_key])
        verdict = store.get(verdict_key).decode()
    except dist.DistStoreError:
        return f"not every member was ready within {ticket['timeout_s']:g} s (one is busy in a long call, or hung)"
    except dist.DistError:
        return "the groups' store is gone (its host, train rank 0, restarted?)"
    return _GO if verdict == _GO else verdict.removeprefix("abort: ")


def _abort(ticket: dict, name: str, why: str, store: Any = None) -> dict:
    """Tell the others through the group's store (connecting to it when this process is not in the group;
    when the store itself is gone, the others find out on their own)."""
    try:
        if store is None:
            timeout = datetime.timedelta(seconds=min(5.0, ticket["timeout_s"]))
            store = dist.TCPStore(
                ticket["address"], ticket["port"], None, False, timeout=timeout, wait_for_workers=False
            )
        store.compare_set(f"{name}/sync/{ticket['seq']}", "", f"abort: {why}")
    except dist.DistError:
        pass
    return {"aborted": why}


def _broadcast_buckets(
    group: Any, buckets: Iterable[tuple[torch.device, list[torch.Tensor]]], *, is_root: bool, owner: int
) -> int:
    """One broadcast per bucket, double-buffered: while bucket k is on the wire, the root gathers bucket k+1
    into the other staging buffer and a target copies bucket k-1 out into its tensors. A bucket holding
    one contiguous tensor is broadcast in place, without staging."""
    moved = 0
    in_flight: tuple[Any, list[torch.Tensor], torch.Tensor | None] | None = None
    for slot, (device, tensors) in enumerate(buckets):
        numel = sum(t.numel() for t in tensors)
        staged = None
        if len(tensors) == 1 and tensors[0].is_contiguous():
            flat = tensors[0].detach().view(-1)
        else:
            flat = staged = _staging_buffer(owner, device, tensors[0].dtype, numel, slot % 2)
            if is_root:
                torch.cat([t.detach().reshape(-1) for t in tensors], out=flat)
        work = group.broadcast([flat], _root0())
        if in_flight is not None:
            _finish(*in_flight, is_root=is_root)
        in_flight = (work, tensors, staged)
        moved += numel * flat.element_size()
    if in_flight is not None:
        _finish(*in_flight, is_root=is_root)
    return moved


def _finish(work: Any, tensors: list[torch.Tensor], staged: torch.Tensor | None, *, is_root: bool) -> None:
    work.wait()
    if staged is not None and not is_root:
        for t, view in flat_views(tensors, staged):
            t.detach().copy_(view)


def _root0() -> Any:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    return opts


def _staging_buffer(owner: int, device: torch.device, dtype: torch.dtype, numel: int, slot: int) -> torch.Tensor:
    """Two reusable buffers (slots) per worker object, device and dtype, grown to the largest bucket seen."""
    key = (owner, str(device), dtype, slot)
    buf = _staging.get(key)
    if buf is None or buf.numel() < numel:
        _staging.pop(key, None)  # free the smaller one before allocating
        buf = _staging[key] = torch.empty(numel, dtype=dtype, device=device)
    return buf[:numel]


def _tensors(instance: object, method: str) -> list[torch.Tensor]:
    """The worker's weight tensors, each once (tied weights appear once)."""
    fn = getattr(instance, method, None)
    if not callable(fn):
        raise RlplaceError(
            f"{type(instance).__name__} has no method {method}(): collective weight sync needs it on the train and "
            "eval classes, returning the weight tensors (a list, a dict or an nn.Module) in the same order on both"
        )
    obj = fn()
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict(keep_vars=True).values()
    elif isinstance(obj, dict):
        obj = obj.values()
    elif isinstance(obj, torch.Tensor):
        obj = [obj]
    return unique_tensors(obj)


def _parts(tensors: list[torch.Tensor], counts: list[int] | None) -> list[list[torch.Tensor]]:
    """Split a target's tensors into one run per source (`counts` tensors each, in source order)."""
    if counts is None:
        return [tensors]
    if sum(counts) != len(tensors):
        raise RlplaceError(
            f"the sources hold {sum(counts)} weight tensors together ({counts} per source) but this target's "
            f"weight_tensors() returns {len(tensors)}: a target fed by every train rank lists every rank's "
            "tensors, in train-rank order"
        )
    out, at = [], 0
    for n in counts:
        out.append(tensors[at : at + n])
        at += n
    return out


def _layout_hash(tensors: list[torch.Tensor], bucket_mb: float) -> str:
    """Dtype and shape of every tensor in bucket order: equal on both sides or the bytes would land wrong."""
    buckets = group_buckets(tensors, int(bucket_mb * 2**20))
    shapes = [(str(t.dtype), tuple(t.shape), len(ts)) for _, ts in buckets for t in ts]
    return hashlib.sha1(repr(shapes).encode()).hexdigest()


def _process_group(backend: str, store: Any, rank: int, size: int, timeout: datetime.timedelta) -> Any:
    if backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, size, opts)
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, size, timeout)
    raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
