"""Weight sync from train workers to eval workers: through Ray's object store, or a torch.distributed broadcast.

`transport="object_store"`: one object per source rank per sync, whatever the number of eval workers:
the train worker's return value is stored once in its node's object store and every eval worker
receives a reference to that same object, so Ray moves it at most once per node (peers that `ray.put`
per target, or send through the driver, copy it once per worker). The driver never fetches the weights.
Works with any picklable weights (`get_weights()` -> `set_weights(weights)`).

`transport="collective"`: every source rank broadcasts its `weight_tensors()` over a process group of
its own that joins it with every target (`rlplace.runtime.collective`: Gloo, or NCCL where every member
has its tensors on a GPU), in flat buckets per device and dtype, straight into the targets' tensors.
The groups are built on the first sync and kept; a member that restarted since is noticed before the
next broadcast (it is no longer in the group) and the groups are rebuilt, and so are they when the members
changed (a worker relaunched on a spare, or a train or eval resize: the next sync builds them for the members
there are then). The layouts (dtype and shape
of every tensor, in bucket order) are compared before any byte moves, so a mismatch is an error naming
the worker, not corrupted weights.

`transport="auto"` (the default): collective when torch is installed and the train and eval classes
define `weight_tensors()`, else the object store.

Every call on a worker goes through the port its group's calls go through (`Group.cluster`, a
`rlplace.ray.port.Cluster`: Ray's, or the simulation's), so the simulation runs a sync as it runs the rest of a job.
"""

from __future__ import annotations

import importlib.util
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from rlplace.errors import ConfigError, PlacementError, Problem
from rlplace.groups import Group
from rlplace.plan import PlanTopology
from rlplace.ray.port import Cluster

Transport = Literal["auto", "object_store", "collective"]


@dataclass(frozen=True)
class SyncReport:
    """What one sync did: which train ranks were read, how many objects and eval workers, how long.

    `bytes` is one copy of the weights (what the sources sent; every target received as much), `transport`
    the path that ran ("object_store" or "collective"), `backend` the collective's ("gloo", "nccl", "")."""

    sources: tuple[int, ...]
    objects: int
    targets: int
    seconds: float
    transport: str = "object_store"
    bytes: int = 0
    backend: str = ""

    @property
    def gb_per_s(self) -> float:
        """Weight bytes per second until every target had them (1 GB = 10**9 bytes)."""
        return self.bytes / 1e9 / self.seconds if self.seconds > 0 else 0.0


Source = Literal["rank0", "all", "nearest"]


def sync_weights(
    train: Group,
    targets: Sequence[Group],
    *,
    source: Source = "rank0",
    topology: PlanTopology | None = None,
    transport: Transport = "auto",
    get_method: str = "get_weights",
    set_method: str = "set_weights",
    tensors_method: str = "weight_tensors",
    done_method: str = "weights_updated",
    backend: str | None = None,
    bucket_mb: float = 256.0,
    timeout_s: float = 300.0,
) -> SyncReport:
    """Send train rank 0's weights (or every rank's, `source="all"`) to every worker of `targets`.

    `source="nearest"` is for data-parallel train ranks, which all hold the same weights: each target gets them
    from the train rank on its own node, else from one in its NVLink domain, rack or zone (`topology`, the
    plan's: `job.plan.topology`; without it, only the node counts), else from rank 0: so weight sync crosses a
    rack only where the plan put no trainer in the receiver's rack, as the plan's estimate counts it.

    Object store: `get_method()` once per source, then `set_method(*weights)` on every target (one
    positional argument per source rank it is fed by). Collective: `tensors_method()` on both sides returns the
    tensors (a list, a dict or an nn.Module); the targets' are overwritten in place, then their
    `done_method()` runs if defined. With `source="all"` a target's tensors are every train rank's, in
    rank order. `backend` ("gloo"/"nccl") overrides the collective's choice; `timeout_s` bounds building
    the groups and each broadcast. Returns when every target has the weights.
    """
    if source not in ("rank0", "all", "nearest"):
        raise ConfigError(
            Problem(path="source", value=source, message=f"got {source!r}; must be 'rank0', 'all' or 'nearest'")
        )
    if transport not in ("auto", "object_store", "collective"):
        raise ConfigError(
            Problem(
                path="transport",
                value=transport,
                message=f"got {transport!r}; must be 'auto', 'object_store' or 'collective'",
            )
        )
    routes = _routes(train, targets, source, topology)
    if transport == "auto":
        transport = "collective" if _collective_possible(train, routes, targets, tensors_method) else "object_store"
    start = time.perf_counter()
    if transport == "collective":
        nbytes, used = _collective(train, routes, targets, tensors_method, done_method, backend, bucket_mb, timeout_s)
    else:
        nbytes, used = _object_store(train, routes, targets, get_method, set_method), ""
    return SyncReport(
        sources=routes.ranks,
        objects=len(routes.ranks) if transport == "object_store" else 0,
        targets=sum(len(g.actors) for g in targets),
        seconds=time.perf_counter() - start,
        transport=transport,
        bytes=nbytes,
        backend=used,
    )


