"""What `rlplace status` shows, read off a cluster through the port: the live jobs' workers, where each runs and in
which state, and the nodes that are not plainly healthy.

Read from the GCS (the actor and job tables), not the dashboard, so it works on clusters started with
`include_dashboard=False` and needs no extra port. Workers are the actors named `rlplace:<component>:<rank>`
of jobs whose driver is still running; a worker that died in a live job is listed too (that is what a
user runs `status` for). The GPUs a worker holds are asked from the worker itself (a function run on the
instance, no method of the user's class), with a short timeout: a worker busy in a long call shows `?` rather
than hang the command.

Which ranks each job runs where, and its nodes' trouble, come from the one record each job keeps in the GCS
(`rlplace.ray.records`, written from the job's state): a lost node is shown
LOST with how long ago and what the job waits for, workers that are not running (restarting, pending,
dead) are shown on their planned node with no PID (the actor table keeps the dead process's), and
workers on a spare are shown on it. A node whose raylet refuses connections is shown LOST before Ray's
health checks declare it dead, and its workers are not shown ALIVE. A node Ray is draining (a preemption
notice, `rlplace drain`) is shown DRAINING with its deadline and what the job did about it, whether or not a job
runs there.

In the Ray layer, not in the command, so that the simulation's explorer can read status off a `SimCluster` after
every step and check it against the job's state (`rlplace.sim.explore`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlplace.lifecycle import EventKind, NodeStatus, WorkerState
from rlplace.ray.ray_port import RAY

if TYPE_CHECKING:
    from rlplace.ray.port import Cluster
    from rlplace.ray.records import JobRecord

PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class WorkerRow:
    name: str
    component: str
    rank: int
    node: str  # "node 2" (rank label), "node 2 (spare 10.0.0.7)", else the IP; planned node unless running
    gpus: str  # "0,1", "-" for none, "?" when the worker did not answer in time
    state: str  # a WorkerState: Ray's actor state as its actor table gives it, LOST, or DRIVER
    restarts: int
    pid: int | None  # None unless the worker's process is running
    job: str


@dataclass(frozen=True)
class NodeRow:
    """A node of a live job that is not plainly healthy: lost, failed, or served by a spare; or any node Ray is
    draining."""

    node: str  # "node 1"
    state: NodeStatus
    since: float  # wall-clock time of the loss or takeover (of the drain notice, when a job noticed it)
    detail: str
    job: str
    deadline: float | None = None  # DRAINING: when the node goes, wall clock (None: Ray was given no deadline)


def collect() -> list[WorkerRow]:
    """Rows for every rlplace worker of every live job on the connected cluster, by job, component, rank."""
    return collect_all()[1]


def collect_all(cluster: Cluster = RAY, *, probe_gpus: bool = True) -> tuple[list[NodeRow], list[WorkerRow]]:
    """The troubled nodes of live jobs, and every rlplace worker of every live job (by job, component, rank), on
    `cluster` (default: the connected Ray cluster). Without `probe_gpus` no worker is asked for its GPUs (they
    show `?`): the simulation's explorer reads status after every step and must not let time pass doing so."""
    from rlplace.ray.records import read_all

    live_jobs = cluster.live_jobs()
    records = [r for r in read_all(cluster) if r.ray_job_id in live_jobs]
    raw_nodes = cluster.nodes()
    planned = _planned_names(records)
    # (job, name) -> the newest actor of a worker's name (a name reused by a later Job wins), and its (component,
    # rank) as the name says
    latest: dict[tuple[str, str], tuple[dict, tuple[str, int]]] = {}
    for a in cluster.actor_table().values():
        if (
            a.get("Name", "").startswith("rlplace:")
            and a.get("JobID") in live_jobs
            and (parsed := _parse(a["Name"]))
            and (a["JobID"] not in planned or a["Name"] in planned[a["JobID"]])
        ):
            key = (a["JobID"], a["Name"])
            if key not in latest or _newest_first(a) >= _newest_first(latest[key][0]):
                latest[key] = (a, parsed)
    actors = [a for a, _ in latest.values()]
    names = _node_names(raw_nodes, records)
    spares = _spares_by_job(raw_nodes, records)
    # The nodes of running workers, and every node a live job's record holds (a worker on a lost node may
    # already be marked dead while its node is not yet declared dead: the node is still shown LOST).
    hosting = {_node_id(a) for a in actors if a["State"] == WorkerState.ALIVE}
    hosting |= {n.node_id for r in records for n in r.nodes.values() if n.node_id}
    down = _down_nodes(cluster, raw_nodes, hosting)
    running_ids = {a["ActorID"] for a in actors if a["State"] == WorkerState.ALIVE and _node_id(a) not in down}
    gpus = _probe_gpus(cluster, running_ids) if probe_gpus else {}
    ranks = _current_ranks(records)
    planned_nodes = _planned_nodes(records)
    rows = []
    for a, parsed in latest.values():
        component, rank = ranks.get((a["JobID"], a["Name"])) or parsed
        running = a["State"] == WorkerState.ALIVE and _node_id(a) not in down
        planned_rank = planned_nodes.get((a["JobID"], a["Name"]))
        if running or a["State"] == WorkerState.ALIVE:
            node = spares.get((a["JobID"], _node_id(a))) or names.get(_node_id(a), "-")
        else:  # not running: the actor table still holds the dead process's node and PID
            node = f"node {planned_rank}" if planned_rank is not None else "-"
        rows.append(
            WorkerRow(
                name=a["Name"],
                component=component,
                rank=rank,
                node=node,
                gpus=gpus.get(a["ActorID"], "?" if running else "-"),
                state=a["State"] if running or a["State"] != WorkerState.ALIVE else WorkerState.LOST,
                restarts=int(a.get("NumRestarts", 0)),
                pid=int(a.get("Pid", 0)) if running else None,
                job=a["JobID"],
            )
        )
    rows += _driver_rows(records, names)
    order = _plan_order(records)
    workers = sorted(rows, key=lambda r: (r.job, order.get((r.job, r.component), len(order)), r.component, r.rank))
    alive = {n["NodeID"] for n in raw_nodes if n.get("Alive")}
    draining = {node_id: ms for node_id, ms in cluster.draining_nodes().items() if node_id in alive}
    now = cluster.wall()
    return _node_rows(records, down, names, now) + _draining_rows(records, draining, names, raw_nodes, now), workers


