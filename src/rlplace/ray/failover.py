"""Node loss: notice it, move the lost node's workers to a spare or a replacement node, or fail clearly.

A Job owns one `Failover`. Its watcher thread reads the GCS node table (`ray.nodes()`, one request) every
`period_s` seconds; calls never poll the GCS themselves, they consult the watcher's in-memory state. When
a node holding the job's bundles is gone (Ray declared it dead, or its raylet refuses connections while a
call on it has just failed: the worker processes are known dead, no need to wait for Ray's health
checks), the job:

1. records a `lost` event, kills the node's workers (so no call, not even a bare `ray.get`, waits on
   them forever) and removes the node's placement group (Ray would otherwise keep it RESCHEDULING);
2. looks for a node to take the rank over: a node started again with the same rank label (a
   replacement), else a hot spare (`rlplace start --spare`) with the same GPU count and model and
   enough CPUs. Hardware such as robots cannot move: those ranks wait for a replacement only;
3. reserves the rank's bundles there, maps the rank to that node in `job.live`, relaunches the lost
   workers through `launch_ray_actor` (same component, rank, name, env vars, interpreter), calls
   `on_replaced(event)` on those whose class defines it before anything else reaches them, and records
   a `spare` or `replacement` event;
4. or, when `replace_within_s` passes first (0: at once), records `failed`, and every pending and new
   call on those workers raises `NodeLostError` naming the rank, the workers and what the job waited for.

Calls on workers of other nodes never wait on any of this.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray

from rlplace.errors import NodeLostError, PlacementError
from rlplace.inventory import Inventory, Node
from rlplace.ray import _compat, diagnose
from rlplace.ray.cluster import node_of, spare_nodes
from rlplace.ray.labels import NODE_RANK_LABEL, SPARE_LABEL

if TYPE_CHECKING:
    from rlplace.ray.job import Job

log = logging.getLogger(__name__)

#: How often the watcher reads the GCS node table.
WATCH_PERIOD_S = 0.5
#: A TCP connection to a raylet's port that neither connects nor is refused within this is inconclusive.
PROBE_TIMEOUT_S = 0.5
_RECORD_PREFIX = "job-health/"
_MOVABLE = ("CPU", "GPU")


@dataclass(frozen=True)
class NodeEvent:
    """Something that happened to a node of the job; `job.events` lists them in order.

    kind: `lost` (the node is gone; `node_id` is the lost node), `spare` or `replacement` (the rank's
    workers answer again on `node_id`; `seconds` since the loss was declared), `failed` (the window
    passed; `seconds` likewise).
    """

    kind: str
    node_rank: int
    workers: tuple[str, ...]
    at: float  # wall clock (time.time())
    node_id: str
    address: str
    detail: str
    seconds: float | None = None

    def __str__(self) -> str:
        took = f" after {self.seconds:.1f} s" if self.seconds is not None else ""
        return f"node {self.node_rank} {self.kind}{took}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _Loss:
    """A rank whose node is gone and that no node has taken over yet."""

    node: Node  # the lost node, as the job knew it
    workers: tuple[str, ...]
    declared: float  # time.monotonic() when the loss was declared
    at: float  # wall clock of the same moment
    deadline: float  # monotonic end of the replacement window
    refusals: dict[str, str] = field(default_factory=dict)  # spare or replacement node -> why not taken
    error: NodeLostError | None = None  # set once the window passed


# -- pure rules ------------------------------------------------------------------------------------------


def hardware_of(demand: Mapping[str, float], node: Node) -> list[str]:
    """The reserved resources that are attached hardware (robots): they cannot move to another node."""
    movable = {*_MOVABLE, node.accelerator_resource}
    return sorted(k for k in demand if k not in movable)


def spare_refusal(lost: Node, demand: Mapping[str, float], spare: Node, free: Mapping[str, float] | None) -> str | None:
    """Why `spare` cannot take over `lost` (None: it can). Same GPU count and model, enough CPUs, and (when
    `free` is known) those resources not held by someone else."""
    where = f"spare {spare.address or '?'} (id {str(spare.node_id)[:8]})"
    if spare.num_gpus != lost.num_gpus or (lost.num_gpus and spare.gpu_model != lost.gpu_model):
        return f"{where} has {_gpus(spare)}, node {lost.rank} had {_gpus(lost)}"
    wanted = {k: v for k, v in demand.items() if k in (*_MOVABLE, lost.accelerator_resource)}
    missing = diagnose.shortfall(wanted, diagnose.node_totals(spare))
    if missing:
        return f"{where} lacks {diagnose.fmt(missing)} of the {diagnose.fmt(wanted)} node {lost.rank} reserved"
    if free is not None:
        busy = diagnose.shortfall(wanted, free)
        if busy:
            return f"{where} is busy: {diagnose.fmt(busy)} of what node {lost.rank} reserved is held by others"
    return None


def _gpus(node: Node) -> str:
    return f"{node.num_gpus}x {node.gpu_model or 'GPU'}" if node.num_gpus else "no GPU"


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


# -- the watcher -----------------------------------------------------------------------------------------


class Failover:
    """The node-loss watcher of one job (see the module docstring)."""

    def __init__(self, job: Job, *, replace_within_s: float, period_s: float = WATCH_PERIOD_S):
        if replace_within_s < 0:
            raise ValueError(f"replace_within_s must be 0 (fail at once) or more seconds, not {replace_within_s}")
        self.job = job
        self.replace_within_s = float(replace_within_s)
        self.period_s = period_s
        self.events: list[NodeEvent] = []
        self._losses: dict[int, _Loss] = {}
        self._failed: dict[int, NodeLostError] = {}
        self._spare_of: dict[int, str] = {}  # rank -> node id of the spare now serving it
        self._raylets: dict[str, tuple[str, int]] = {}  # node id -> raylet (host, port)
        self._cond = threading.Condition(threading.RLock())  # guards the state below; calls wait on it
        self._work = threading.RLock()  # one declaration or takeover at a time (they create and remove groups)
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    # -- life cycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        if not self.watched_ranks():
            return  # nothing pinned to a node: Ray alone decides where the workers run
        self._read_nodes()
        self.publish()
        self._thread = threading.Thread(target=self._run, name=f"rlplace-failover-{self.job.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and wake every call waiting on a lost node (they raise: the job is shut down)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.job.timeout_s + 5)
        self.forget()

    def watched_ranks(self) -> list[int]:
        pinned = {w.node_rank for w in self.job.plan.workers if w.node_rank is not None}
        return sorted(pinned | set(self.job.reservation_ranks))

    # -- what calls ask (in-memory; never a GCS request on the fast path) --------------------------------

    def state(self, rank: int | None) -> str:
        """`ok`, `lost` (waiting for a spare or replacement) or `failed`."""
        if rank is None:
            return "ok"
        if rank in self._failed:
            return "failed"
        return "lost" if rank in self._losses else "ok"

    def check(self, rank: int) -> bool:
        """A call on a worker of node `rank` just failed: is the node lost? Declares the loss at once when the
        node's raylet refuses connections (its processes are known dead) without waiting for Ray's health
        checks; waits for Ray's verdict while the probe is inconclusive."""
        if self.state(rank) != "ok":
            return True
        node = self.job.live.node(rank)
        deadline = time.monotonic() + self._verdict_wait_s()
        while not self._stopped:
            raylet = self._raylets.get(str(node.node_id))
            refused = raylet_refuses(*raylet) if raylet else None
            if refused:
                self._declare(rank, f"its raylet at {raylet[0]}:{raylet[1]} refuses connections (processes gone)")
                return True
            alive = self._alive_ids()
            if str(node.node_id) not in alive:
                self._declare(rank, "Ray declared it dead")
                return True
            if refused is False or time.monotonic() >= deadline:
                return False
            time.sleep(self.period_s)
        return self.state(rank) != "ok"

    def wait_usable(self, rank: int | None, deadline: float | None = None) -> bool:
        """Block while node `rank` is lost: True once its workers answer again (on a spare or replacement),
        False when the caller's `deadline` (monotonic) came first. Raises NodeLostError once the window
        passed, PlacementError when the job is shut down meanwhile."""
        with self._cond:
            while True:
                if rank in self._failed:
                    raise self._failed[rank]
                if self._stopped:
                    if rank in self._losses:
                        raise PlacementError(f"job {self.job.name} was shut down while node {rank} was lost")
                    return True
                if rank not in self._losses:
                    return True
                if time.monotonic() > self._losses[rank].deadline + 2 * self.period_s + 5:
                    self._fail(rank)  # the watcher is stuck (a takeover hanging in Ray): the window is a promise
                    continue
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return False
                self._cond.wait(timeout=wait if wait is not None else 1.0)

    # -- watcher ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopped:
                try:
                    self._tick()
                except Exception as e:  # never let the watcher die silently: say so, try again next period
                    if self._stopped or not ray.is_initialized():
                        return
                    log.warning("rlplace failover watcher of job %s: %s", self.job.name, e, exc_info=True)
                self._wake.wait(self.period_s)
                self._wake.clear()
        finally:  # Ray went away under the job (or it was shut down): no call may wait on a watcher that is gone
            with self._cond:
                self._stopped = True
                self._cond.notify_all()

    def _tick(self) -> None:
        raw = self._read_nodes()
        alive = {n["NodeID"] for n in raw if n.get("Alive")}
        for rank in self.watched_ranks():
            if self.state(rank) == "ok" and str(self.job.live.node(rank).node_id) not in alive:
                dead = next((n for n in raw if n["NodeID"] == self.job.live.node(rank).node_id), {})
                self._declare(rank, "Ray declared it dead" + _death_reason(dead))
        for rank in sorted(self._losses):
            self._resolve(rank, raw)

    def _read_nodes(self) -> list[dict[str, Any]]:
        raw = ray.nodes()
        for n in raw:
            if n.get("Alive") and n.get("NodeManagerPort"):
                self._raylets[n["NodeID"]] = (n["NodeManagerAddress"], int(n["NodeManagerPort"]))
        return raw

    def _alive_ids(self) -> set[str]:
        return {n["NodeID"] for n in self._read_nodes() if n.get("Alive")}

    def _verdict_wait_s(self) -> float:
        return max(self.replace_within_s, 30.0)

    # -- declaring a loss --------------------------------------------------------------------------------

    def _declare(self, rank: int, why: str) -> None:
        with self._work:
            self._declare_locked(rank, why)

    def _declare_locked(self, rank: int, why: str) -> None:
        with self._cond:
            if self.state(rank) != "ok" or self._stopped:
                return
            node = self.job.live.node(rank)
            workers = tuple(w.name for w in self.job.launched_workers(rank))
            now = time.monotonic()
            loss = _Loss(node, workers, now, time.time(), now + self.replace_within_s)
            self._losses[rank] = loss
            self._spare_of.pop(rank, None)
            where = f"{node.address or '?'} (id {str(node.node_id)[:8]})"
            self._event("lost", rank, workers, node, f"{where}: {why}", at=loss.at)
        log.warning("rlplace job %s: node %d lost (%s); workers %s", self.job.name, rank, why, ", ".join(workers))
        self.job.drop_rank(rank)  # kill its workers, release its group: nothing waits on them from now on
        if self.replace_within_s == 0:
            self._fail(rank)
        self.publish()
        self._wake.set()

    # -- resolving it ------------------------------------------------------------------------------------

    def _resolve(self, rank: int, raw: list[dict[str, Any]]) -> None:
        with self._work:
            self._resolve_locked(rank, raw)

    def _resolve_locked(self, rank: int, raw: list[dict[str, Any]]) -> None:
        loss = self._losses.get(rank)
        if loss is None or self._stopped:
            return
        for how, node in self._candidates(rank, loss, raw):
            try:
                self._take_over(rank, loss, node, how)
                return
            except PlacementError as e:
                if self._stopped:
                    return  # the job was shut down during the takeover
                loss.refusals[str(node.node_id)] = f"{how} {node.address} failed: {e}"
                log.warning(
                    "rlplace job %s: %s %s could not take node %d: %s", self.job.name, how, node.address, rank, e
                )
        if time.monotonic() >= loss.deadline:
            self._fail(rank)

    def _candidates(self, rank: int, loss: _Loss, raw: list[dict[str, Any]]) -> list[tuple[str, Node]]:
        """Nodes that may take `rank` over, replacements first; refusals are kept for the error message."""
        alive = [n for n in raw if n.get("Alive")]
        used = {str(n.node_id) for n in self.job.live.nodes}
        out: list[tuple[str, Node]] = []
        for n in alive:
            labels = n.get("Labels") or {}
            if labels.get(NODE_RANK_LABEL) == str(rank) and n["NodeID"] not in used:
                out.append(("replacement", node_of(n, rank)))
        demand = self.job.reservation_demand(rank)
        hardware = hardware_of(demand, loss.node)
        if hardware:
            return out  # a robot cannot move: only its own node, started again, can take the rank back
        taken = set(self._spare_of.values())
        free = _compat.available_resources_per_node() if alive else {}
        for spare in spare_nodes(alive):
            if str(spare.node_id) in taken:
                continue
            why = spare_refusal(loss.node, demand, spare, free.get(str(spare.node_id)))
            if why:
                loss.refusals[str(spare.node_id)] = why
            else:
                out.append(("spare", dataclasses.replace(spare, rank=rank)))
        return out

    def _take_over(self, rank: int, loss: _Loss, node: Node, how: str) -> None:
        """Move the rank to `node`; the event (handed to `on_replaced` first) is recorded once the workers
        answer there, with the seconds since the loss was declared."""
        with self._cond:
            if self._stopped:
                return
            if how == "spare":
                self._spare_of[rank] = str(node.node_id)  # claimed: no other rank takes this spare meanwhile
        what = "hot spare" if how == "spare" else "replacement node"
        detail = f"{what} {node.address} (id {str(node.node_id)[:8]}) took over node {rank}"
        event = NodeEvent(how, rank, loss.workers, time.time(), str(node.node_id), node.address or "?", detail)
        try:
            self.job.move_rank(rank, node, event)
        except BaseException:
            with self._cond:
                self._spare_of.pop(rank, None)
            raise
        with self._cond:
            done = dataclasses.replace(event, at=time.time(), seconds=time.monotonic() - loss.declared)
            self.events.append(done)
            del self._losses[rank]
            self._cond.notify_all()
        log.warning("rlplace job %s: %s", self.job.name, done)
        self.publish()

    def _fail(self, rank: int) -> None:
        with self._cond:
            loss = self._losses.get(rank)
            if loss is None or rank in self._failed:
                return
            waited = self._waited_for(rank, loss)
            names = ", ".join(loss.workers) or "none launched yet"
            message = (
                f"node {rank} ({_gpus(loss.node)}, {loss.node.address or '?'}) was lost and its workers ({names}) "
                f"could not be moved: the job waited for {waited}. Start a spare (`rlplace start --spare "
                f"--address HEAD:PORT`) or the node again (`rlplace start --node-rank {rank} --address HEAD:PORT`), "
                "or raise connect(..., replace_within_s=...)"
            )
            error = NodeLostError(message, node_rank=rank, workers=loss.workers, waited_for=waited)
            loss.error = error
            self._failed[rank] = error
            self._event("failed", rank, loss.workers, loss.node, message, seconds=time.monotonic() - loss.declared)
            self._cond.notify_all()
        self.publish()

    def _waited_for(self, rank: int, loss: _Loss) -> str:
        hardware = hardware_of(self.job.reservation_demand(rank), loss.node)
        window = "no time (replace_within_s=0)" if self.replace_within_s == 0 else f"{self.replace_within_s:g} s"
        if hardware:
            what = (
                f"a replacement node with rank {rank} for {window} (it holds {', '.join(hardware)}: attached "
                "hardware cannot move to a spare)"
            )
        else:
            what = f"a hot spare with {_gpus(loss.node)} or a replacement node with rank {rank} for {window}"
        if self.replace_within_s == 0:
            return what
        if loss.refusals:
            what += "; not taken: " + "; ".join(loss.refusals.values())
        elif not hardware:
            what += "; no spare joined the cluster"
        return what

    # -- events and the record `rlplace status` reads ----------------------------------------------------

    def _event(
        self,
        kind: str,
        rank: int,
        workers: tuple[str, ...],
        node: Node,
        detail: str,
        *,
        at: float | None = None,
        seconds: float | None = None,
    ) -> NodeEvent:
        event = NodeEvent(
            kind, rank, workers, at or time.time(), str(node.node_id), node.address or "?", detail, seconds
        )
        self.events.append(event)
        return event

    def health(self) -> dict[int, tuple[str, str]]:
        """rank -> (state, note) for ranks that are not plainly healthy: `lost`, `failed`, `spare`, `replaced`."""
        out: dict[int, tuple[str, str]] = {}
        for e in self.events:
            if e.kind == "lost":
                out[e.node_rank] = ("lost", f"lost {time.strftime('%H:%M:%S', time.localtime(e.at))}")
            elif e.kind == "failed":
                out[e.node_rank] = ("failed", "lost; no spare or replacement in time")
            elif e.kind == "spare":
                out[e.node_rank] = ("spare", f"on spare {e.address}")
            elif e.kind == "replacement":
                out[e.node_rank] = ("replaced", f"replaced: {e.address}")
        return out

    def publish(self) -> None:
        """Write the job's node map, planned worker nodes and events to Ray's KV store for `rlplace status`."""
        if not ray.is_initialized() or self._stopped:
            return
        record = {
            "written_at": time.time(),
            "job": self.job.name,
            "namespace": self.job.namespace,
            "ray_job": ray.get_runtime_context().get_job_id(),
            "workers": {w.name: w.node_rank for w in self.job.plan.workers},
            "nodes": {
                str(n.rank): {"node_id": n.node_id, "address": n.address, "spare": n.labels.get(SPARE_LABEL) == "true"}
                for n in self.job.live.nodes
            },
            "lost": {
                str(r): {"since": loss.at, "until": loss.at + self.replace_within_s}
                for r, loss in self._losses.items()
                if r not in self._failed
            },
            "failed": sorted(self._failed),
            "events": [e.to_dict() for e in self.events[-50:]],
        }
        try:
            _compat.kv_put(self._key(), json.dumps(record))
        except Exception as e:  # the record only feeds `rlplace status`; never fail the job over it
            log.debug("could not publish the job record: %s", e)

    def forget(self) -> None:
        if not ray.is_initialized():
            return
        try:
            _compat.kv_delete(self._key())
        except Exception as e:
            log.debug("could not delete the job record: %s", e)

    def _key(self) -> str:
        return f"{_RECORD_PREFIX}{ray.get_runtime_context().get_job_id()}/{self.job.name}"


def read_records() -> list[dict[str, Any]]:
    """Every job record on the connected cluster (`rlplace status`)."""
    out = []
    for key in _compat.kv_keys(_RECORD_PREFIX):
        raw = _compat.kv_get(key)
        if raw:
            out.append(json.loads(raw))
    return out


def replace_node(live: Inventory, rank: int, node: Node) -> Inventory:
    """`live` with rank `rank` served by `node` from now on."""
    return Inventory(tuple(node if n.rank == rank else n for n in live.nodes))


def _death_reason(raw: Mapping[str, Any]) -> str:
    text = str(raw.get("DeathReasonMessage") or "").strip()
    return f" ({text})" if text else ""
