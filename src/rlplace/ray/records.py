"""The one record per running job in Ray's internal key-value store (GCS), written from the job's state.

What it holds: the components' rank -> node map and rendezvous (MASTER_ADDR/MASTER_PORT), their actor names
where a resize renumbered them and their elastic ranges, the nodes serving the job's ranks (spares marked), the
ranks that are lost or failed, and the last node events. Who reads it:
`rlplace status` (which job runs which ranks where, and which nodes are in trouble), the master-port
allocation of other jobs (so two jobs never hand out the same port on one node), and a worker's rendezvous
error message (which peer, planned on which node, did not arrive). Workers do not need it to start:
everything a worker needs travels with the actor as constructor arguments (`rlplace.ray.rendezvous`).

Cost: one KV write when the job starts and one when its masters are chosen (at its first launch), whatever
the number of workers (the value is compressed JSON: 48 KB for 4,096 nodes and two components of 32,768
workers); rewritten at every change of the state after that (a node event, a takeover). Deleted at
shutdown. A record whose driver died stays until the key is deleted; `read_all(live_only=True)` leaves it out.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import zlib
from dataclasses import dataclass, field

from rlplace.lifecycle import NodeHealth
from rlplace.ray.labels import SPARE_LABEL
from rlplace.ray.port import Cluster
from rlplace.ray.state import JobState, NodeEvent

log = logging.getLogger(__name__)

_PREFIX = "job/"
#: Node events kept in the record (the job's own list keeps them all).
_EVENTS_KEPT = 50


@dataclass(frozen=True)
class NodeRecord:
    """A node serving one of a job's ranks: its Ray id and IP address (as the job's driver saw it when
    writing), and whether it is a hot spare that took the rank over."""

    node_id: str | None
    address: str | None
    spare: bool = False


@dataclass(frozen=True)
class ComponentRecord:
    """A component's ranks and rendezvous: `node_ranks[r]` is rank r's node rank (None: Ray chose, strategy
    default). `master_*` are None for such unpinned components: their rank 0 chooses at start-up."""

    world_size: int
    node_ranks: tuple[int | None, ...]
    master_node_rank: int | None = None
    master_addr: str | None = None
    master_port: int | None = None
    in_driver: bool = False  # `remote_<component>: false`: plain objects in the job's driver process
    #: rank -> actor name where it is not `rlplace:<component>:<rank>` (a resize renumbered the worker).
    names: dict[int, str] = field(default_factory=dict)
    elastic: tuple[int, int, int] | None = None  # (min, max, start) of an elastic component (`cluster.elastic`)

    def name(self, component: str, rank: int) -> str:
        return self.names.get(rank) or f"rlplace:{component}:{rank}"


@dataclass(frozen=True)
class JobRecord:
    """What a job published: its name and Ray namespace, its nodes, its components, its nodes' trouble."""

    job: str
    namespace: str
    instance: str  # unique per Job object: two runs under one name never mix
    ray_job_id: str  # the driver's Ray job id (hex): the record is stale once that job is dead
    written_at: float
    nodes: dict[int, NodeRecord] = field(default_factory=dict)
    components: dict[str, ComponentRecord] = field(default_factory=dict)
    lost: dict[int, tuple[float, float]] = field(default_factory=dict)  # rank -> (since, window ends), wall clock
    failed: tuple[int, ...] = ()
    events: tuple[NodeEvent, ...] = ()
    driver_pid: int = 0  # where the driver-local components run
    driver_node_id: str = ""

    @classmethod
    def of(cls, state: JobState, ray_job_id: str, *, written_at: float, driver: tuple[int, str] = (0, "")) -> JobRecord:
        """The record of `state` as it is now (`written_at`: the cluster's wall clock)."""
        components = {}
        for name in state.components:
            workers = state.workers(name)
            m = state.master(name)
            r = state.plan.elastic.get(name)
            components[name] = ComponentRecord(
                world_size=len(workers),
                node_ranks=tuple(w.node_rank for w in workers),
                master_node_rank=m.node_rank if m else None,
                master_addr=m.address if m else None,
                master_port=m.port if m else None,
                in_driver=bool(workers) and all(w.in_driver for w in workers),
                names={w.rank: w.actor_name for w in workers if w.actor_name},
                elastic=(r.min, r.max, r.start) if r else None,
            )
        troubles = state.troubles()
        return cls(
            job=state.name,
            namespace=state.namespace,
            instance=state.instance,
            ray_job_id=ray_job_id,
            written_at=written_at,
            nodes={
                n.rank: NodeRecord(n.node_id, n.address, n.labels.get(SPARE_LABEL) == "true") for n in state.live.nodes
            },
            components=components,
            lost={r: (t.since, t.until) for r, t in troubles.items() if t.kind == NodeHealth.LOST},
            failed=tuple(sorted(r for r, t in troubles.items() if t.kind == NodeHealth.FAILED)),
            events=tuple(state.events[-_EVENTS_KEPT:]),
            driver_pid=driver[0],
            driver_node_id=driver[1],
        )

    def node_of(self, component: str, rank: int) -> int | None:
        """The node rank of `component` rank `rank` (None when unpinned or unknown)."""
        c = self.components.get(component)
        return c.node_ranks[rank] if c and 0 <= rank < len(c.node_ranks) else None

    def worker_nodes(self) -> dict[str, int | None]:
        """Actor name (`rlplace:<component>:<rank>`, or the name a renumbered worker kept) -> its node rank."""
        return {comp.name(c, r): n for c, comp in self.components.items() for r, n in enumerate(comp.node_ranks)}

    def worker_ranks(self) -> dict[str, tuple[str, int]]:
        """Actor name -> (component, its rank now)."""
        return {comp.name(c, r): (c, r) for c, comp in self.components.items() for r in range(comp.world_size)}

    def ports_by_address(self) -> dict[str, set[int]]:
        """address -> the master ports this job holds there."""
        out: dict[str, set[int]] = {}
        for c in self.components.values():
            if c.master_addr and c.master_port:
                out.setdefault(c.master_addr, set()).add(c.master_port)
        return out

    def to_bytes(self) -> bytes:
        data = {
            "job": self.job,
            "namespace": self.namespace,
            "instance": self.instance,
            "ray_job_id": self.ray_job_id,
            "written_at": self.written_at,
            "nodes": {str(k): [v.node_id, v.address, v.spare] for k, v in self.nodes.items()},
            "components": {
                name: [
                    c.world_size,
                    list(c.node_ranks),
                    c.master_node_rank,
                    c.master_addr,
                    c.master_port,
                    c.in_driver,
                    {str(r): n for r, n in c.names.items()},
                    list(c.elastic) if c.elastic else None,
                ]
                for name, c in self.components.items()
            },
            "lost": {str(k): list(v) for k, v in self.lost.items()},
            "failed": list(self.failed),
            "events": [e.to_dict() for e in self.events],
            "driver": [self.driver_pid, self.driver_node_id],
        }
        return zlib.compress(json.dumps(data, separators=(",", ":")).encode())

    @classmethod
    def from_bytes(cls, raw: bytes) -> JobRecord:
        """The record `raw` holds; the same (immutable) record for the same bytes, decoded once: `status` and the
        simulation's explorer read every record after every change."""
        return _decoded(raw)

    @classmethod
    def _decode(cls, raw: bytes) -> JobRecord:
        d = json.loads(zlib.decompress(raw))
        return cls(
            job=d["job"],
            namespace=d["namespace"],
            instance=d["instance"],
            ray_job_id=d["ray_job_id"],
            written_at=d["written_at"],
            nodes={int(k): NodeRecord(*v) for k, v in d["nodes"].items()},
            components={name: _component(entry) for name, entry in d["components"].items()},
            lost={int(k): (since, until) for k, (since, until) in d.get("lost", {}).items()},
            failed=tuple(d.get("failed", ())),
            events=tuple(NodeEvent.from_dict(e) for e in d.get("events", ())),
            driver_pid=d.get("driver", [0, ""])[0],
            driver_node_id=d.get("driver", [0, ""])[1],
        )


