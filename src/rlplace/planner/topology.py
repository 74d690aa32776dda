"""The cluster's topology as the planner reads it: each node's unit at each level, and how near two nodes are.

A node's place is its labels (docs/decisions.md, "Topology, the planner part"), innermost level first;
`cluster.topology` names the levels and their label keys (`JobSpec.topology`). A level no node carries is left out (the
plan is topology-blind there; a warning says so when the config named it). A node carrying none of a level's keys is a
unit of its own: a node without an NVLink-domain label is its own domain, and a node without a rack label shares no rack
with anyone (the estimate then counts its traffic as crossing racks, never as staying inside one).

Pure and linear in the nodes: read once per plan (a few milliseconds for 4,096 nodes), then every rule asks by
node rank. The rules that use it: the placement of model-parallel groups (`planner.parallel`), the rack-by-rack
split of disaggregated pools (`planner.auto`), the order in which growth and failover try nodes (`nearest`,
`spare_order`), and the estimate's bytes per level (`planner.estimate`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from rlplace.errors import PlanError
from rlplace.inventory import Inventory, Node
from rlplace.model import DEFAULT_TOPOLOGY, NVLINK_DOMAIN, TopologyLevel
from rlplace.plan import PlanTopology
from rlplace.planner.ranges import format_ranks


def read_topology(
    levels: Sequence[TopologyLevel], inventory: Inventory | Sequence[Node], warnings: list[str] | None = None
) -> PlanTopology:
    """Each node's unit at every level some node carries; what is worth knowing goes to `warnings` (a level the
    config names that no node carries, nodes without a level's label, one domain of several GPU models).
    PlanError for a label value that is not text (only a Python caller can make one: files and Ray give text)."""
    nodes = inventory.nodes if isinstance(inventory, Inventory) else tuple(inventory)
    out = [] if warnings is None else warnings
    labels: dict[str, tuple[str, ...]] = {}
    units: dict[str, tuple[str | None, ...]] = {}
    for level in levels:
        values = _values(level, nodes)
        missing = values.count(None)
        if missing == len(values):
            if level.written:
                at = f" ({level.path} at {level.file}:{level.line})" if level.line is not None else ""
                out.append(
                    f"topology: no node carries the label {' or '.join(level.labels)} of level {level.name}{at}, so "
                    f'the plan is topology-blind at that level; label the nodes (docs/guide.md, "Topology")'
                )
            continue
        if not set(map(type, values)) <= {str, type(None)}:
            node, bad = next((n, v) for n, v in zip(nodes, values, strict=True) if not isinstance(v, str | None))
            raise PlanError(
                f"node {node.rank}: the label {level.labels[0]}={bad!r} is not text; node labels are strings "
                f'(write "{bad}")'
            )
        labels[level.name], units[level.name] = level.labels, tuple(values)
        if missing and level.name != NVLINK_DOMAIN:
            unlabelled = [i for i, v in enumerate(values) if v is None]
            out.append(
                f"topology: {_nodes_text(unlabelled)} carry no {level.name} label ({' or '.join(level.labels)}): "
                f"each is taken as a {level.name} of its own, so its traffic counts as crossing {level.name}s"
            )
    topology = PlanTopology(labels, units)
    if NVLINK_DOMAIN in units:
        out.extend(_mixed_models(topology, nodes))
    return topology


def _values(level: TopologyLevel, nodes: Sequence[Node]) -> list:
    """Each node's value of the level's first label key it carries (None: none), one C-speed column per key."""
    out: list = []
    for key in level.labels:
        column = [n.labels.get(key) for n in nodes]
        if not out:
            out = column
        elif column.count(None) < len(column):  # a second key some node carries: fills the first's gaps
            out = [a if a is not None else b for a, b in zip(out, column, strict=True)]
    return out


def _mixed_models(topology: PlanTopology, nodes: Sequence[Node]) -> list[str]:
    pairs = set(zip(topology.units[NVLINK_DOMAIN], (n.gpu_model if n.num_gpus else None for n in nodes), strict=True))
    models: dict[str, set[str]] = {}
    for domain, model in pairs:  # one pair per domain and model: a few, whatever the cluster's size
        if domain is not None and model is not None:
            models.setdefault(domain, set()).add(model)
    return [
        f"topology: NVLink domain {domain} holds nodes of different GPU models ({', '.join(sorted(m))}); one NVLink "
        "domain is one kind of GPU: check the nodes' nvlink-domain labels"
        for domain, m in models.items()
        if len(m) > 1
    ]


def _nodes_text(ranks: list[int]) -> str:
    return f"node {ranks[0]}" if len(ranks) == 1 else f"nodes {format_ranks(ranks)}"


def domains(topology: PlanTopology, nodes: Iterable[int]) -> list[str | int]:
    """The NVLink domain of each node (its rank where it carries none: its own domain)."""
    values = topology.units.get(NVLINK_DOMAIN)
    if values is None:
        return list(nodes)
    return [r if (value := values[r]) is None else value for r in nodes]


def domain_name(unit: str | int) -> str:
    """How a message names a domain: its label value, or `node N` for a node that is its own."""
    return f"node {unit}" if isinstance(unit, int) else unit


class Nearness:
    """How near nodes are to a set of nodes (the workers a growth joins, a lost node): 0 one of them, then 1 + the
    innermost level at which a node shares a unit with one of them, `len(levels) + 1` for none."""

    def __init__(self, topology: PlanTopology, near: Iterable[int]) -> None:
        self.topology = topology
        self.near = set(near)
        self.levels = topology.levels
        self.units = [{topology.unit(level, n) for n in self.near} for level in self.levels]

    def __call__(self, node: int) -> int:
        if node in self.near:
            return 0
        for i, level in enumerate(self.levels):
            if self.topology.unit(level, node) in self.units[i]:
                return i + 1
        return len(self.levels) + 1


def nearest(topology: PlanTopology, near: Iterable[int], nodes: Iterable[int]) -> list[int]:
    """`nodes` in the order growth and failover try them: those in the same NVLink domain as one of `near`
    first, then the same rack, then the same zone, then the rest; in the given order within each."""
    distance = Nearness(topology, near)
    return sorted(nodes, key=distance)


def spare_order(lost: Node, spares: Sequence[Node], levels: Sequence[TopologyLevel] = DEFAULT_TOPOLOGY) -> list[Node]:
    """The hot spares in the order a lost node tries them: the same NVLink domain first, then rack, then zone, then
    the rest; among equally near ones those whose units hold more spares first, so that a rack's only spare stays
    for a loss in that rack (spares spread over failure domains); else in the given order (by IP).

    Pure, on the nodes' labels: the failover rules (`rlplace.ray.failover.rules`) call it with the lost node as the job
    knew it and the live spares."""
    topology = read_topology(levels, [lost, *spares])  # by position: 0 is the lost node, i the i-th spare
    units = {lv: [topology.unit(lv, i) for i in range(len(spares) + 1)] for lv in topology.levels}
    held = {lv: Counter(u[1:]) for lv, u in units.items()}

    def key(i: int) -> tuple:
        crowd = tuple(-held[lv][u[i]] for lv, u in units.items())
        depth = next((d for d, u in enumerate(units.values()) if u[i] == u[0]), len(units))
        return (depth, crowd, i)

    return [spares[i - 1] for i in sorted(range(1, len(spares) + 1), key=key)]