@dataclass(frozen=True)
class _Routes:
    """Who sends to whom in one sync: the train ranks that send (in rank order), and for every target, group by
    group, the indices into them of the sources it receives from, in order."""

    ranks: tuple[int, ...]
    feeds: tuple[tuple[tuple[int, ...], ...], ...]

    def senders(self, train: Group) -> list[Any]:
        return [train.actors[r] for r in self.ranks]

    def received(self, per_source: Sequence[int]) -> int:
        """What one target received, of the sources' bytes (every target receives as much: one copy of the
        weights, or with `source="all"` every rank's part)."""
        feed = next((f for feeds in self.feeds for f in feeds), range(len(self.ranks)))
        return sum(per_source[i] for i in feed)


def _routes(train: Group, targets: Sequence[Group], source: Source, topology: PlanTopology | None) -> _Routes:
    """The routes of `source`: rank 0, or every rank, to every target; or for "nearest", each target from the
    lowest train rank of the nearest node holding one (`PlanTopology.nearest`, the estimate's rule), else rank 0
    (a target or trainer Ray placed has no known node)."""
    if source != "nearest":
        ranks = tuple(range(1 if source == "rank0" else len(train.actors)))
        every = tuple(range(len(ranks)))
        return _Routes(ranks, tuple(tuple(every for _ in g.actors) for g in targets))
    holders: dict[int, int] = {}  # node -> the lowest train rank on it
    for w in train.workers:
        if w.node_rank is not None:
            holders.setdefault(w.node_rank, w.rank)
    nearest = (topology or PlanTopology()).nearest(sorted(holders, key=holders.__getitem__))
    picks = [
        [0 if w.node_rank is None else holders.get(nearest(w.node_rank, -1), 0) for w in g.workers] for g in targets
    ]
    ranks = tuple(sorted({r for p in picks for r in p}))
    index = {r: i for i, r in enumerate(ranks)}
    return _Routes(ranks, tuple(tuple((index[r],) for r in p) for p in picks))


def _collective_possible(train: Group, routes: _Routes, targets: Sequence[Group], method: str) -> bool:
    actors = [*routes.senders(train), *(a for g in targets for a in g.actors)]
    return importlib.util.find_spec("torch") is not None and all(hasattr(a, method) for a in actors)


def _object_store(train: Group, routes: _Routes, targets: Sequence[Group], get_method: str, set_method: str) -> int:
    weights = [train.cluster.call(actor, get_method) for actor in routes.senders(train)]

    def apply(group: Group, actor: Any, feed: tuple[int, ...]) -> Any:
        return group.cluster.call(actor, set_method, *(weights[i] for i in feed))

    applied = [
        [apply(group, a, feed) for a, feed in zip(group.actors, feeds, strict=True)]
        for group, feeds in zip(targets, routes.feeds, strict=True)
    ]
    train.get(weights, get_method, ranks=routes.ranks)  # first, so a train-side failure is reported by its name
    for group, refs in zip(targets, applied, strict=True):
        group.get(refs, set_method)
    sizes = train.cluster.object_nodes(weights)
    return routes.received([int(sizes.get(ref, {}).get("object_size") or 0) for ref in weights])


