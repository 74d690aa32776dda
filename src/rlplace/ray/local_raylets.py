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
import secrets
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rlplace.errors import ConfigError, PlacementError, Problem
from rlplace.inventory import Inventory, Node, parse_nodes
from rlplace.ray.labels import ACCELERATOR_LABEL, HIDE_GPUS_ENV, NODE_RANK_LABEL, SIMULATED_LABEL, SPARE_LABEL

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
    #: The value of MARK_ENV its processes were started with (`marked_processes` finds them by it).
    mark: str = ""

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


class StartInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a signal that raised KeyboardInterrupt) while a simulated cluster started: every process it had
    started is stopped before this is raised; `killed` lists those that had to be killed ("pid name"), and
    `left` those still alive after that (normally none: the process table was checked)."""

    def __init__(self, killed: list[str], left: list[str]):
        super().__init__()
        self.killed = killed
        self.left = left

    def describe(self) -> str:
        """What the start left, from the process table (as the end of every run says it)."""
        if self.left:
            return f"the simulated cluster's processes still running, stop them by hand: {', '.join(self.left)}"
        return f"the simulated cluster's {len(self.killed)} process(es) stopped, none left (process table checked)"


@contextmanager
def simulated_cluster(
    nodes: str | Inventory,
    spares: str | Sequence[Node] = (),
    *,
    connect: bool = True,
    on_interrupt: Callable[[StartInterrupted], object] | None = None,
) -> Iterator[SimulatedCluster]:
    """Start a simulated cluster of `nodes` (`--nodes` syntax, "2x8:A800,1x4:RTX4090,1x0", or an Inventory) and
    hot `spares` (a count or node shapes, as `rlplace demo --spare`), connect this process to it (unless not
    `connect`: another process joins it at `.address`), and yield the running cluster.

    Node rank 0 is the head (this process's node). A cluster larger than this machine can hold is refused before
    anything starts (a ConfigError naming the limit and how it was computed: `rlplace.ray.machine`). On exit Ray
    is shut down, every node stopped, and every process of this Ray session checked gone (`ps`); one that
    outlives the grace period is killed. Interrupted while it starts (Ctrl-C, or SIGTERM where it has a handler),
    every process it started is killed at once, found by a variable in their environment, and StartInterrupted
    says what was left; `on_interrupt` is then called with it at once, from another thread (a CLI exits there:
    Ray's start-up can block the main thread, and so the KeyboardInterrupt, for half a minute more).
    """
    import ray
    from ray.cluster_utils import Cluster

    inventory = simulated_inventory(nodes) if isinstance(nodes, str) else nodes
    if isinstance(spares, str):
        spares = simulated_spares(spares, inventory)
    check_machine_holds(len(inventory) + len(spares), nodes if isinstance(nodes, str) else str(len(inventory)))
    if connect and ray.is_initialized():
        raise PlacementError("this process is already connected to a Ray cluster; cannot start a simulated one")
    logging.getLogger("ray").setLevel(logging.WARNING)  # no "Overwriting previous Ray address" chatter
    for key, value in HIDE_GPUS_ENV.items():
        os.environ.setdefault(key, value)  # inherited by the raylets started below
    args = [node_args(n) for n in inventory.nodes]
    # No autoscaler monitor: a simulated cluster has its nodes and no more (a drain goes through the GCS).
    head = {**args[0], "include_dashboard": False, "no_monitor": True, "_system_config": HEALTH_CHECKS}
    mark = secrets.token_hex(8)
    watcher = _Watcher(mark, on_interrupt)
    try:
        # Every Ray process started here (and the workers they start) carries the mark; a signal kills them at once.
        with _marked(mark), watcher:
            cluster = Cluster(initialize_head=True, head_node_args=head)
            assert cluster.head_node is not None  # initialize_head=True started it
            handle = SimulatedCluster(
                inventory, cluster.head_node.get_session_dir_path(), spares=tuple(spares), cluster=cluster
            )
            for node, started_with in zip(inventory.nodes[1:], args[1:], strict=True):
                handle.nodes[node.rank] = cluster.add_node(**started_with)
            for spare in handle.spares:
                cluster.add_node(**node_args(spare))
            if connect:
                ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
    except BaseException as e:  # interrupted, or a start that failed: nothing it started may stay
        with _uninterrupted():
            if connect and ray.is_initialized():
                ray.shutdown()
            killed, left = _kill_marked(mark)
        if isinstance(e, KeyboardInterrupt) or watcher.signalled:
            raise StartInterrupted([*watcher.killed, *killed], left) from None
        raise
    handle.mark = mark
    try:
        yield handle
    finally:
        with _uninterrupted():  # a second Ctrl-C must not leave half the cluster running
            started = marked_processes(mark)  # before the raylets go: their agents and workers are found through them
            if connect:
                ray.shutdown()
            cluster.shutdown()
            handle.killed = _stop_stragglers(os.path.basename(handle.session_dir), started)


def check_machine_holds(count: int, written: str, flag: str = "nodes") -> None:
    """A ConfigError when `count` simulated nodes (spares included) are more than this machine can hold; `flag`
    names where they were written (`--simulate`, `--nodes`: the CLI says it as a command-line error)."""
    from rlplace.ray.machine import too_many

    why = too_many(count)
    if why is not None:
        raise ConfigError(Problem(path=flag, value=written, message=why))


#: The environment variable that marks the processes of a simulated cluster while it starts (its value: one
#: cluster's), so that an interrupted start can find every process it started, also those Ray had not yet
#: registered.
MARK_ENV = "RLPLACE_SIMULATED_CLUSTER"
#: How long the processes of an interrupted start get to die after SIGKILL (they cannot refuse it).
KILL_WAIT_S = 1.0


@contextmanager
def _marked(mark: str) -> Iterator[None]:
    saved = os.environ.get(MARK_ENV)
    os.environ[MARK_ENV] = mark
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(MARK_ENV, None)
        else:
            os.environ[MARK_ENV] = saved


def marked_processes(mark: str) -> list[Any]:
    """The live processes (psutil) of the simulated cluster whose processes carry `mark` (`SimulatedCluster.mark`),
    and every process they started: its GCS, raylets, the raylets' agents (which a raylet starts with an
    environment of its own, without the mark) and workers."""
    import ray  # noqa: F401, I001  (psutil ships with Ray: importable once ray is imported)
    import psutil

    found: dict[int, Any] = {}
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if proc.pid != os.getpid() and proc.environ().get(MARK_ENV) == mark:
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    child.info = {"pid": child.pid, "name": child.name()}
                    found[child.pid] = child
        except (psutil.Error, OSError):  # gone meanwhile, a zombie, or another user's
            continue
    return [p for p in found.values() if _alive(p)]


def _alive(proc: Any) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_marked(mark: str) -> tuple[list[str], list[str]]:
    """SIGKILL every live process carrying `mark`, scanning again until two scans QUIET_S apart find none (a raylet
    may start an agent, the starting thread a raylet, meanwhile), for at most KILL_WAIT_S and the last kills'
    QUIET_S; ("pid name" killed, "pid name" still alive). A killed process whose parent was killed too may stay a
    zombie (a container's init need not reap it): dead, and not counted."""
    import psutil

    killed: list[str] = []
    deadline = time.monotonic() + KILL_WAIT_S
    quiet = 0
    while quiet < 2:
        found = marked_processes(mark)
        quiet = 0 if found else quiet + 1
        for proc in found:
            try:
                proc.kill()
                killed.append(f"{proc.pid} {proc.info['name']}")
            except psutil.NoSuchProcess:
                continue
        # What was just killed gets its moment to die before anything counts as left (a fresh `make test` run on
        # the loaded 2-core machine listed two agents killed an instant before the deadline as still running).
        psutil.wait_procs(found, timeout=QUIET_S)
        if not found:
            time.sleep(QUIET_S)
        if time.monotonic() >= deadline:
            return killed, [f"{p.pid} {p.info['name']}" for p in marked_processes(mark)]
    return killed, []


#: How far apart the scans of an interrupted start's processes are.
QUIET_S = 0.1


def _noted(signum: int, frame: object) -> None:
    """A signal's Python handler that does nothing itself: Python's C handler writes it to the wake-up pipe, which
    the watcher reads."""


class _Watcher:
    """While a simulated cluster starts: a signal (Ctrl-C, SIGTERM) kills its processes at once, from a thread.

    Python runs a signal's handler in the main thread only between two of its instructions, and Ray's start-up
    sits in blocking calls for seconds (waiting for the GCS to register a node: 3.5 s measured; 28-30 s once the
    node's raylet is gone, whether the GCS is still running or not), so the KeyboardInterrupt comes late. The
    signal is also written to a wake-up pipe at once (`signal.set_wakeup_fd`, from Python's C handler), which this
    thread reads: it kills the marked processes and calls `on_interrupt`. Only in the main thread (where the
    wake-up fd can be set), and for signals with a Python handler: SIGINT always, SIGTERM where one is installed;
    with `on_interrupt` (which ends the start: a CLI exits) both get one that only notes them meanwhile, so the
    main thread raises nothing inside Ray's start-up code."""

    def __init__(self, mark: str, on_interrupt: Callable[[StartInterrupted], object] | None):
        self.mark = mark
        self.on_interrupt = on_interrupt
        self.signalled = False
        self.killed: list[str] = []
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Watcher:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._saved = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._handlers = {}
        if self.on_interrupt is not None:  # it ends the start: the main thread must not raise inside Ray meanwhile
            self._handlers = {s: signal.signal(s, _noted) for s in (signal.SIGINT, signal.SIGTERM)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rlplace-simulated-start", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:  # in the watcher's thread
        while not self._stop.is_set():
            ready, _, _ = select.select([self._read], [], [], 0.1)
            if ready and {signal.SIGINT, signal.SIGTERM} & set(os.read(self._read, 64)):
                self.signalled = True
                self.killed, left = _kill_marked(self.mark)
                if self.on_interrupt is not None:
                    self.on_interrupt(StartInterrupted(self.killed, left))
                return

    def __exit__(self, *exc: object) -> None:
        if self._thread is None:
            return
        self._stop.set()
        signal.set_wakeup_fd(self._saved)
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        self._thread.join(KILL_WAIT_S + 1)
        os.close(self._read)
        os.close(self._write)


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """SIGINT ignored meanwhile (in the main thread, where Python delivers it): stopping is never cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved)


def session_processes(session_name: str) -> list:
    """Live processes of one Ray session: every Ray process carries its session name on its command line."""
    import ray  # noqa: F401, I001  (psutil ships with Ray: importable once ray is imported)
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if session_name in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _stop_stragglers(session_name: str, started: list[Any]) -> list[str]:
    """Wait for the session's processes and those `started` (found before the shutdown) to end, kill those that do
    not; "pid name" of each killed."""
    import psutil

    pids = {p.pid for p in started}
    everyone = [*started, *(p for p in session_processes(session_name) if p.pid not in pids)]
    _, alive = psutil.wait_procs([p for p in everyone if _alive(p)], timeout=EXIT_GRACE_S)
    killed = []
    for proc in alive:
        killed.append(f"{proc.pid} {proc.name()}")
        proc.kill()
    return killed


def node_args(node: Node) -> dict[str, Any]:
    """How `ray.cluster_utils.Cluster` starts the node: its CPUs and GPUs, the labels `rlplace start` would set
    (and SIMULATED_LABEL, which `rlplace status` reads), and the labels it was declared with (racks and NVLink
    domains of `--nodes 8x4/rack=2`, an inventory file's `labels`), so a plan made on the simulated cluster sees
    the declared topology. Keys under `ray.io/` (a zone) are Ray's own, refused as custom labels, and left out:
    the simulated cluster is zone-blind."""
    declared = {k: v for k, v in node.labels.items() if not k.startswith(RAY_LABEL_PREFIX)}
    labels = {**declared, **({SPARE_LABEL: "true"} if node.rank < 0 else {NODE_RANK_LABEL: str(node.rank)})}
    labels[SIMULATED_LABEL] = "true"
    if node.num_gpus:
        labels[ACCELERATOR_LABEL] = node.gpu_model or SIMULATED_GPU
    return {"num_cpus": node.num_cpus, "num_gpus": node.num_gpus, "labels": labels}