def _plan_order(records: list[JobRecord]) -> dict[tuple[str, str], int]:
    """(Ray job id, component) -> its place in the plan (train before eval and env, as the plan lists them); a
    component no record holds sorts after, by name."""
    out: dict[tuple[str, str], int] = {}
    for r in sorted(records, key=lambda r: r.written_at):
        out.update({(r.ray_job_id, name): i for i, name in enumerate(r.components)})
    return out


def _current_ranks(records: list[JobRecord]) -> dict[tuple[str, str], tuple[str, int]]:
    """(Ray job id, actor name) -> (component, rank now): a worker renumbered by a resize kept its name."""
    out: dict[tuple[str, str], tuple[str, int]] = {}
    for r in sorted(records, key=lambda r: r.written_at):  # the newest rlplace job of a driver wins
        out.update({(r.ray_job_id, name): where for name, where in r.worker_ranks().items()})
    return out


@dataclass(frozen=True)
class SizeRow:
    """An elastic component of a live job: its size now and the range it may take."""

    component: str
    workers: int
    min: int
    max: int
    start: int  # what growing back after a lost node aims for
    job: str


def sizes(records: list[JobRecord] | None = None) -> list[SizeRow]:
    """The elastic components of every live job (`cluster.elastic`), with their sizes now."""
    if records is None:
        from rlplace.ray.ray_port import RAY
        from rlplace.ray.records import read_all

        live_jobs = RAY.live_jobs()
        records = [r for r in read_all(RAY) if r.ray_job_id in live_jobs]
    return [
        SizeRow(name, c.world_size, *c.elastic, r.ray_job_id)
        for r in records
        for name, c in r.components.items()
        if c.elastic
    ]


def _driver_rows(records: list[JobRecord], names: dict[str, str]) -> list[WorkerRow]:
    """The workers of driver-local components (`remote_<component>: false`): plain objects in the driver
    process, shown on the driver's node with its PID."""
    return [
        WorkerRow(
            name=f"rlplace:{component}:{rank}",
            component=component,
            rank=rank,
            node=f"{names.get(r.driver_node_id, '-')} (driver)",
            gpus="-",
            state=WorkerState.DRIVER,
            restarts=0,
            pid=r.driver_pid or None,
            job=r.ray_job_id,
        )
        for r in records
        for component, c in r.components.items()
        if c.in_driver
        for rank in range(c.world_size)
    ]


def _node_id(actor: dict) -> str:
    return (actor.get("Address") or {}).get("NodeID", "")


def _planned_nodes(records: list[JobRecord]) -> dict[tuple[str, str], int | None]:
    """(Ray job id, worker name) -> the node rank the plan gave the worker (the newest rlplace job of that driver
    that has it), each record read once."""
    out: dict[tuple[str, str], int | None] = {}
    for r in sorted(records, key=lambda r: r.written_at):
        out.update({(r.ray_job_id, name): node for name, node in r.worker_nodes().items()})
    return out