@functools.lru_cache(maxsize=64)
def _decoded(raw: bytes) -> JobRecord:
    return JobRecord._decode(raw)


def _component(entry: list) -> ComponentRecord:
    """A component's entry: size, ranks, master node rank, address and port, in driver, then (records written
    since resizes renumber) names and elastic range; older entries end earlier."""
    size, ranks, node_rank, address, port, in_driver, names, elastic = [*entry, *[None] * (8 - len(entry))][:8]
    return ComponentRecord(
        size,
        tuple(ranks),
        node_rank,
        address,
        port,
        bool(in_driver),
        names={int(r): n for r, n in (names or {}).items()},
        elastic=(elastic[0], elastic[1], elastic[2]) if elastic else None,
    )


class RecordWriter:
    """Keeps a job's record equal to its state: subscribed to the state, it rewrites the record after every
    change (one KV write); `last` is what it wrote last (the master-port allocation compares it with other
    jobs' records)."""

    def __init__(self, cluster: Cluster, state: JobState, ray_job_id: str, driver: tuple[int, str]):
        self._cluster = cluster
        self._state = state
        self._ray_job_id = ray_job_id
        self._driver = driver  # the driver's pid and Ray node id
        self._lock = threading.Lock()  # one snapshot-and-write at a time, so the newest state is written last
        self.last: JobRecord | None = None

    def write(self) -> JobRecord | None:
        """Write the record of the state as it is now (nothing once the job is shut down: its record goes)."""
        with self._lock:
            if self._state.closed:
                return None
            wall = self._cluster.wall()
            self.last = JobRecord.of(self._state, self._ray_job_id, written_at=wall, driver=self._driver)
            self._cluster.kv_put(key(self._state.namespace, self._state.name), self.last.to_bytes())
            return self.last

    def on_change(self, state: JobState) -> None:
        """The state's subscriber: a record that cannot be written never fails the change that caused it."""
        try:
            self.write()
        except Exception as e:  # the GCS is gone (Ray shut down under the job): the record goes with it
            log.debug("could not write the record of job %s: %s", self._state.name, e)

    def delete(self) -> None:
        """Delete the record of a job that is shut down (its state closed: nothing writes it again)."""
        with self._lock:
            if self.last is not None:
                delete(self._cluster, self._state.namespace, self._state.name)
                self.last = None


def key(namespace: str, job: str) -> str:
    return f"{_PREFIX}{namespace}/{job}"


def read(cluster: Cluster, namespace: str, job: str) -> JobRecord | None:
    raw = cluster.kv_get(key(namespace, job))
    return JobRecord.from_bytes(raw) if raw else None


def read_all(cluster: Cluster, *, live_only: bool = False) -> list[JobRecord]:
    """Every job record on the cluster (with `live_only`, only those whose driver still runs)."""
    records = []
    for k in cluster.kv_keys(_PREFIX):
        raw = cluster.kv_get(k)
        if raw:
            records.append(JobRecord.from_bytes(raw))
    if live_only:
        alive = cluster.live_jobs()
        records = [r for r in records if r.ray_job_id in alive]
    return records


def delete(cluster: Cluster, namespace: str, job: str) -> None:
    cluster.kv_delete(key(namespace, job))
