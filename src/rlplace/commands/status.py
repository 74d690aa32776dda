"""`rlplace status`: the live jobs' workers, where each runs and in which state.

Read from the GCS (the actor and job tables), not the dashboard, so it works on clusters started with
`include_dashboard=False` and needs no extra port. Workers are the actors named `rlplace:<component>:<rank>`
of jobs whose driver is still running; a worker that died in a live job is listed too (that is what a
user runs `status` for). The GPUs a worker holds are asked from the worker itself (Ray's built-in
`__ray_call__`, no method of the user's class), with a short timeout: a worker busy in a long call
shows `?` rather than hang the command.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Any

PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class WorkerRow:
    name: str
    component: str
    rank: int
    node: str  # "node 2" when the node carries an rlplace rank label, else its IP
    gpus: str  # "0,1", "-" for none, "?" when the worker did not answer in time
    state: str  # ALIVE | RESTARTING | DEAD | PENDING_CREATION | DEPENDENCIES_UNREADY
    restarts: int
    pid: int
    job: str


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="show the live job's workers: node, GPUs, state, restarts")
    p.add_argument(
        "--address",
        metavar="HOST:PORT",
        default="auto",
        help="the Ray cluster's head (default: auto: $RAY_ADDRESS, else the cluster started on this machine)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="how the workers are printed")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import ray

    from rlplace.ray.cluster import join

    connected_here = not ray.is_initialized()
    if connected_here:
        join(args.address)
    try:
        rows = collect()
    finally:
        if connected_here:
            ray.shutdown()
    if args.format == "json":
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(render(rows))
    return 0


def collect() -> list[WorkerRow]:
    """Rows for every rlplace worker of every live job on the connected cluster, by job, component, rank."""
    from ray._private import state

    live_jobs = {j["JobID"] for j in state.jobs() if not j["IsDead"]}
    latest: dict[tuple[str, str], dict] = {}  # (job, name) -> newest actor: a name reused by a later Job wins
    for a in state.actors().values():
        if a.get("Name", "").startswith("rlplace:") and a.get("JobID") in live_jobs and _parse(a["Name"]):
            key = (a["JobID"], a["Name"])
            if key not in latest or _started(a) >= _started(latest[key]):
                latest[key] = a
    actors = list(latest.values())
    nodes = _node_names()
    gpus = _probe_gpus({a["ActorID"] for a in actors if a["State"] == "ALIVE"})
    rows = []
    for a in actors:
        component, rank = _parse(a["Name"])
        node_id = a.get("Address", {}).get("NodeID", "")
        rows.append(
            WorkerRow(
                name=a["Name"],
                component=component,
                rank=rank,
                node=nodes.get(node_id, "-"),
                gpus=gpus.get(a["ActorID"], "-" if a["State"] != "ALIVE" else "?"),
                state=a["State"],
                restarts=int(a.get("NumRestarts", 0)),
                pid=int(a.get("Pid", 0)),
                job=a["JobID"],
            )
        )
    return sorted(rows, key=lambda r: (r.job, r.component, r.rank))


def _started(actor: dict) -> float:
    """Start time; an actor still being created has none yet and is the newest."""
    return actor.get("StartTime") or float("inf")


def render(rows: list[WorkerRow]) -> str:
    if not rows:
        return "no rlplace workers on this cluster (no live job has launched any)"
    header = ("WORKER", "NODE", "GPUS", "STATE", "RESTARTS", "PID")
    table = [header, *((r.name, r.node, r.gpus, r.state, str(r.restarts), str(r.pid)) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in table)


def _parse(name: str) -> tuple[str, int] | None:
    """`rlplace:train:3` -> ("train", 3); anything else is not a worker of ours."""
    parts = name.split(":")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def _node_names() -> dict[str, str]:
    """Ray node id -> "node <rank>" from the rlplace rank label, else the node's IP."""
    import ray

    names = {}
    for n in ray.nodes():
        rank = next((v for k, v in n.get("Labels", {}).items() if k.replace("_", "-").endswith("node-rank")), None)
        names[n["NodeID"]] = f"node {rank}" if rank is not None else n.get("NodeManagerAddress", "?")
    return names


def _gpu_ids(_instance: Any) -> list[str]:
    import ray

    return [str(g) for g in ray.get_gpu_ids()]


def _probe_gpus(actor_ids: set[str]) -> dict[str, str]:
    """ActorID -> "0,1" (or "-" for none) for the live workers that answer within PROBE_TIMEOUT_S.

    Handles come from the named-actor registry (names repeat across jobs' namespaces; ids do not).
    """
    import ray

    refs = {}
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if not entry["name"].startswith("rlplace:"):
            continue
        try:
            handle = ray.get_actor(entry["name"], namespace=entry["namespace"])
        except ValueError:  # died between listing and lookup
            continue
        if handle._actor_id.hex() in actor_ids:
            refs[handle.__ray_call__.remote(_gpu_ids)] = handle._actor_id.hex()
    if not refs:
        return {}
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    out = {}
    for ref in ready:
        try:
            out[refs[ref]] = ",".join(ray.get(ref)) or "-"
        except ray.exceptions.RayError:
            continue
    return out
