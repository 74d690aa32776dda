"""The torch.distributed rendezvous of every component: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...

Each worker gets, before its constructor runs, the variables `torch.distributed.init_process_group()`
(env://) and torchrun-style code read, for its own component:

  RANK, WORLD_SIZE         its rank among the component's workers, and their number
  LOCAL_RANK,              its index among the component's workers on its node, and their number there
  LOCAL_WORLD_SIZE         (torchrun's meaning: not a device index, see docs/runtime.md)
  NODE_RANK                the cluster node rank (the `rlplace/node-rank` label)
  GROUP_RANK,              the index of its node among the nodes its component uses, and their number
  GROUP_WORLD_SIZE         (torchrun's names for a component-local node index; RLinf calls it NODE_RANK)
  MASTER_ADDR, MASTER_PORT the IP of the node of the component's rank 0, and a port free there

and, for a worker placed through a GPU-less group on a GPU node (`Worker.sees_node_gpus`), every GPU of
its node in CUDA_VISIBLE_DEVICES (or the node's accelerator's variable). Ray's own masking is kept for
everyone else.

How the values travel: the driver computes them from the plan and the live node of each rank
(`job.node(rank)`, which a spare takeover remaps) and passes them, with the worker's placement record,
as a constructor argument through a thin subclass of the user's class (`rlplace.ray.launch`); the
subclass sets them in `os.environ` and then runs the user's constructor. No per-worker KV write, no
runtime_env (which would cost a fresh worker process), and a restarted actor gets the same arguments
again, so the same values. The job publishes one record (`rlplace.ray.records`) at its first launch.

Master ports come from 20000-32767 by default (`RLPLACE_MASTER_PORT_RANGE=LOW-HIGH` in the driver's
environment changes it): below Linux's ephemeral range, where outgoing connections take their ports,
and above Ray's worker ports. The first free one from 29500 (torchrun's default) up is taken, checked by
binding it on the master's node (in the driver itself when the master is on the driver's machine, else
one zero-CPU task per node address; all components at once), skipping ports that other live jobs'
records hold there.

Components Ray places itself (strategy `default`: no node in the plan) cannot be told their master
before they start: their workers publish their node in the KV store from inside the subclass's
constructor and wait (bounded) until every rank of the component has, then set the same variables.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rlplace.errors import PlacementError, RlplaceError
from rlplace.inventory import Node
from rlplace.plan import Worker
from rlplace.ray import _compat, records
from rlplace.ray.labels import NODE_RANK_LABEL

if TYPE_CHECKING:
    from rlplace.ray.job import Job

log = logging.getLogger(__name__)

#: The variables rlplace sets in every worker (plus the accelerator visibility variable where it applies).
ENV_KEYS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
PORT_RANGE_ENV = "RLPLACE_MASTER_PORT_RANGE"
DEFAULT_PORT_RANGE = (20000, 32767)
FIRST_PORT = 29500
#: How long an unpinned worker waits for its component's peers to publish their nodes.
EXCHANGE_TIMEOUT_ENV = "RLPLACE_RENDEZVOUS_TIMEOUT_S"
DEFAULT_EXCHANGE_TIMEOUT_S = 120.0


class RendezvousError(RlplaceError):
    """A component's peers did not all arrive at a rendezvous in time."""


@dataclass(frozen=True)
class Master:
    """Where a component's rank 0 listens."""

    node_rank: int
    node_id: str | None
    address: str
    port: int


@dataclass(frozen=True)
class _Layout:
    """A pinned component's shape: per rank its local index; per node its count and its index among the
    component's nodes (node-rank order)."""

    local_rank: dict[int, int]
    per_node: dict[int, tuple[int, int]]  # node rank -> (workers there, group rank)


