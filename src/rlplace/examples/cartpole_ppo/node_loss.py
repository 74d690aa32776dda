"""The demo's node-loss flags (`rlplace demo`): hot spares for the embedded cluster, a node removed on purpose
during training to show a spare taking over, elastic components that shrink instead, and the node started again
later to show them growing back; or a node drained with a deadline (a preemption notice) to show the job moving
its workers before the node goes."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from rlplace.cli_types import positive_seconds
from rlplace.errors import RlplaceError
from rlplace.lifecycle import EventKind


def add_node_loss_arguments(p: argparse.ArgumentParser) -> None:
    """Spares, a node lost on purpose and started again, elastic components (`rlplace demo`)."""
    g = p.add_argument_group("node loss")
    g.add_argument(
        "--spare",
        metavar="N|NODES",
        help="hot spares to join, a count (shaped like the --kill-node node, else like the "
        "largest node) or shapes (1x4:A800); with --kill-node the default is 1",
    )
    g.add_argument(
        "--kill-node",
        type=int,
        metavar="RANK",
        help="remove this node abruptly during training (not 0: the head holds the cluster)",
    )
    g.add_argument(
        "--kill-after",
        type=positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="with --kill-node: seconds after training starts; a run solved before then keeps training until the "
        "loss is handled (default: %(default)s)",
    )
    g.add_argument(
        "--drain-node",
        type=int,
        metavar="RANK",
        help="a preemption notice during training: Ray drains this node with --deadline, the job moves its workers "
        "to a spare (or shrinks with --elastic) before then, and the node is removed at the deadline",
    )
    g.add_argument(
        "--drain-after",
        type=positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="with --drain-node: seconds after training starts (default: %(default)s)",
    )
    g.add_argument(
        "--deadline",
        type=positive_seconds,
        default=20.0,
        metavar="SECONDS",
        help="with --drain-node: seconds from the notice until the node goes (default: %(default)s)",
    )
    g.add_argument(
        "--elastic",
        action="store_true",
        help="make the pipeline's components elastic (from 1 worker up to their planned size, where the config does "
        "not say): a lost node without a spare shrinks them instead of stopping the run",
    )
    g.add_argument(
        "--add-node-after",
        type=positive_seconds,
        metavar="SECONDS",
        help="with --kill-node: start the lost node again this many seconds after it went (the "
        "shrunk components grow back onto it)",
    )
    g.add_argument(
        "--stop-when-handled",
        action="store_true",
        help="with --kill-node or --drain-node: end the run at the first iteration finished after the job has dealt "
        "with the node (a spare took over, the components shrank, or grew back with --add-node-after), solved or "
        "not; without it training goes on until CartPole is solved or the budget ends",
    )


def simulated_spares_of(args: argparse.Namespace, nodes: Any) -> tuple:
    """The embedded cluster's spares from --spare / --kill-node / --drain-node (checked before anything starts)."""
    from rlplace.ray.local_raylets import simulated_spares

    kill, drain = getattr(args, "kill_node", None), getattr(args, "drain_node", None)
    if kill is not None and drain is not None:
        raise RlplaceError(f"--kill-node {kill} and --drain-node {drain}: the demo shows one node going; choose one")
    for flag, rank in (("--kill-node", kill), ("--drain-node", drain)):
        if rank is not None and not 0 < rank < len(nodes):
            raise RlplaceError(
                f"{flag} {rank}: the embedded cluster's nodes that can be lost are 1-{len(nodes) - 1} "
                "(node 0 is the head: losing it ends the cluster)"
            )
    if getattr(args, "add_node_after", None) is not None and kill is None:
        raise RlplaceError("--add-node-after needs --kill-node RANK: it starts that node again after the loss")
    if getattr(args, "stop_when_handled", False) and kill is None and drain is None:
        raise RlplaceError(
            "--stop-when-handled needs --kill-node RANK or --drain-node RANK: it ends the run once the "
            "job has dealt with that node"
        )
    goes = kill if kill is not None else drain
    text = getattr(args, "spare", None)
    return simulated_spares("1" if text is None and goes is not None else text, nodes, like=goes)


class FaultyCluster(Protocol):
    """What the node-loss flags do to the embedded cluster (rlplace.ray.local_raylets): each returns when."""

    @property
    def nodes(self) -> Mapping[int, object]: ...

    def lose_node(self, rank: int) -> float: ...

    def drain_node(self, rank: int, deadline_s: float) -> float: ...

    def add_node(self, rank: int) -> float: ...


def node_fault(args: argparse.Namespace, cluster: FaultyCluster | None) -> NodeKiller:
    """What the demo does to a node during training (--kill-node or --drain-node; nothing without either)."""
    if getattr(args, "drain_node", None) is not None:
        return NodeDrainer(cluster, args.drain_node, args.drain_after, args.deadline)
    rank, after = getattr(args, "kill_node", None), getattr(args, "kill_after", 0.0)
    return NodeKiller(cluster, rank, after, getattr(args, "add_node_after", None))