def _down_nodes(cluster: Cluster, raw_nodes: list[dict], hosting: set[str]) -> dict[str, str]:
    """Node id -> why, for nodes hosting running workers that are gone: Ray declared them dead, or their
    raylet refuses connections (Ray's health checks have not noticed yet)."""
    by_id = {n["NodeID"]: n for n in raw_nodes}
    down = {}
    for node_id in hosting:
        n = by_id.get(node_id)
        if n is None or not n.get("Alive"):
            down[node_id] = "Ray declared it dead"
        elif n.get("NodeManagerPort") and cluster.raylet_refuses(n["NodeManagerAddress"], int(n["NodeManagerPort"])):
            down[node_id] = "its raylet refuses connections; Ray has not declared it dead yet"
    return down


def _node_rows(records: list[JobRecord], down: dict[str, str], names: dict[str, str], now: float) -> list[NodeRow]:
    rows: list[NodeRow] = []
    for r in records:
        latest = {e.node_rank: e for e in r.events}
        # A rank lost or failed whose events fell out of the record's last ones (many nodes lost at once, a
        # rack say) is shown too, with what the record still says of it.
        for rank in sorted({*latest, *r.lost, *r.failed}):
            e = latest.get(rank)
            if rank in r.failed:
                at, detail = (e.at, e.detail) if e is not None else (r.written_at, "its replacement window passed")
                rows.append(NodeRow(f"node {rank}", NodeStatus.FAILED, at, detail, r.ray_job_id))
            elif rank in r.lost:
                since, until = r.lost[rank]
                left = max(0.0, until - now)
                detail = f"waiting for a hot spare or a replacement node ({left:.0f} s left)"
                if e is not None:
                    detail += "; workers: " + (", ".join(e.workers) or "none launched")
                rows.append(NodeRow(f"node {rank}", NodeStatus.LOST, since, detail, r.ray_job_id))
            elif (shown := latest[rank]).kind in _SHOWN:  # neither lost nor failed: its rank has an event
                detail = shown.detail
                if shown.kind in (EventKind.SPARE, EventKind.REPLACEMENT):
                    detail += f", {shown.seconds:.1f} s after the loss was declared"
                rows.append(NodeRow(f"node {rank}", _SHOWN[shown.kind], shown.at, detail, r.ray_job_id))
    known = {row.node for row in rows}
    for node_id, why in down.items():
        name = names.get(node_id, node_id[:8])
        if name not in known:
            rows.append(NodeRow(name, NodeStatus.LOST, now, why, "-"))
    return rows


#: The latest event of a rank that is neither lost nor failed, as its node's row shows it.
_SHOWN = {
    EventKind.SPARE: NodeStatus.SPARE,
    EventKind.REPLACEMENT: NodeStatus.REPLACED,
    EventKind.SHRUNK: NodeStatus.SHRUNK,
    EventKind.GROWN: NodeStatus.GROWN,
}


def _draining_rows(
    records: list[JobRecord], draining: dict[str, int], names: dict[str, str], raw_nodes: list[dict], now: float
) -> list[NodeRow]:
    """A DRAINING row for every live node Ray drains (id -> deadline, ms; 0: none), with what a live job that ran
    there said of it (its `draining` event: workers moved, shrunk, or to be lost at the deadline)."""
    ips = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in raw_nodes}
    noticed = {}  # node id -> (the notice, the latest event of its rank since, the Ray job)
    for r in records:
        for i, e in enumerate(r.events):
            if e.kind == EventKind.DRAINING:
                later = [x for x in r.events[i:] if x.node_rank == e.node_rank]
                noticed[e.node_id] = (e, later[-1], r.ray_job_id)
    rows = []
    for node_id, ms in sorted(draining.items()):
        deadline = ms / 1000 if ms else None
        if deadline is None:
            when = "no deadline"
        else:
            left = deadline - now
            clock = time.strftime("%H:%M:%S", time.localtime(deadline))
            when = f"deadline {clock} (in {left:.0f} s)" if left > 0 else f"deadline {clock} (passed)"
        notice, latest, job = noticed.get(node_id, (None, None, "-"))
        if latest is None:
            detail = f"{when}; no live rlplace job noticed it"
        elif latest is notice:  # "IP (id ..): deadline ..; what the job does": the deadline is shown already
            detail = f"{when}; {notice.detail.split('; ', 1)[-1]}"
        else:
            detail = f"{when}; {latest}"
        name = f"{names.get(node_id, node_id[:8])} ({ips.get(node_id, '?')})"
        rows.append(NodeRow(name, NodeStatus.DRAINING, notice.at if notice else now, detail, job, deadline))
    return rows