# -- collective -----------------------------------------------------------------------------------------


def _call(instance: object, function: str, *args: Any) -> Any:
    """Runs in the worker (`__ray_call__`): the driver never imports torch."""
    from rlplace.runtime import collective

    return getattr(collective, function)(instance, *args)


@dataclass
class _SyncGroups:
    """The sync groups built for one train group and one list of targets, and what every sync checks."""

    name: str
    backend: str
    members: list[Any]
    address: str  # the groups' TCPStore, hosted by the first source
    port: int
    layouts: list[str]  # per source: the layout hash every member must still have
    counts: list[int]  # per source: its number of tensors
    timeout_s: float
    seq: int = 0
    member_ids: tuple[str, ...] = ()  # the actor ids the groups were built for (sources, then targets)


_built: weakref.WeakKeyDictionary[Any, dict[tuple, _SyncGroups]] = weakref.WeakKeyDictionary()


def _collective(
    train: Group,
    routes: _Routes,
    targets: Sequence[Group],
    method: str,
    done_method: str,
    backend: str | None,
    bucket_mb: float,
    timeout_s: float,
) -> tuple[int, str]:
    """Build the groups if needed, then one round of calls per sync. If a member cannot take part (it
    restarted, or its tensors changed), nobody broadcasts: the groups are rebuilt (a changed layout then
    fails with the worker's name) and the sync runs again, once."""
    # Groups per routing and list of target groups; they belong to exactly these members: when a source or
    # target changed (relaunched on a spare, added or removed by a resize), they are built again for the members
    # there are now.
    key = (routes, tuple(id(g) for g in targets))
    members = (*(train.actor_ids[r] for r in routes.ranks), *(i for g in targets for i in g.actor_ids))
    built = _built.setdefault(train, {}).get(key)
    stale = built is not None and (built.member_ids != members or bool(backend and backend != built.backend))
    why = ""
    for _ in range(2):
        if built is None or stale or why:
            built = _prepare(train, routes, targets, method, backend, bucket_mb, timeout_s, stale=built)
            built.member_ids = members
            _built[train][key] = built
            stale = False
        results = _run(train, routes, targets, built, method, done_method, bucket_mb)
        why = next((r["aborted"] for r in results if "aborted" in r), "")
        if not why:
            return routes.received([r["bytes"] for r in results[: len(routes.ranks)]]), built.backend
    raise PlacementError(f"weight sync could not run twice in a row: a member reported: {why}")


def _run(
    train: Group,
    routes: _Routes,
    targets: Sequence[Group],
    built: _SyncGroups,
    method: str,
    done_method: str,
    bucket_mb: float,
) -> list[dict]:
    """One sync: every source sends, every target receives from its sources; results of the sources first."""
    built.seq += 1
    ticket = {
        "seq": built.seq,
        "members": len(built.members),
        "layouts": built.layouts,
        "address": built.address,
        "port": built.port,
        "timeout_s": built.timeout_s,
    }
    name = built.name
    senders = enumerate(routes.senders(train))
    sends = [_thunk(train.cluster, a, "sync_send", name, i, method, bucket_mb, ticket) for i, a in senders]

    def receives(group: Group, feeds: tuple[tuple[int, ...], ...]) -> list[Callable[[], Any]]:
        def receive(actor: Any, feed: tuple[int, ...]) -> Callable[[], Any]:
            counts = [built.counts[i] for i in feed]
            args = (name, counts, method, bucket_mb, done_method, ticket, feed)
            return _thunk(group.cluster, actor, "sync_receive", *args)

        return [receive(a, feed) for a, feed in zip(group.actors, feeds, strict=True)]

    calls = [(g, receives(g, feeds)) for g, feeds in zip(targets, routes.feeds, strict=True)]
    sent_refs, *received_refs = _start_all([(train, sends), *calls])
    received = _collect(targets, received_refs, "sync_receive", None)  # each wait is bounded by the groups' timeout
    sent = train.get(sent_refs, "sync_send", None, ranks=routes.ranks)
    return [*sent, *(r for rs in received for r in rs)]


