"""Raylets on this machine posing as several nodes with GPUs: an embedded Ray cluster (no GPU needed).

`rlplace.simulated_cluster("2x8:A800,1x4:RTX4090,1x0")` (the public API), `rlplace demo` and `rlplace run
--simulate` use it so that placement across nodes and GPUs can be tried on a laptop, with one's own actor
classes. Each simulated node is a real raylet (`ray.cluster_utils.Cluster`) with logical GPUs, the node-rank
and accelerator labels `rlplace start` would set, and workers given no GPU see none, so the planner, placement
groups and workers behave exactly as on a real cluster. Everything started here is stopped on exit, also after
an error or Ctrl-C, and the process table is checked for what is left.

Hot spares (`spares=`) join as `rlplace start --spare` would: no rank, the `rlplace/spare` label. A node
can be lost abruptly (`lose_node`: its raylet and workers are killed, as when a machine goes), to watch a
job move its workers to a spare, and started again later (`add_node`), to watch elastic components grow
back; or drained with a deadline (`drain_node`, a preemption notice), to watch the job move them before it
goes. Ray's health checks run every second here, three misses declaring a node dead, so a loss is noticed in a
few seconds rather than Ray's default of about 15 to 30.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rlplace.errors import ConfigError, PlacementError, Problem
from rlplace.inventory import Inventory, Node, parse_nodes
from rlplace.ray.labels import ACCELERATOR_LABEL, HIDE_GPUS_ENV, NODE_RANK_LABEL, SPARE_LABEL

#: Logical CPUs per simulated node. Logical CPUs cost nothing (Ray does not start a process per CPU); 32 lets
#: `--simulate` hold configs that put many workers on one node (each worker reserves 1 CPU).
CPUS_PER_NODE = 32
SIMULATED_GPU = "simulated"  # the accelerator label of nodes declared without a model ("2x4")
#: How long Ray's processes get to exit by themselves after shutdown before they are killed.
EXIT_GRACE_S = 10.0
#: Label keys Ray reserves for itself (`ray start --labels` and `Cluster.add_node` refuse them).
RAY_LABEL_PREFIX = "ray.io/"
#: Ray's node health checks on the embedded cluster (see the module docstring and docs/ray.md).
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


@dataclass
class SimulatedCluster:
    """The running cluster: its nodes and Ray session, `address` (what `ray.init`, `rlplace.connect(address=...)`
    or `$RAY_ADDRESS` take); after exit, what had to be killed (normally nothing)."""

    inventory: Inventory
    session_dir: str
    killed: list[str] = field(default_factory=list)  # "pid name" of processes that outlived the shutdown
    spares: tuple[Node, ...] = ()
    nodes: dict[int, Any] = field(default_factory=dict, repr=False)  # rank -> ray.cluster_utils node handle
    cluster: Any = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """The head's GCS address, HOST:PORT."""
        return self.cluster.address

    def lose_node(self, rank: int) -> float:
        """Remove node `rank` abruptly (raylet and workers killed, no goodbye to Ray); returns when (time.time())."""
        if rank not in self.nodes:
            raise PlacementError(f"node {rank} is not a node that can be lost here (ranks {sorted(self.nodes)})")
        from rlplace.ray import _compat

        _compat.quiet_raylet_deaths()  # the job's events report the loss instead of the raylet's log
        self.cluster.remove_node(self.nodes.pop(rank), allow_graceful=False)
        return time.time()

    def drain_node(self, rank: int, deadline_s: float) -> float:
        """A preemption notice for node `rank`: Ray drains it with a deadline `deadline_s` from now (the node keeps
        running; `lose_node` at the deadline is the cloud's part); returns when (time.time())."""
        if rank not in self.nodes:
            raise PlacementError(f"node {rank} is not a node that can be drained here (ranks {sorted(self.nodes)})")
        from rlplace.ray import _compat

        _compat.quiet_raylet_deaths()  # the drained raylet exits once idle; the job's events report it
        now = time.time()
        _compat.drain_node(self.address, self.nodes[rank].node_id, int((now + deadline_s) * 1000), "preemption")
        return now

    def add_node(self, rank: int) -> float:
        """Start node `rank` again (a replacement: same shape and rank label, as `rlplace start --node-rank`
        would); returns when it joined (time.time())."""
        if rank in self.nodes or not 0 < rank < len(self.inventory):
            raise PlacementError(f"node {rank} cannot be added: it is running, or not a node of {self.inventory}")
        self.nodes[rank] = self.cluster.add_node(**node_args(self.inventory.node(rank)))
        self.cluster.wait_for_nodes()
        return time.time()


def simulated_inventory(nodes: str) -> Inventory:
    """The nodes to simulate, from `--nodes` syntax ("2x4:A800,1x2:RTX4090,1x0"); a ConfigError if malformed."""
    return parse_nodes(nodes, num_cpus=CPUS_PER_NODE)


