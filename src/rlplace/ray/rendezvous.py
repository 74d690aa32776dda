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

How the values travel: the driver computes them from the job's state (each component's workers, and the
node serving each rank, which a spare takeover remaps) and passes them, with the worker's placement record,
as a constructor argument through a thin subclass of the user's class (`rlplace.ray.launch`); the
subclass sets them in `os.environ` and then runs the user's constructor. No per-worker KV write, no
runtime_env (which would cost a fresh worker process), and a restarted actor gets the same arguments
again, so the same values. The masters chosen go into the state, and so into the job's record.

Master ports (`rlplace.ray.master_ports`) are checked by binding them on the master's node (in the driver itself
when the master is on the driver's machine, else one zero-CPU task per node address; all components at
once), skipping ports that other live jobs' records hold there.

Components Ray places itself (strategy `default`: no node in the plan) agree on theirs among themselves
(`rlplace.ray.exchange`); the driver tells them only where to meet and for how long.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from rlplace.errors import PlacementError
from rlplace.inventory import Node
from rlplace.plan import Worker
from rlplace.ray import exchange, records
from rlplace.ray.layout import Layout
from rlplace.ray.master_ports import free_ports, port_range
from rlplace.ray.port import Cluster
from rlplace.ray.state import Change, JobState, Master
from rlplace.ray.worker import rendezvous_timeout_s

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


