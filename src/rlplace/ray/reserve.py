"""Reserve a plan's bundles with placement groups, one per node, and never wait forever for them.

One group per node (not one for the whole plan) so that a failure names its node, and so that each
node's bundles can be reserved in ascending GPU order: Ray hands a new bundle the lowest free GPU of
its node, so on a clean node bundle order decides which physical GPU each bundle gets. When the plan
leaves holes (GPU 3 used, GPUs 0-2 not), short-lived "filler" groups hold the holes while the real
group is placed, then are removed, so the plan's GPU indices come true. Workers verify what they got
(`rlplace.ray.worker`), since another job holding GPUs can still shift them.

Waiting polls `placement_group_table` (no `pg.ready()` task, no dashboard) until a deadline: a group Ray
marks INFEASIBLE fails at once, one still waiting for busy resources fails at the deadline, each with
an explanation from `rlplace.ray.diagnose`.

Ray cannot grow or shrink a placement group, so an elastic component's growth reserves its new bundles as one
new group per node and resize step (`Bundle.reservation`: 0 for the plan's own groups, k for the k-th step), and
a shrink removes a group once none of its bundles holds a worker (`reserve_step`, `release_bundles`). A node's
groups are its units: a spare taking the node's rank over reserves every unit of it there.

Every bundle selects its node by rank (or id) and by the node's topology labels (rack, NVLink domain, zone:
`rlplace.ray.topology`), which connect checked against the plan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlplace.errors import PlacementError
from rlplace.inventory import Node
from rlplace.lifecycle import GroupState
from rlplace.plan import Bundle, Worker
from rlplace.planner import capacity
from rlplace.planner.capacity import bundle_resources
from rlplace.ray import diagnose
from rlplace.ray.labels import NODE_RANK_LABEL, RAY_NODE_ID_LABEL
from rlplace.ray.nodes import inventory_from_nodes
from rlplace.ray.port import Cluster
from rlplace.ray.state import Change, JobState
from rlplace.ray.topology import selector_labels

log = logging.getLogger(__name__)

_FILLER_WAIT_S = 2.0
_POLL_MIN_S, _POLL_MAX_S = 0.005, 0.1


@dataclass
class _NodeReservation:
    """One placement group: the bundles of one node and one reservation step."""

    node: Node  # the live node
    bundles: list[Bundle]  # plan bundles in placement-group bundle order
    step: int = 0  # Bundle.reservation of its bundles
    held: frozenset[int] = frozenset()  # GPUs of the node that the job's other groups there hold
    pg: Any = None  # the cluster's placement group
    filler: Any = None

    def resources(self, bundle: Bundle) -> dict[str, float]:
        """What Ray reserves for `bundle` here: hardware the node does not advertise is left out."""
        return capacity.reserved(bundle, self.node)

    @property
    def unadvertised(self) -> list[str]:
        """Hardware resources the plan wants on this node that the node was not started with."""
        return capacity.unadvertised(self.bundles, self.node)

    @property
    def demand(self) -> dict[str, float]:
        return capacity.demand(self.bundles, self.node)


class Reservation:
    """The placement groups of one job: created by `reserve()` (and `reserve_step()` for a resize), always released
    by `remove()`. Reads the plan, the rank -> node map, the timeout and the name from the job's state; its warnings
    go there too."""

    def __init__(self, cluster: Cluster, state: JobState):
        self._cluster = cluster
        self._state = state
        self.timeout_s = state.timeout_s
        self.name = state.name
        self._units: dict[tuple[int, int], _NodeReservation] = {}  # (node rank, reservation step) -> its group
        self._slot: dict[int, tuple[Any, int]] = {}  # plan bundle -> (group, index in it)
        self._created: list[Any] = []
        self._by_label = all(NODE_RANK_LABEL in n.labels for n in state.live.nodes)

    def _warn(self, message: str) -> None:
        self._state.apply(Change(warnings=(message,)))

    @property
    def placement_groups(self) -> list[Any]:
        return list(self._created)

    def reserve(self) -> None:
        """Create and wait for every group; raise PlacementError (the caller removes what exists)."""
        units = self._group_by_node(self._state.plan.bundles)
        self._check_feasible(units)
        self._units.update({(r.node.rank, r.step): r for r in units})
        self._reserve_nodes(units, self._cluster.now() + self.timeout_s)

    def reserve_step(self, bundles: Sequence[Bundle], deadline: float) -> None:
        """Reserve a resize step's new bundles (one `reservation` id) as one new group per node, by `deadline`
        (monotonic). Raises PlacementError naming what is missing on which node, with nothing of them left."""
        units = self._group_by_node(bundles)
        for r in units:
            r.held = frozenset(g for u in self._of(r.node.rank) for b in u.bundles for g in b.gpus)
        self._units.update({(r.node.rank, r.step): r for r in units})
        try:
            self._reserve_nodes(units, deadline)
        except BaseException:
            self.release_bundles(bundles)
            raise

    def release_bundles(self, bundles: Sequence[Bundle]) -> None:
        """Remove the groups holding `bundles` (whole groups: a resize step releases them only so)."""
        for key in sorted({(b.node_rank, b.reservation) for b in bundles}):
            r = self._units.pop(key, None)
            if r is not None:
                self._remove(r.pg)
                self._remove(r.filler)
                for b in r.bundles:
                    self._slot.pop(b.index, None)

    def _reserve_nodes(self, nodes: list[_NodeReservation], deadline: float) -> None:
        holed = self._fillable([r for r in nodes if self._holes(r)])
        for r in holed:
            r.filler = self._create([{r.node.accelerator_resource: 1.0}] * len(self._holes(r)), r.node, "filler")
        self._wait_fillers(holed, min(deadline, self._cluster.now() + _FILLER_WAIT_S))
        for r in nodes:
            r.pg = self._create([r.resources(b) for b in r.bundles], r.node, "node", r.step)
            for index, b in enumerate(r.bundles):
                self._slot[b.index] = (r.pg, index)
        self._wait({r.pg: (r, r.demand) for r in nodes if r.pg is not None}, deadline)
        for r in holed:
            self._remove(r.filler)
            r.filler = None

    # -- node loss (rlplace.ray.failover.watcher): a rank's bundles released, then reserved on another node ---

    def _of(self, rank: int) -> list[_NodeReservation]:
        return [r for (n, _), r in sorted(self._units.items()) if n == rank]

    def demand(self, rank: int) -> dict[str, float]:
        """Everything reserved on node `rank` (hardware included, also where the node does not advertise it)."""
        total: dict[str, float] = {}
        for r in self._of(rank):
            for b in r.bundles:
                diagnose.add(total, bundle_resources(b))
        return total

    def release(self, rank: int) -> None:
        """Remove the groups holding node `rank`'s bundles (the node is lost; its actors die with the groups)."""
        for r in self._of(rank):
            self._remove(r.pg)
            self._remove(r.filler)
            r.pg = r.filler = None

    def reserve_on(self, rank: int, node: Node) -> None:
        """Reserve node `rank`'s bundles (every group of the rank: the plan's and those resize steps added) on
        `node` (a spare or a replacement), pinned by its Ray node id, within `timeout_s`; workers launched
        afterwards land there. Raises PlacementError (nothing left reserved)."""
        moved = [_NodeReservation(node, r.bundles, r.step) for r in self._of(rank)]
        rank_gpus = {g for r in moved for b in r.bundles for g in b.gpus}
        for r in moved:  # a unit's holes are the rank's, never GPUs another of its units takes (found by the explorer)
            r.held = frozenset(rank_gpus - {g for b in r.bundles for g in b.gpus})
        # Lowest GPUs first: Ray hands a new bundle the lowest free GPU, so each group gets the GPUs the plan says.
        moved.sort(key=lambda r: (min((g for b in r.bundles for g in b.gpus), default=-1), r.step))
        self._units.update({(rank, r.step): r for r in moved})
        try:
            self._reserve_nodes(moved, self._cluster.now() + self.timeout_s)
        except BaseException:
            self.release(rank)
            raise

    def scheduling_strategy(self, worker: Worker) -> Any:
        """Where the cluster must start `worker`: its bundle, its node (pinned without a group), or anywhere."""
        if worker.bundle is not None:
            pg, index = self._slot[worker.bundle]
            return self._cluster.in_group(pg, index)
        if worker.node_rank is not None:
            return self._cluster.on_node(str(self._live_node(worker.node_rank).node_id))
        return None

    def remove(self) -> None:
        """Remove every group this reservation created (their actors die with them). Idempotent."""
        while self._created:
            self._remove(self._created[-1])

    # -- building ----------------------------------------------------------------------------------

    def _group_by_node(self, bundles: Sequence[Bundle]) -> list[_NodeReservation]:
        """One group per (node, reservation step), its bundles in GPU order."""
        by_unit: dict[tuple[int, int], list[Bundle]] = {}
        for b in bundles:
            by_unit.setdefault((b.node_rank, b.reservation), []).append(b)
        units = []
        for (rank, step), members in sorted(by_unit.items()):
            members.sort(key=lambda b: (not b.gpus, b.gpus, b.index))
            units.append(_NodeReservation(self._live_node(rank), members, step))
        return units

    def _live_node(self, rank: int) -> Node:
        live = self._state.live
        if not 0 <= rank < len(live):
            raise PlacementError(
                f"the plan puts workers on node {rank}, but the Ray cluster has {len(live)} nodes "
                f"(ranks 0-{len(live) - 1}); was the plan made for another inventory?"
            )
        return live.node(rank)

    def _check_feasible(self, units: list[_NodeReservation]) -> None:
        problems = []
        for r in units:
            if r.unadvertised:
                self._warn(capacity.unadvertised_warning(r.node, r.unadvertised))
            reason = capacity.node_problem(r.node, r.bundles)
            if reason:
                problems.append(reason)
        if problems:
            raise PlacementError(capacity.refusal(problems))

    def _fillable(self, holed: list[_NodeReservation]) -> list[_NodeReservation]:
        """Nodes whose holes can be held aside. A filler on a node with too few free GPUs would take the
        GPUs the plan needs (Ray says how many GPUs are free, not which), so such nodes get none. GPUs
        just released (a previous run's groups) take about a second to show as free: wait that long."""
        deadline = self._cluster.now() + _FILLER_WAIT_S
        short: dict[int, float] = {}
        while holed:
            available = self._cluster.free_resources()
            short = {}
            for r in holed:
                acc = r.node.accelerator_resource
                free = available.get(str(r.node.node_id), {}).get(acc, 0.0)
                if free < len(self._holes(r)) + r.demand.get(acc, 0.0):
                    short[r.node.rank] = free
            if not short or self._cluster.now() >= deadline:
                break
            self._cluster.sleep(_POLL_MAX_S)
        for r in holed:
            if r.node.rank in short:
                self._warn(
                    f"node {r.node.rank}: only {short[r.node.rank]:g} GPUs are free, too few to keep the plan's idle "
                    f"GPUs {self._holes(r)} aside, so the plan's GPU indices on this node may not come true "
                    "(workers report what they got; Job.verify() checks)"
                )
        return [r for r in holed if r.node.rank not in short]

    @staticmethod
    def _holes(r: _NodeReservation) -> list[int]:
        """GPUs below the group's highest that neither it nor the job's other groups on the node hold."""
        used = {g for b in r.bundles for g in b.gpus}
        return [g for g in range(max(used, default=-1) + 1) if g not in used and g not in r.held]

    def _selector(self, node: Node) -> dict[str, str]:
        """The node's rank (or id) and its topology labels: connect checked them against the plan
        (`rlplace.ray.topology`), so a node that joins meanwhile under the rank in another rack is not taken."""
        if self._by_label and NODE_RANK_LABEL in node.labels:
            pin = {NODE_RANK_LABEL: str(node.rank)}
        else:
            pin = {RAY_NODE_ID_LABEL: str(node.node_id)}  # unranked clusters, and spares that took over a rank
        return {**pin, **selector_labels(self._state.levels, node)}

    def _create(self, bundles: list[dict[str, float]], node: Node, kind: str, step: int = 0) -> Any:
        try:
            pg = self._cluster.create_group(
                bundles,
                f"rlplace:{self.name}:{kind}{node.rank}" + (f".{step}" if step else ""),
                [self._selector(node)] * len(bundles),
            )
        except Exception as e:  # Ray rejects malformed bundles with ValueError and others
            raise PlacementError(f"Ray refused the placement group for node {node.rank}: {e}") from e
        self._created.append(pg)
        return pg

    def _remove(self, pg: Any) -> None:
        if pg is None or pg not in self._created:
            return
        self._created.remove(pg)
        try:
            self._cluster.remove_group(pg)
        except Exception as e:  # already gone (cluster shut down): nothing left to release
            log.debug("placement group %s already gone: %s", self._cluster.group_id(pg), e)

    # -- waiting -----------------------------------------------------------------------------------

    def _wait_fillers(self, holed: list[_NodeReservation], deadline: float) -> None:
        try:
            fillers = {
                r.filler: (r, {r.node.accelerator_resource: float(len(self._holes(r)))})
                for r in holed
                if r.filler is not None
            }
            self._wait(fillers, deadline)
        except PlacementError:
            for r in holed:
                if r.filler is not None and self._cluster.group_state(r.filler)[0] != GroupState.CREATED:
                    self._warn(
                        f"node {r.node.rank}: GPUs {self._holes(r)} are held by others, so the plan's GPU "
                        "indices on this node may not come true (workers report what they got)"
                    )
                    self._remove(r.filler)
                    r.filler = None

    def _wait(self, pending: dict[Any, tuple[_NodeReservation, dict[str, float]]], deadline: float) -> None:
        """Poll until every group is placed; `pending` maps each group to its node and what it asks for."""
        started, delay = self._cluster.now(), _POLL_MIN_S
        while pending:
            for pg, (r, _) in list(pending.items()):
                state, scheduling = self._cluster.group_state(pg)
                if state == GroupState.CREATED:
                    del pending[pg]
                elif state == GroupState.REMOVED:  # the job was shut down meanwhile (or a node loss released it)
                    raise PlacementError(f"the placement group for node {r.node.rank} was removed while waiting")
                elif scheduling == GroupState.INFEASIBLE:
                    raise PlacementError(self._infeasible(r))
            if pending and self._cluster.now() >= deadline:
                raise PlacementError(self._starved(list(pending.values()), self._cluster.now() - started))
            if pending:
                self._cluster.sleep(delay)
                delay = min(delay * 2, _POLL_MAX_S)

    def _infeasible(self, r: _NodeReservation) -> str:
        """Explain with the node as Ray sees it now (the inventory the plan was checked against may be stale)."""
        fresh = inventory_from_nodes(self._cluster.nodes())
        node = fresh.node(r.node.rank) if r.node.rank < len(fresh) else r.node
        why = diagnose.infeasible(node, r.demand)
        return why or (
            f"Ray finds no node for the bundles of {diagnose.describe_node(r.node)} ({diagnose.fmt(r.demand)}) "
            f"selected by {self._selector(r.node)}; is the node still alive and labelled as when it joined?"
        )

    def _starved(self, pending: list[tuple[_NodeReservation, dict[str, float]]], waited_s: float) -> str:
        available = self._cluster.free_resources()
        table = self._cluster.group_table()
        ours = {self._cluster.group_id(pg) for pg in self._created}
        try:
            actors = list(self._cluster.actor_table().values())
        except Exception:  # the actor table is a debugging API: explain without it if it fails
            actors = []
        lines = []
        for r, demand in pending:
            held = diagnose.holders(str(r.node.node_id), table, actors, exclude=ours)
            lines.append(diagnose.starved(r.node, demand, available.get(str(r.node.node_id), {}), held, waited_s))
        return "placement groups still waiting when timeout_s ran out, resources busy:\n  " + "\n  ".join(lines)