def simulated_spares(text: str | None, inventory: Inventory, like: int | None = None) -> tuple[Node, ...]:
    """`--spare`: a count ("1": each shaped like node `like`, else like the node with the most GPUs) or node
    shapes in `--nodes` syntax ("1x4:A800"). Spares have rank -1 (none)."""
    if text is None or text.strip() in ("", "0"):
        return ()
    text = text.strip()
    if text.isdigit():
        model = inventory.node(like) if like is not None else max(inventory.nodes, key=lambda n: n.num_gpus)
        shapes = [model] * int(text)
    else:
        try:
            shapes = list(parse_nodes(text, num_cpus=CPUS_PER_NODE).nodes)
        except ConfigError as e:
            message = (
                f"{text!r} is neither a count (1) nor node shapes COUNTxGPUS[:MODEL] (1x4:A800): "
                f"{e.problems[0].message}"
            )
            raise ConfigError(Problem(path="--spare", value=text, message=message)) from e
    return tuple(
        Node(rank=-1, num_gpus=n.num_gpus, gpu_model=n.gpu_model, num_cpus=n.num_cpus, resources=dict(n.resources))
        for n in shapes
    )


@contextmanager
def simulated_cluster(
    nodes: str | Inventory, spares: str | Sequence[Node] = (), *, connect: bool = True
) -> Iterator[SimulatedCluster]:
    """Start a simulated cluster of `nodes` (`--nodes` syntax, "2x8:A800,1x4:RTX4090,1x0", or an Inventory) and
    hot `spares` (a count or node shapes, as `rlplace demo --spare`), connect this process to it (unless not
    `connect`: another process joins it at `.address`), and yield the running cluster.

    Node rank 0 is the head (this process's node). On exit Ray is shut down, every node stopped, and
    every process of this Ray session checked gone (`ps`); one that outlives the grace period is killed.
    """
    import ray
    from ray.cluster_utils import Cluster

    inventory = simulated_inventory(nodes) if isinstance(nodes, str) else nodes
    if isinstance(spares, str):
        spares = simulated_spares(spares, inventory)
    if connect and ray.is_initialized():
        raise PlacementError("this process is already connected to a Ray cluster; cannot start a simulated one")
    logging.getLogger("ray").setLevel(logging.WARNING)  # no "Overwriting previous Ray address" chatter
    for key, value in HIDE_GPUS_ENV.items():
        os.environ.setdefault(key, value)  # inherited by the raylets started below
    args = [node_args(n) for n in inventory.nodes]
    head = {**args[0], "include_dashboard": False, "_system_config": HEALTH_CHECKS}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    assert cluster.head_node is not None  # initialize_head=True started it
    handle = SimulatedCluster(
        inventory, cluster.head_node.get_session_dir_path(), spares=tuple(spares), cluster=cluster
    )
    try:
        for node, started_with in zip(inventory.nodes[1:], args[1:], strict=True):
            handle.nodes[node.rank] = cluster.add_node(**started_with)
        for spare in handle.spares:
            cluster.add_node(**node_args(spare))
        if connect:
            ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
        yield handle
    finally:
        if connect:
            ray.shutdown()
        cluster.shutdown()
        handle.killed = _stop_stragglers(os.path.basename(handle.session_dir))


def session_processes(session_name: str) -> list:
    """Live processes of one Ray session: every Ray process carries its session name on its command line."""
    import ray  # noqa: F401, I001  (psutil ships with Ray: importable once ray is imported)
    import psutil  # type: ignore[import-untyped]  # no type stubs installed (it ships with Ray, without them)

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if session_name in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _stop_stragglers(session_name: str) -> list[str]:
    import psutil  # type: ignore[import-untyped]  # no type stubs installed (it ships with Ray, without them)

    _, alive = psutil.wait_procs(session_processes(session_name), timeout=EXIT_GRACE_S)
    killed = []
    for proc in alive:
        killed.append(f"{proc.pid} {proc.name()}")
        proc.kill()
    return killed


def node_args(node: Node) -> dict[str, Any]:
    """How `ray.cluster_utils.Cluster` starts the node: its CPUs and GPUs, the labels `rlplace start` would set,
    and the labels it was declared with (racks and NVLink domains of `--nodes 8x4/rack=2`, an inventory file's
    `labels`), so a plan made on the simulated cluster sees the declared topology. Keys under `ray.io/` (a
    zone) are Ray's own, refused as custom labels, and left out: the simulated cluster is zone-blind."""
    declared = {k: v for k, v in node.labels.items() if not k.startswith(RAY_LABEL_PREFIX)}
    labels = {**declared, **({SPARE_LABEL: "true"} if node.rank < 0 else {NODE_RANK_LABEL: str(node.rank)})}
    if node.num_gpus:
        labels[ACCELERATOR_LABEL] = node.gpu_model or SIMULATED_GPU
    return {"num_cpus": node.num_cpus, "num_gpus": node.num_gpus, "labels": labels}