def _prepare(
    train: Group,
    routes: _Routes,
    targets: Sequence[Group],
    method: str,
    backend: str | None,
    bucket_mb: float,
    timeout_s: float,
    stale: _SyncGroups | None,
) -> _SyncGroups:
    """Ask every member for its layout (a mismatch is an error naming the worker), choose the backend, build."""
    described, target_described = _describe(train, routes, targets, method, bucket_mb, timeout_s)
    _check_layouts(train, routes, described, targets, target_described)
    chosen = backend or _backend([*described, *(d for ds in target_described for d in ds)])
    built = _build(train, routes, targets, chosen, timeout_s, stale)
    built.layouts = [d["layouts"][0] for d in described]
    built.counts = [d["tensors"] for d in described]
    return built


def _backend(described: list[dict]) -> str:
    """NCCL when every member's tensors are on a GPU of its own; Gloo otherwise (also when colocated workers
    share a GPU: NCCL refuses two ranks on one device)."""
    on_gpus = all(d["cuda"] for d in described)
    return "nccl" if on_gpus and len({d["gpu"] for d in described}) == len(described) else "gloo"


def _describe(
    train: Group,
    routes: _Routes,
    targets: Sequence[Group],
    method: str,
    bucket_mb: float,
    timeout_s: float,
) -> tuple[list[dict], list[list[dict]]]:
    """Every member's layout and devices. Where every target is fed by one source the targets are asked at the
    same time; with `source="all"`, after the sources (a target splits its tensors by the sources' counts)."""
    sent = [_thunk(train.cluster, a, "sync_describe", method, bucket_mb) for a in routes.senders(train)]
    if all(len(feed) == 1 for feeds in routes.feeds for feed in feeds):
        refs, *target_refs = _start_all(
            [(train, sent), *((g, _thunks(g, "sync_describe", method, bucket_mb)) for g in targets)]
        )
        described = train.get(refs, "sync_describe", timeout_s, ranks=routes.ranks)
    else:
        described = train.get(_start_all([(train, sent)])[0], "sync_describe", timeout_s, ranks=routes.ranks)
        counts = [d["tensors"] for d in described]
        target_refs = _start_all([(g, _thunks(g, "sync_describe", method, bucket_mb, counts)) for g in targets])
    return described, _collect(targets, target_refs, "sync_describe", timeout_s)


def _thunk(cluster: Cluster, actor: Any, function: str, *args: Any) -> Callable[[], Any]:
    """Running `collective.<function>(*args)` in the worker `actor`, to be started by `_start_all`."""
    return lambda: cluster.run_on(actor, _call, function, *args)


def _thunks(group: Group, function: str, *args: Any) -> list[Callable[[], Any]]:
    return [_thunk(group.cluster, a, function, *args) for a in group.actors]


def _start_all(calls: Sequence[tuple[Group, Sequence[Callable[[], Any]]]]) -> list[list[Any]]:
    """Start calls on the members of a sync so that none waits for one not started yet; refs per group.

    Calls on actors return at once. A driver-local member's call (`Group.in_driver`: `remote_eval: false`)
    runs to its end when made, and joining the groups, checking in and broadcasting end only when every
    member takes part: those run on threads of their own, after every actor call is out."""
    refs: list[list[Any] | None] = [None if g.in_driver else [start() for start in starts] for g, starts in calls]
    local = [(i, starts) for i, (g, starts) in enumerate(calls) if g.in_driver]
    if local:
        with ThreadPoolExecutor(max_workers=sum(len(starts) for _, starts in local)) as pool:
            running = [(i, [pool.submit(start) for start in starts]) for i, starts in local]
            for i, futures in running:
                refs[i] = [f.result() for f in futures]
    return [r or [] for r in refs]