class NodeKiller:
    """`--kill-node RANK --kill-after S`: removes the embedded cluster's node RANK abruptly S seconds after
    training starts (`start`), from a timer thread, and with `--add-node-after A` starts it again after the
    first iteration that ends A seconds after the loss; the run does not stop early (solved) before the job has
    dealt with that (`settled`; with `--stop-when-handled` it stops then), and the timer is cancelled when the
    iteration budget ends first."""

    def __init__(
        self, cluster: FaultyCluster | None, rank: int | None, after_s: float, add_after_s: float | None = None
    ):
        self.cluster, self.rank, self.after_s, self.add_after_s = cluster, rank, after_s, add_after_s
        self.at: float | None = None  # when the node was removed (time.time())
        self.added_at: float | None = None  # when it was started again
        self.done = 0  # iterations finished when it was removed
        self._finished = 0
        self._timer: threading.Timer | None = None

    def counting(self, progress: Any) -> Any:
        """`progress`, also counting the iterations finished (to say when the node went), and starting the lost
        node again once `--add-node-after` has passed (here, in the main thread: Ray starts a node only there)."""

        def advance(iteration: int, curve: Any) -> None:
            self._finished = iteration
            due = self.at is not None and self.add_after_s is not None and time.time() >= self.at + self.add_after_s
            if due and self.added_at is None and self.cluster is not None and self.rank is not None:  # due: both
                self.added_at = self.cluster.add_node(self.rank)
            progress(iteration, curve)

        return advance

    def start(self) -> None:
        if self.cluster is not None and self.rank is not None:
            self._timer = threading.Timer(self.after_s, self._strike, (self.cluster, self.rank))
            self._timer.daemon = True
            self._timer.start()

    def settled(self, events: list) -> bool:
        """False until the node is removed and the job has dealt with it (a takeover, or a shrink and, with
        `--add-node-after`, the growth back): a solved run keeps training until that is shown."""
        if self._timer is None:
            return True
        if self.at is None:
            return False
        kinds = {e.kind for e in events if e.node_rank == self.rank and e.at >= self.at}
        if EventKind.SHRUNK in kinds and self.add_after_s is not None:
            return EventKind.GROWN in kinds
        return bool(kinds & {EventKind.SPARE, EventKind.REPLACEMENT, EventKind.FAILED, EventKind.SHRUNK})

    def _strike(self, cluster: FaultyCluster, rank: int) -> None:
        self.done = self._finished
        self.at = cluster.lose_node(rank)

    def describe(self, events: list) -> str:
        if self.at is None:
            return f"node {self.rank} was not removed: training ended within --kill-after {self.after_s:g} s"
        said = f"node {self.rank} removed abruptly {self.after_s:g} s into training, during iteration {self.done + 1}"
        lost = next(
            (e for e in events if e.kind == EventKind.LOST and e.node_rank == self.rank and e.at >= self.at), None
        )
        if lost is not None:
            said += f"; the job declared it lost {lost.at - self.at:.1f} s later"
        if self.added_at is not None:
            said += f"; started again {self.added_at - self.at:.1f} s after it went"
        return said

    def __enter__(self) -> NodeKiller:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()


#: The events that say a drained node's workers were dealt with: moved, or their components shrank.
_DONE = (EventKind.SPARE, EventKind.REPLACEMENT, EventKind.SHRUNK)


class NodeDrainer(NodeKiller):
    """`--drain-node RANK --drain-after S --deadline D`: a preemption notice S seconds into training (Ray drains node
    RANK with a deadline D seconds later, as a cloud's notice would), and the node removed at the deadline unless it
    left already (Ray lets a drained node go as soon as nothing runs there). Training goes on; the report says how
    long before the deadline the job had moved the workers."""

    def __init__(self, cluster: FaultyCluster | None, rank: int | None, after_s: float, deadline_s: float):
        super().__init__(cluster, rank, after_s)
        self.deadline_s = deadline_s
        self._removal: threading.Timer | None = None

    def _strike(self, cluster: FaultyCluster, rank: int) -> None:
        self.done = self._finished
        self.at = cluster.drain_node(rank, self.deadline_s)
        self._removal = threading.Timer(self.deadline_s, self._remove, (cluster, rank))
        self._removal.daemon = True
        self._removal.start()

    def _remove(self, cluster: FaultyCluster, rank: int) -> None:
        if rank in cluster.nodes:
            cluster.lose_node(rank)

    def describe(self, events: list) -> str:
        if self.at is None:
            return f"node {self.rank} was not drained: training ended within --drain-after {self.after_s:g} s"
        said = (
            f"node {self.rank} drained {self.after_s:g} s into training, during iteration {self.done + 1}, with a "
            f"{self.deadline_s:g} s deadline"
        )
        moved = next((e for e in events if e.kind in _DONE and e.node_rank == self.rank), None)
        if moved is not None and moved.at >= self.at:
            said += f"; the job was done {moved.at - self.at:.1f} s after the notice ({moved.kind}), "
            said += f"{self.at + self.deadline_s - moved.at:.1f} s before the deadline"
        return said

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self._removal is not None:
            self._removal.cancel()
