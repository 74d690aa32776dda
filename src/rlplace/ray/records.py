"""One record per running job in Ray's internal key-value store (GCS): its components' rank -> node map
and rendezvous (MASTER_ADDR/MASTER_PORT), readable from outside the job's driver.

Who reads it: `rlplace status` (which job runs which ranks where), the master-port allocation of other
jobs (so two jobs never hand out the same port on one node), and a worker's rendezvous error message
(which peer, planned on which node, did not arrive). Workers do not need it to start: everything a
worker needs travels with the actor as constructor arguments (`rlplace.ray.rendezvous`).

Cost: one write per job, at its first launch, whatever the number of workers (the value is compressed
JSON: 48 KB for 4,096 nodes and two components of 32,768 workers); rewritten only when a component's
rank 0 moves to another node (a spare took over its node). Deleted at shutdown. A record whose driver
died stays until the key is deleted, and `read_all(live_only=True)` leaves it out.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

from rlplace.ray import _compat

_PREFIX = "job/"


@dataclass(frozen=True)
class NodeRecord:
    """A node a job uses: its Ray id and IP address (as the job's driver saw it when writing)."""

    node_id: str | None
    address: str | None


@dataclass(frozen=True)
class ComponentRecord:
    """A component's ranks and rendezvous: `node_ranks[r]` is rank r's node rank (None: Ray chose, strategy
    default). `master_*` are None for such unpinned components: their rank 0 chooses at start-up."""

    world_size: int
    node_ranks: tuple[int | None, ...]
    master_node_rank: int | None = None
    master_addr: str | None = None
    master_port: int | None = None


@dataclass(frozen=True)
class JobRecord:
    """What a job published: its name and Ray namespace, its nodes and its components."""

    job: str
    namespace: str
    instance: str  # unique per Job object: two runs under one name never mix
    ray_job_id: str  # the driver's Ray job id (hex): the record is stale once that job is dead
    written_at: float
    nodes: dict[int, NodeRecord] = field(default_factory=dict)
    components: dict[str, ComponentRecord] = field(default_factory=dict)

    def node_of(self, component: str, rank: int) -> int | None:
        """The node rank of `component` rank `rank` (None when unpinned or unknown)."""
        c = self.components.get(component)
        return c.node_ranks[rank] if c and 0 <= rank < len(c.node_ranks) else None

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
            "nodes": {str(k): [v.node_id, v.address] for k, v in self.nodes.items()},
            "components": {
                name: [c.world_size, list(c.node_ranks), c.master_node_rank, c.master_addr, c.master_port]
                for name, c in self.components.items()
            },
        }
        return zlib.compress(json.dumps(data, separators=(",", ":")).encode())

    @classmethod
    def from_bytes(cls, raw: bytes) -> JobRecord:
        d = json.loads(zlib.decompress(raw))
        return cls(
            job=d["job"],
            namespace=d["namespace"],
            instance=d["instance"],
            ray_job_id=d["ray_job_id"],
            written_at=d["written_at"],
            nodes={int(k): NodeRecord(*v) for k, v in d["nodes"].items()},
            components={
                name: ComponentRecord(size, tuple(ranks), mnode, maddr, mport)
                for name, (size, ranks, mnode, maddr, mport) in d["components"].items()
            },
        )


def key(namespace: str, job: str) -> str:
    return f"{_PREFIX}{namespace}/{job}"


def write(record: JobRecord) -> None:
    """Publish (or replace) a job's record: one KV write."""
    _compat.kv_put(key(record.namespace, record.job), record.to_bytes())


def read(namespace: str, job: str) -> JobRecord | None:
    raw = _compat.kv_get(key(namespace, job))
    return JobRecord.from_bytes(raw) if raw else None


def read_all(*, live_only: bool = False) -> list[JobRecord]:
    """Every job record on the connected cluster (with `live_only`, only those whose driver still runs)."""
    records = []
    for k in _compat.kv_keys(_PREFIX):
        raw = _compat.kv_get(k.decode())
        if raw:
            records.append(JobRecord.from_bytes(raw))
    if live_only:
        alive = _compat.live_ray_jobs()
        records = [r for r in records if r.ray_job_id in alive]
    return records


def delete(namespace: str, job: str) -> None:
    _compat.kv_delete(key(namespace, job))