def _collect(groups: Sequence[Group], refs: list[list[Any]], what: str, timeout_s: float | None) -> list[list[Any]]:
    """Results per group; a dead or silent worker becomes a PlacementError naming it."""
    return [g.get(r, what, timeout_s) for g, r in zip(groups, refs, strict=True)]


def _check_layouts(
    train: Group, routes: _Routes, sources: list[dict], targets: Sequence[Group], described: list[list[dict]]
) -> None:
    """Every target's tensors must match its sources' dtype for dtype and shape for shape."""
    for group, feeds, ds in zip(targets, routes.feeds, described, strict=True):
        for worker, feed, d in zip(group.workers, feeds, ds, strict=True):
            if d["layouts"] != [sources[i]["layouts"][0] for i in feed]:
                src = train.workers[routes.ranks[feed[0]]].name
                first = sources[feed[0]]
                raise PlacementError(
                    f"weight sync: {worker.name}'s weight tensors ({d['tensors']} tensors, {d['bytes']:,} bytes) do "
                    f"not match {src}'s ({first['tensors']} tensors, {first['bytes']:,} bytes) in dtype "
                    "and shape, in order; both classes' weight_tensors() must return the same tensors in the same "
                    "order (the object store transport, get_weights/set_weights, has no such constraint)"
                )


def _build(
    train: Group,
    routes: _Routes,
    targets: Sequence[Group],
    backend: str,
    timeout_s: float,
    stale: _SyncGroups | None,
) -> _SyncGroups:
    """Host the store on the first source, then have every member join its groups, all at once: one group per
    source, of it (rank 0) and the targets it feeds (ranks 1.., in target order)."""
    if stale is not None:  # drop the old groups where they still exist (fire and forget)
        for actor in stale.members:  # (sources, then targets: every group of a job shares its port)
            train.cluster.run_on(actor, _call, "sync_leave", stale.name)
    name = uuid.uuid4().hex[:12]
    sources = routes.senders(train)
    host = train.cluster.run_on(sources[0], _call, "sync_host", name, timeout_s)
    address, port = train.get([host], "sync_host", timeout_s, ranks=routes.ranks[:1])[0]
    fed = [feed for feeds in routes.feeds for feed in feeds]
    sizes = [1 + sum(i in feed for feed in fed) for i in range(len(sources))]

    def join(group: Group, actor: Any, memberships: list[tuple[int, int, int]]) -> Callable[[], Any]:
        return _thunk(group.cluster, actor, "sync_join", name, address, port, memberships, backend, timeout_s)

    source_joins = [join(train, a, [(i, 0, sizes[i])]) for i, a in enumerate(sources)]
    taken = [0] * len(sources)  # targets given a rank in each source's group so far
    target_joins: list[tuple[Group, list[Callable[[], Any]]]] = []
    for g, feeds in zip(targets, routes.feeds, strict=True):
        starts = []
        for actor, feed in zip(g.actors, feeds, strict=True):
            for i in feed:
                taken[i] += 1
            starts.append(join(g, actor, [(i, taken[i], sizes[i]) for i in feed]))
        target_joins.append((g, starts))
    source_refs, *target_refs = _start_all([(train, source_joins), *target_joins])
    _collect(targets, target_refs, "sync_join", timeout_s)
    train.get(source_refs, "sync_join", timeout_s, ranks=routes.ranks)
    members = [*sources, *(a for g in targets for a in g.actors)]
    return _SyncGroups(name, backend, members, address, port, layouts=[], counts=[], timeout_s=timeout_s)