class Rendezvous:
    """The rendezvous of one job: each worker's constructor payload, from the state; chooses the masters."""

    def __init__(self, cluster: Cluster, state: JobState):
        self._cluster = cluster
        self._state = state
        #: component -> (the workers it was computed for, its layout; None: unpinned). Recomputed when the state
        #: gives the component other workers.
        self._layouts: dict[str, tuple[tuple[Worker, ...], Layout | None]] = {}
        self._warned: set[tuple[str | None, str]] = set()
        #: component -> how many times it changed size: the workers of each size meet apart (`renew`).
        self._generation: dict[str, int] = {}
        #: workers a resize is starting whose component Ray places: they meet the others in `on_resized`'s call
        self._joining: set[str] = set()

    # -- what each worker receives ----------------------------------------------------------------

    def payload(self, worker: Worker) -> dict[str, Any]:
        """The constructor argument of `worker`: its placement record and its rendezvous env (or, when
        Ray places the component, what its workers need to agree on one among themselves)."""
        self._ensure_masters(worker.component)
        state = self._state
        node = state.node(worker.node_rank)
        placement = {
            "job": state.name,
            "namespace": state.namespace,
            "instance": state.instance,
            "node_id": node.node_id if node else None,
            "node_gpus": node.num_gpus if node else 0,
            "accelerator_resource": node.accelerator_resource if node else "GPU",
            "component": worker.component,
            "name": worker.name,
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
        env = {**visibility_env(self._cluster, worker, node), **(self.env(worker) or {})}
        self._warn_overrides(worker, env)
        meet = None
        if self._layout(worker.component) is None and worker.name not in self._joining:
            where = exchange.prefix(state.instance, worker.component, self._generation.get(worker.component, 0))
            meet = {"prefix": where, "timeout_s": rendezvous_timeout_s()}
        return {"placement": placement, "env": env, "exchange": meet}

    def env(self, worker: Worker) -> dict[str, str] | None:
        """The rendezvous variables of a pinned worker (None when Ray places its component)."""
        layout = self._layout(worker.component)
        if layout is None or worker.node_rank is None:
            return None
        master = self._state.master(worker.component)
        assert master is not None  # payload() had _ensure_masters choose it
        return layout.variables(worker.rank, worker.world_size, worker.node_rank, master.address, master.port)

    def master(self, component: str) -> Master | None:
        self._ensure_masters(component)
        return self._state.master(component)

    def renew(self, components: list[str], joining: Iterable[str] = ()) -> None:
        """`components` changed size: their ranks meet again, never on the port of the last rendezvous, whose
        store may still be open. Pinned ones get fresh master ports (those without a master yet get one at
        launch); those Ray placed meet at a new exchange, whose rank 0 chooses a new port, all of them in the
        same call: the new workers (`joining`) start without it, until `joined()`."""
        state = self._state
        self._joining = set(joining)
        for name in components:
            self._generation[name] = self._generation.get(name, 0) + 1
        todo = {}
        for name in components:
            if name in state.masters() and self._layout(name) is not None:
                node = state.node(state.worker(name, 0).node_rank)
                if node is None or not node.address:
                    raise PlacementError(f"{state.worker(name, 0).name}: node has no address; is it alive?")
                todo[name] = node
        if todo:
            last: dict[str, set[int]] = {}  # the old ports stay out of the draw
            for name in todo:
                old = state.masters()[name]
                last.setdefault(old.address, set()).add(old.port)
            self._choose_masters(todo, last)

    def joined(self) -> None:
        """The new workers of a resize are started: from now on their payloads carry the whole rendezvous."""
        self._joining = set()

    def forget(self) -> None:
        """At shutdown: delete what unpinned components exchanged."""
        self._cluster.kv_delete(exchange.prefix(self._state.instance, ""), by_prefix=True)

    # -- internals --------------------------------------------------------------------------------------

    def _layout(self, component: str) -> Layout | None:
        workers = self._state.workers(component)
        cached = self._layouts.get(component)
        if cached is not None and cached[0] is workers:
            return cached[1]
        layout = Layout.of([w.node_rank for w in workers])  # the workers are in rank order
        self._layouts[component] = (workers, layout)
        return layout

    def _ensure_masters(self, component: str) -> None:
        """Allocate a port for `component`'s master if it is new or moved (its rank 0 runs elsewhere now); the
        state (and so the job record) gets it. Runs at the component's first payload, and again only after its rank
        0 moved. One component at a time: a takeover of one node never waits for a master of another component,
        whose rank 0 may be on a node that does not answer (found by the explorer, docs/ray.md)."""
        state = self._state
        if self._layout(component) is None:
            return
        rank0 = state.worker(component, 0)
        node = state.node(rank0.node_rank)
        if node is None or not node.address:
            raise PlacementError(f"{rank0.name}: node {rank0.node_rank} has no address; is it alive?")
        known = state.master(component)
        if known is not None and known.node_id == node.node_id:
            return
        self._choose_masters({component: node})

    def _choose_masters(self, todo: dict[str, Node], avoid: dict[str, set[int]] | None = None) -> None:
        """Masters for the components of `todo` on the nodes given, on ports that other live jobs' records do not
        hold there (nor `avoid`: address -> ports); into the state. Two drivers choosing at one moment may take the
        same port, each before the other's record shows it: after the change, whoever sees a port it just chose held
        moves (a master chosen earlier stays: its workers have it, and the other driver sees the clash)."""
        state = self._state

        def taken() -> dict[str, set[int]]:
            held = _ports_of(records.read_all(self._cluster, live_only=True), skip=state.instance)
            for address, ports in (avoid or {}).items():
                held.setdefault(address, set()).update(ports)
            return held

        state.apply(Change(masters=self._allocate(todo, taken())))
        for _ in range(3):
            clash = [name for name in self._clashes() if name in todo]
            if not clash:
                return
            state.apply(Change(masters=self._allocate({name: todo[name] for name in clash}, taken())))

    def _allocate(self, todo: dict[str, Node], taken: dict[str, set[int]]) -> dict[str, Master]:
        """Ports for the masters in `todo`, all of one address at once: bound here when the address is this
        driver's own (no task, no worker process to wait for), else by one zero-CPU task on the node."""
        by_address: dict[str, list[str]] = {}
        for name, node in todo.items():
            by_address.setdefault(node.address or "", []).append(name)
        low, high = port_range()
        here = self._cluster.driver_ip()
        timeout_s = self._state.timeout_s
        masters = self._state.masters()
        found: dict[str, Any] = {}
        for address, names in by_address.items():
            keep = {m.port for n, m in masters.items() if n not in todo and m.address == address}
            avoid = sorted(taken.get(address, set()) | keep)
            if address == here:
                found[address] = free_ports(len(names), avoid, low, high)
                continue
            node_id = todo[names[0]].node_id
            found[address] = self._cluster.run_task(
                free_ports, len(names), avoid, low, high, node_id=str(node_id) if node_id else None
            )
        refs = [f for f in found.values() if self._cluster.is_result(f)]
        ready, _ = self._cluster.wait(refs, timeout_s)
        chosen: dict[str, Master] = {}
        for address, names in by_address.items():
            if self._cluster.is_result(found[address]):
                if found[address] not in ready:
                    raise PlacementError(
                        f"could not reach node {todo[names[0]].rank} ({address}) within {timeout_s:g} s to "
                        f"choose a MASTER_PORT for {', '.join(names)}; is the node alive?"
                    )
                found[address] = self._cluster.get(found[address])
            for name, port in zip(names, found[address], strict=True):
                node = todo[name]
                chosen[name] = Master(node.rank, node.node_id, address, port)
        return chosen

    def _clashes(self) -> list[str]:
        """Our components whose port another live job's record holds on the same address. Whoever sees its port
        held moves: which of two drivers allocated first, their clocks cannot say (equal, or skewed across
        machines; found by the explorer: with equal clocks neither moved)."""
        held = _ports_of(records.read_all(self._cluster, live_only=True), skip=self._state.instance)
        return [n for n, m in self._state.masters().items() if m.port in held.get(m.address, set())]

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
                self._state.apply(Change(warnings=(message,)))
                log.warning(message)


def _ports_of(recs: list[records.JobRecord], *, skip: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for r in recs:
        if r.instance != skip:
            for address, ports in r.ports_by_address().items():
                out.setdefault(address, set()).update(ports)
    return out


def visibility_env(cluster: Cluster, worker: Worker, node: Node | None) -> dict[str, str]:
    """The devices a worker sees when Ray's own assignment cannot say (`Worker.visible_gpus`): every GPU of
    its node for a worker placed through a robot, `node` or accelerator-less group (RLinf semantics), or the
    GPUs of a process spanning GPUs that other processes share (it asks Ray for none). Empty for the rest."""
    if worker.visible_gpus is None or node is None or not node.num_gpus:
        return {}
    return {cluster.visible_devices_var(node.accelerator_resource): ",".join(map(str, worker.visible_gpus))}


def hardware_env_fallbacks(hardware: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(key, variable) pairs of a robot's config the worker fills from its node's environment when the config
    leaves the key out (a Franka's `robot_ip` from `ROBOT_IP`), as RLinf does when it enumerates hardware."""
    if not hardware or "units" in hardware:  # several units: the plan filled them from the node's environment
        return []
    from rlplace.config.hardware import REGISTRY

    kind = REGISTRY.get(str(hardware.get("type")))
    return [(k, var) for k, var in (kind.env_fallbacks if kind else ()) if hardware.get(k) is None]