def _newest_first(actor: dict) -> tuple[float, bool]:
    """Which of two actors of one name is the newer: the later start time (an actor still being created has none
    yet and is the newest; one that died before it started is the oldest), and of two started in the same
    millisecond the one not DEAD: a name is taken again only once its actor is DEAD. Ray lists its actors in no
    order (found by the simulation's explorer, whose actor table lists them so: a worker killed and started again
    in the same millisecond was shown DEAD when the dead one came later)."""
    dead = actor.get("State") == WorkerState.DEAD
    return actor.get("StartTime") or (0.0 if dead else float("inf")), not dead


def _planned_names(records: list[JobRecord]) -> dict[str, set[str]]:
    """Ray job id -> the actor names its live rlplace Jobs planned (driver-local workers are no actors). A driver
    that closed a Job and connected again keeps the same Ray job id: the closed Job's workers are not listed."""
    planned: dict[str, set[str]] = {}
    for r in records:
        names = planned.setdefault(r.ray_job_id, set())
        names.update(
            comp.name(c, i) for c, comp in r.components.items() if not comp.in_driver for i in range(comp.world_size)
        )
    return planned


def _parse(name: str) -> tuple[str, int] | None:
    """`rlplace:train:3` -> ("train", 3) (also `rlplace:train:3.1`, a name a resize gave: the rank it was started
    with); anything else is not a worker of ours."""
    parts = name.split(":")
    if len(parts) != 3 or not parts[2].split(".")[0].isdigit() or not parts[2].replace(".", "", 1).isdigit():
        return None
    return parts[1], int(parts[2].split(".")[0])


def _spares_by_job(raw_nodes: list[dict], records: list[JobRecord]) -> dict[tuple[str, str], str]:
    """(Ray job id, node id) -> "node <rank> (spare IP)" for each spare serving a rank of a job: two jobs may each
    have moved a rank onto the same spare, under their own rank numbers (found by the simulation's explorer)."""
    ips = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in raw_nodes}
    return {
        (r.ray_job_id, n.node_id): f"node {rank} (spare {ips.get(n.node_id, '?')})"
        for r in records
        for rank, n in r.nodes.items()
        if n.spare and n.node_id
    }


def _node_names(raw_nodes: list[dict], records: list[JobRecord]) -> dict[str, str]:
    """Ray node id -> "node <rank>" from the rlplace rank label, "node <rank> (spare IP)" for a spare serving a
    job's rank, "spare IP" for an idle spare, else the node's IP."""
    from rlplace.ray.nodes import is_spare

    serving = {n.node_id: rank for r in records for rank, n in r.nodes.items() if n.spare}
    names = {}
    for n in raw_nodes:
        ip = n.get("NodeManagerAddress", "?")
        rank = next((v for k, v in n.get("Labels", {}).items() if k.replace("_", "-").endswith("node-rank")), None)
        if is_spare(n):
            names[n["NodeID"]] = (
                f"node {serving[n['NodeID']]} (spare {ip})" if n["NodeID"] in serving else f"spare {ip}"
            )
        else:
            names[n["NodeID"]] = f"node {rank}" if rank is not None else ip
    return names


def _gpu_ids(_instance: Any) -> list[str]:
    """Runs in the worker: the GPUs Ray gave it."""
    from rlplace.ray.worker import here

    return [str(g) for g in here().gpus]


def _probe_gpus(cluster: Cluster, actor_ids: set[str]) -> dict[str, str]:
    """ActorID -> "0,1" (or "-" for none) for the live workers that answer within PROBE_TIMEOUT_S.

    Handles come from the named-actor registry (names repeat across jobs' namespaces; ids do not).
    """
    refs = {}
    for entry in cluster.named_actors():
        if not entry["name"].startswith("rlplace:"):
            continue
        try:
            handle = cluster.get_actor(entry["name"], entry["namespace"])
        except ValueError:  # died between listing and lookup
            continue
        if cluster.actor_id(handle) in actor_ids:
            refs[cluster.run_on(handle, _gpu_ids)] = cluster.actor_id(handle)
    ready, _ = cluster.wait(list(refs), PROBE_TIMEOUT_S)
    out = {}
    for ref in ready:
        try:
            out[refs[ref]] = ",".join(cluster.get(ref)) or "-"
        except Exception:  # the worker died meanwhile: no GPUs to show
            continue
    return out