class Rendezvous:
    """The rendezvous of one job: computes each worker's constructor payload and owns the job record."""

    def __init__(self, job: Job):
        self.job = job
        self.instance = uuid.uuid4().hex
        self._masters: dict[str, Master] = {}
        self._layouts: dict[str, _Layout | None] = {}  # None: unpinned component
        self._record: records.JobRecord | None = None
        self._warned: set[tuple[str | None, str]] = set()

    # -- what each worker receives ----------------------------------------------------------------

    def payload(self, worker: Worker) -> dict[str, Any]:
        """The constructor argument of `worker`: its placement record and its rendezvous env (or, when
        Ray places the component, what its workers need to agree on one among themselves)."""
        self._ensure_masters()
        node = self.job.node(worker.node_rank)
        placement = {
            "job": self.job.name,
            "namespace": self.job.namespace,
            "instance": self.instance,
            "node_id": node.node_id if node else None,
            "node_gpus": node.num_gpus if node else 0,
            "accelerator_resource": node.accelerator_resource if node else "GPU",
            "component": worker.component,
            "rank": worker.rank,
            "world_size": worker.world_size,
            "node_rank": worker.node_rank,
            "local_rank": worker.local_rank,
            "group": worker.group,
            "gpus": list(worker.gpus),
            "gpu_fraction": worker.gpu_fraction,
            "hardware": worker.hardware,
            "env_vars": list(worker.env_vars),
            "sees_node_gpus": worker.sees_node_gpus,
            "visible_gpus": None if worker.visible_gpus is None else list(worker.visible_gpus),
            "hardware_env": hardware_env_fallbacks(worker.hardware),
        }
        env = {**visibility_env(worker, node), **(self.env(worker) or {})}
        self._warn_overrides(worker, env)
        exchange = None
        if self._layout(worker.component) is None:
            exchange = {"prefix": self._exchange_prefix(worker.component), "timeout_s": exchange_timeout_s()}
        return {"placement": placement, "env": env, "exchange": exchange}

    def env(self, worker: Worker) -> dict[str, str] | None:
        """The rendezvous variables of a pinned worker (None when Ray places its component)."""
        layout = self._layout(worker.component)
        if layout is None or worker.node_rank is None:
            return None
        count, group_rank = layout.per_node[worker.node_rank]
        master = self._masters[worker.component]
        return {
            "RANK": str(worker.rank),
            "WORLD_SIZE": str(worker.world_size),
            "LOCAL_RANK": str(layout.local_rank[worker.rank]),
            "LOCAL_WORLD_SIZE": str(count),
            "NODE_RANK": str(worker.node_rank),
            "GROUP_RANK": str(group_rank),
            "GROUP_WORLD_SIZE": str(len(layout.per_node)),
            "MASTER_ADDR": master.address,
            "MASTER_PORT": str(master.port),
        }

    def master(self, component: str) -> Master | None:
        self._ensure_masters()
        return self._masters.get(component)

    # -- the job record -----------------------------------------------------------------------------

    def publish(self) -> records.JobRecord:
        """Write the job record (the plan's rank -> node map, the live nodes, the masters): one KV write.
        Call again after remapping ranks to other nodes so readers see the new map."""
        plan = self.job.plan
        components = {}
        for name in plan.components:
            workers = plan.by_component(name)
            m = self._masters.get(name)
            components[name] = records.ComponentRecord(
                world_size=len(workers),
                node_ranks=tuple(w.node_rank for w in workers),
                master_node_rank=m.node_rank if m else None,
                master_addr=m.address if m else None,
                master_port=m.port if m else None,
            )
        nodes = {}
        for n in self.job.live.nodes:
            node = self.job.node(n.rank)  # the live node of the rank: a spare after a takeover
            nodes[n.rank] = records.NodeRecord(node.node_id if node else None, node.address if node else None)
        self._record = records.JobRecord(
            job=self.job.name,
            namespace=self.job.namespace,
            instance=self.instance,
            ray_job_id=ray.get_runtime_context().get_job_id(),
            written_at=time.time(),
            nodes=nodes,
            components=components,
        )
        records.write(self._record)
        return self._record

    def forget(self) -> None:
        """At shutdown: delete the job record and what unpinned components exchanged."""
        if self._record is None:
            return
        records.delete(self.job.namespace, self.job.name)
        _compat.kv_delete(self._exchange_prefix(""), by_prefix=True)
        self._record = None

    # -- internals --------------------------------------------------------------------------------------

    def _layout(self, component: str) -> _Layout | None:
        if component not in self._layouts:
            workers = self.job.plan.by_component(component)
            if any(w.node_rank is None for w in workers):
                self._layouts[component] = None
            else:
                by_node: dict[int, list[int]] = {}
                for w in workers:
                    by_node.setdefault(w.node_rank, []).append(w.rank)  # type: ignore[arg-type]
                local = {rank: i for ranks in by_node.values() for i, rank in enumerate(sorted(ranks))}
                per_node = {n: (len(by_node[n]), g) for g, n in enumerate(sorted(by_node))}
                self._layouts[component] = _Layout(local, per_node)
        return self._layouts[component]

    def _ensure_masters(self) -> None:
        """Allocate a port for every pinned component whose master is new or moved (all at once), then
        write the job record. Runs once per job, and again only after a rank 0 moved to another node."""
        todo: dict[str, Node] = {}
        for name in self.job.plan.components:
            if self._layout(name) is None:
                continue
            rank0 = self.job.worker(name, 0)
            node = self.job.node(rank0.node_rank)
            if node is None or not node.address:
                raise PlacementError(f"{rank0.name}: node {rank0.node_rank} has no address; is it alive?")
            known = self._masters.get(name)
            if known is None or known.node_id != node.node_id:
                todo[name] = node
        if not todo and self._record is not None:
            return
        if todo:
            taken = _ports_of(records.read_all(live_only=True), skip=self.instance)
            self._allocate(todo, taken)
        self.publish()
        for _ in range(3):  # two drivers that allocated at the same moment: the later one moves
            clash = self._clashes()
            if not clash:
                return
            taken = _ports_of(records.read_all(live_only=True), skip=self.instance)
            self._allocate({name: self.job.node(self._masters[name].node_rank) for name in clash}, taken)  # type: ignore[misc]
            self.publish()

    def _allocate(self, todo: dict[str, Node], taken: dict[str, set[int]]) -> None:
        """Ports for the masters in `todo`, all of one address at once: bound here when the address is this
        driver's own (no task, no worker process to wait for), else by one zero-CPU task on the node."""
        by_address: dict[str, list[str]] = {}
        for name, node in todo.items():
            by_address.setdefault(node.address or "", []).append(name)
        low, high = port_range()
        here = ray.util.get_node_ip_address()
        found: dict[str, Any] = {}
        for address, names in by_address.items():
            keep = {m.port for n, m in self._masters.items() if n not in todo and m.address == address}
            avoid = sorted(taken.get(address, set()) | keep)
            if address == here:
                found[address] = free_ports(len(names), avoid, low, high)
                continue
            node = todo[names[0]]
            strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False) if node.node_id else None
            found[address] = _reserve_ports.options(scheduling_strategy=strategy).remote(len(names), avoid, low, high)
        refs = [f for f in found.values() if isinstance(f, ray.ObjectRef)]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.job.timeout_s)
        for address, names in by_address.items():
            if isinstance(found[address], ray.ObjectRef):
                if found[address] not in ready:
                    raise PlacementError(
                        f"could not reach node {todo[names[0]].rank} ({address}) within {self.job.timeout_s:g} s to "
                        f"choose a MASTER_PORT for {', '.join(names)}; is the node alive?"
                    )
                found[address] = ray.get(found[address])
            for name, port in zip(names, found[address], strict=True):
                node = todo[name]
                self._masters[name] = Master(node.rank, node.node_id, address, port)

    def _clashes(self) -> list[str]:
        """Our components whose port an earlier-written live record holds on the same address."""
        mine = self._record
        assert mine is not None
        earlier = [
            r
            for r in records.read_all(live_only=True)
            if r.instance != self.instance and (r.written_at, r.instance) < (mine.written_at, mine.instance)
        ]
        held = _ports_of(earlier, skip=self.instance)
        return [n for n, m in self._masters.items() if m.port in held.get(m.address, set())]

    def _exchange_prefix(self, component: str) -> str:
        return f"rdzv/{self.instance}/{component}{'/' if component else ''}"

    def _warn_overrides(self, worker: Worker, env: dict[str, str]) -> None:
        """A group's env_configs that set one of our variables lose to rlplace's value: say so once."""
        for key in worker.env_vars.keys() & env.keys():
            if worker.env_vars[key] != env[key] and (worker.group, key) not in self._warned:
                self._warned.add((worker.group, key))
                message = (
                    f"node group {worker.group!r} sets {key}={worker.env_vars[key]} in env_configs; rlplace sets "
                    f"{key} per worker for torch.distributed (e.g. {worker.name} gets {env[key]}), and its value "
                    f"wins. Remove {key} from env_configs, or pass it to init_component_group() explicitly"
                )
                self.job.warnings.append(message)
                log.warning(message)


