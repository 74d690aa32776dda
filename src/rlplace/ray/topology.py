"""The plan's topology on the live cluster: what a bundle's label selector adds, and the check made at `connect`.

No Ray call in here (tested without a cluster). A plan is made against an inventory (the live cluster, a file, or
`--nodes`) whose labels put each node in an NVLink domain, a rack and a zone (`planner.topology`). The live nodes
must agree: `check_live` names every node whose live label contradicts the plan (a node that moved racks, or lost
its label) before anything is reserved, and `selector_labels` adds the node's topology labels to the selector that
pins each bundle to its node, so a bundle can land only on a node whose place is the one the job checked (a node
restarted meanwhile under the same rank in another rack leaves the group unplaced, and says so, instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlplace.errors import PlacementError
from rlplace.inventory import Inventory, Node
from rlplace.model import DEFAULT_TOPOLOGY, JobSpec, TopologyLevel
from rlplace.plan import Plan

#: What `rlplace start` sets per level, for the message's "label the node" advice (zone: Ray's own, from RAY_NODE_ZONE).
_START_FLAG = {"nvlink_domain": "--nvlink-domain", "rack": "--rack", "zone": "--zone"}


def job_levels(spec: JobSpec | None, plan: Plan) -> tuple[TopologyLevel, ...]:
    """The topology levels of a job: its config's (`cluster.topology`), else those the plan was made with, else
    the default ones (a Plan built by hand)."""
    if spec is not None:
        return spec.topology
    if plan.topology.labels:
        return tuple(TopologyLevel(name, keys) for name, keys in plan.topology.labels.items())
    return DEFAULT_TOPOLOGY


def selector_labels(levels: Sequence[TopologyLevel], node: Node) -> dict[str, str]:
    """The node's topology labels, one per level it carries (the first of the level's keys, as the planner reads
    it): what a bundle pinned to the node selects besides its rank or id."""
    out: dict[str, str] = {}
    for level in levels:
        key = _carried(level.labels, node)
        if key is not None:
            out[key] = node.labels[key]
    return out


@dataclass(frozen=True)
class Mismatch:
    """A node the plan puts in one unit of a level whose live label says another (or none)."""

    node: Node  # the live node
    level: str
    keys: tuple[str, ...]  # the level's label keys
    planned: str | None  # the unit the plan was made with (None: the node carried no label of the level)
    key: str | None  # the key the live node carries (None: none of them)
    actual: str | None

    def __str__(self) -> str:
        n = self.node
        wanted = f"no {self.level} label"
        if self.planned is not None:
            wanted = f"{self.level} {self.planned} (label {self.keys[0]}={self.planned})"
        now = f"no {self.level} label ({' or '.join(self.keys)})"
        if self.key is not None:
            now = f"{self.key}={self.actual}"
        where = f"node {n.rank} ({n.address or '?'}, id {str(n.node_id)[:8]})"
        return f"{where}: the plan has {wanted}, the live node carries {now}"


def mismatches(plan: Plan, live: Inventory) -> list[Mismatch]:
    """Each (node, level) where the live node's label differs from the unit the plan was made with, for the nodes
    the plan puts workers on (the other nodes' places change nothing of the job)."""
    topology = plan.topology
    used = {b.node_rank for b in plan.bundles} | {w.node_rank for w in plan.workers if w.node_rank is not None}
    out = []
    for rank in sorted(r for r in used if r < len(live)):  # a node the cluster lacks: the reservation names it
        node = live.node(rank)
        for level, keys in topology.labels.items():
            values = topology.units[level]
            planned = values[rank] if rank < len(values) else None
            key = _carried(keys, node)
            actual = None if key is None else node.labels[key]
            if actual != planned:
                out.append(Mismatch(node, level, keys, planned, key, actual))
    return out


def check_live(plan: Plan, live: Inventory) -> None:
    """Raise PlacementError naming every node whose live topology labels contradict the plan."""
    found = mismatches(plan, live)
    if not found:
        return
    flags = " ".join(dict.fromkeys(f"{_START_FLAG.get(m.level, '--labels')} ..." for m in found))
    raise PlacementError(
        "the live cluster's topology contradicts the plan (it was made for nodes labelled otherwise):\n  "
        + "\n  ".join(map(str, found))
        + "\nPlan again against the live cluster (connect without inventory=; `rlplace plan FILE` without --nodes), "
        f"or label the nodes as planned (`rlplace start ... {flags}`) and connect again"
    )


def unplanned(plan: Plan, live: Inventory, levels: Sequence[TopologyLevel]) -> list[str]:
    """Warnings for levels the plan was made blind to (no node of its inventory carried them) that the live nodes
    carry: nothing contradicts the plan, but it ignores the live cluster's racks or domains."""
    out = []
    for level in levels:
        if level.name in plan.topology.labels:
            continue
        carrying = [n.rank for n in live.nodes if _carried(level.labels, n) is not None]
        if carrying:
            out.append(
                f"topology: the plan was made without {level.name} labels ({' or '.join(level.labels)}), but "
                f"{len(carrying)} of the live cluster's {len(live)} nodes carry them; the plan ignores them: "
                "connect without inventory= to plan with the live cluster's topology"
            )
    return out


def _carried(keys: Sequence[str], node: Node) -> str | None:
    return next((k for k in keys if k in node.labels), None)