def _ports_of(recs: list[records.JobRecord], *, skip: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for r in recs:
        if r.instance != skip:
            for address, ports in r.ports_by_address().items():
                out.setdefault(address, set()).update(ports)
    return out


def visibility_env(worker: Worker, node: Node | None) -> dict[str, str]:
    """The devices a worker sees when Ray's own assignment cannot say (`Worker.visible_gpus`): every GPU of
    its node for a worker placed through a robot, `node` or accelerator-less group (RLinf semantics), or the
    GPUs of a process spanning GPUs that other processes share (it asks Ray for none). Empty for the rest."""
    if worker.visible_gpus is None or node is None or not node.num_gpus:
        return {}
    return {_compat.visible_devices_var(node.accelerator_resource): ",".join(map(str, worker.visible_gpus))}


def hardware_env_fallbacks(hardware: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(key, variable) pairs of a robot's config the worker fills from its node's environment when the config
    leaves the key out (a Franka's `robot_ip` from `ROBOT_IP`), as RLinf does when it enumerates hardware."""
    if not hardware:
        return []
    from rlplace.config.hardware import REGISTRY

    kind = REGISTRY.get(str(hardware.get("type")))
    return [(k, var) for k, var in (kind.env_fallbacks if kind else ()) if hardware.get(k) is None]


def port_range() -> tuple[int, int]:
    raw = os.environ.get(PORT_RANGE_ENV)
    if not raw:
        return DEFAULT_PORT_RANGE
    try:
        low, high = (int(x) for x in raw.split("-"))
        if not 1024 <= low <= high <= 65535:
            raise ValueError
    except ValueError:
        raise PlacementError(
            f"{PORT_RANGE_ENV}={raw!r} is not a port range LOW-HIGH within 1024-65535 (e.g. 20000-32767)"
        ) from None
    return low, high


def exchange_timeout_s() -> float:
    raw = os.environ.get(EXCHANGE_TIMEOUT_ENV)
    try:
        value = float(raw) if raw else DEFAULT_EXCHANGE_TIMEOUT_S
        if value <= 0:
            raise ValueError
    except ValueError:
        raise PlacementError(f"{EXCHANGE_TIMEOUT_ENV}={raw!r} is not a positive number of seconds") from None
    return value


def free_ports(count: int, avoid: list[int] | set[int], low: int, high: int, first: int = FIRST_PORT) -> list[int]:
    """`count` distinct ports bindable on this machine, from `first` upward (wrapping within low-high).

    Sockets stay bound until all are found, so the ports are distinct; they are released on return."""
    skip = set(avoid)
    held: list[socket.socket] = []
    found: list[int] = []
    try:
        for port in _candidates(low, high, first):
            if port in skip:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("", port))
            except OSError:
                s.close()
                continue
            held.append(s)
            found.append(port)
            if len(found) == count:
                return found
    finally:
        for s in held:
            s.close()
    raise PlacementError(
        f"node {socket.gethostname()}: no {count} free ports in {low}-{high} for MASTER_PORT; set "
        f"{PORT_RANGE_ENV}=LOW-HIGH to a range that has free ports"
    )


def _candidates(low: int, high: int, first: int) -> Iterator[int]:
    start = first if low <= first <= high else low
    yield from range(start, high + 1)
    yield from range(low, start)


@ray.remote(num_cpus=0, max_retries=0)
def _reserve_ports(count: int, avoid: list[int], low: int, high: int) -> list[int]:
    return free_ports(count, avoid, low, high)


# -- inside a worker of a component Ray placed (no node in the plan) ---------------------------------


def exchange(placement: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
    """Agree on the rendezvous with the component's other workers through the KV store: publish this
    worker's node, wait until every rank has, then derive the same variables a pinned worker gets.

    Rank 0 chooses its port on its own node; restarted on the same node it keeps it (same values)."""
    prefix, timeout_s = spec["prefix"], spec["timeout_s"]
    rank, world = placement["rank"], placement["world_size"]
    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()
    label = ctx.get_node_labels().get(NODE_RANK_LABEL)
    mine: dict[str, Any] = {"node_id": node_id, "address": ray.util.get_node_ip_address()}
    mine["node_rank"] = int(label) if label is not None else _node_rank_from_record(placement, node_id)
    if rank == 0:
        before = _kv_json(prefix + "0")
        if before and before["node_id"] == node_id:
            mine["port"] = before["port"]
        else:
            low, high = port_range()
            first = low + (hash((placement["instance"], placement["component"])) % (high - low + 1))
            mine["port"] = free_ports(1, (), low, high, first=first)[0]
    _compat.kv_put(prefix + str(rank), json.dumps(mine))
    entries = _wait_for_peers(prefix, world, timeout_s, placement)
    same_node = [r for r in range(world) if entries[r]["node_id"] == node_id]
    nodes = sorted({(e["node_rank"] if e["node_rank"] is not None else -1, e["node_id"]) for e in entries})
    group_rank = [n for _, n in nodes].index(node_id)
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(same_node.index(rank)),
        "LOCAL_WORLD_SIZE": str(len(same_node)),
        "NODE_RANK": str(mine["node_rank"] if mine["node_rank"] is not None else -1),
        "GROUP_RANK": str(group_rank),
        "GROUP_WORLD_SIZE": str(len(nodes)),
        "MASTER_ADDR": entries[0]["address"],
        "MASTER_PORT": str(entries[0]["port"]),
    }


def _wait_for_peers(prefix: str, world: int, timeout_s: float, placement: dict[str, Any]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    pause = 0.01
    while True:
        keys = _compat.kv_keys(prefix)
        if len(keys) >= world:
            break
        if time.monotonic() >= deadline:
            from rlplace.config.ranges import format_ranks  # the config package costs ~20 ms to import

            arrived = sorted(int(k.decode().rsplit("/", 1)[1]) for k in keys)
            missing = [r for r in range(world) if r not in arrived]
            raise RendezvousError(
                f"component {placement['component']!r}: rank(s) {format_ranks(missing)} did not start within "
                f"{timeout_s:g} s (Ray places this component itself, so its workers tell each other where they "
                f"run before their constructors run; ranks {format_ranks(arrived) or 'none'} did). A worker that "
                f"cannot be scheduled or dies while starting never arrives: check `rlplace status` and the Ray logs; "
                f"{EXCHANGE_TIMEOUT_ENV} in the driver's environment changes the wait"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.25)
    return [_kv_json(prefix + str(r)) or {} for r in range(world)]


def _kv_json(key: str) -> dict[str, Any] | None:
    raw = _compat.kv_get(key)
    return json.loads(raw) if raw else None


def _node_rank_from_record(placement: dict[str, Any], node_id: str) -> int | None:
    """On nodes without rank labels, the job record's rank -> node map is the only truth."""
    record = records.read(placement["namespace"], placement["job"])
    if record:
        for rank, node in record.nodes.items():
            if node.node_id == node_id:
                return rank
    return None
