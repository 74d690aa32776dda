"""verl's resource pools on the inventory, as Ray places verl's placement groups, and its roles on them.

A verl pool of `nnodes` x `n_gpus_per_node` is `nnodes` STRICT_PACK placement groups of one-GPU bundles, each on
one node (`RayResourcePool.get_placement_groups`), created pool by pool in the order verl's trainer makes them
(`config/verl/layout.py`). Where each group lands is Ray's choice; rlplace makes it one rule, so that a plan means
the same nodes every time: each group of a pool goes to the first node, in rank order, that holds no group of the
same pool and has that many GPUs free, on its lowest free GPUs. So a pool of `nnodes` nodes takes `nnodes`
distinct nodes (what `trainer.nnodes` says), and small pools (a rollout replica of 2 GPUs) share nodes as Ray's
packing lets them. A role's process r sits on bundle r of its pools taken in order (verl's rank order: placement
group r // per-node, bundle r % per-node); the processes of several roles on one GPU share it (`1/k` each).

What verl leaves unchecked is checked here, naming verl's keys: a pool that no node has room for (nodes against
`trainer.nnodes`, GPUs per node against `trainer.n_gpus_per_node`), GPUs no pool uses, a pool over nodes of
different GPU models, and groups of consecutive ranks (rollout tensor-parallel engines, Megatron groups) that
span NVLink domains.
"""

from __future__ import annotations

from collections import Counter

from rlplace.errors import PlanError
from rlplace.inventory import Inventory
from rlplace.model import ComponentSpec, JobSpec, NodeGroupSpec
from rlplace.plan import GroupSummary
from rlplace.planner.builder import Block, PlanBuilder
from rlplace.planner.parallel import domain_gpus, spanning
from rlplace.planner.ranges import idle_by_node
from rlplace.planner.topology import domain_name, domains

_SHOWN = 3  # split groups a warning names before "and N more"


class Bound:
    """A pool on nodes: bundle i (pool-global) is local GPU `gpus[i]` of node `nodes[i]`."""

    def __init__(self, pool: NodeGroupSpec) -> None:
        self.pool = pool
        self.nodes: list[int] = []
        self.gpus: list[tuple[int]] = []
        self.node_ranks: list[int] = []  # one per placement group, in bundle order


def plan_verl(builder: PlanBuilder, spec: JobSpec, inventory: Inventory) -> bool:
    """Bind the pools the roles use, place every role; returns whether two roles share a GPU."""
    used = {label for c in spec.components if c.placement for label in c.placement.groups}
    taken: Counter[int] = Counter()  # node -> GPUs the pools bound so far take there (its lowest ones)
    bound = {g.label: _bind(g, inventory, taken, spec) for g in spec.node_groups if g.label in used}
    _idle(spec, inventory, taken, builder.warnings)
    shared = False
    seen: set[int] = set()
    ranks: dict[str, dict[str, list[int]]] = {label: {} for label in bound}  # pool -> role -> its ranks there
    for c in spec.components:
        assert c.placement is not None, c.name  # every verl role is placed on its pools (config/verl)
        labels = c.placement.groups
        nodes = [n for label in labels for n in bound[label].nodes]
        gpus = [g for label in labels for g in bound[label].gpus]
        pools = [label for label in labels for _ in bound[label].nodes]
        picks = range(len(nodes)) if c.placement.segments[0].resources is None else c.placement.segments[0].resources
        nodes, gpus, pools = [nodes[i] for i in picks], [gpus[i] for i in picks], [pools[i] for i in picks]
        slots = [builder.slot((n, g), n, g, p) for n, g, p in zip(nodes, gpus, pools, strict=True)]
        shared = shared or bool(seen & set(slots))
        seen |= set(slots)
        builder.add(Block(c.name, slots, c.cpus_per_worker, None, groups=pools))
        for rank, pool in enumerate(pools):
            ranks[pool].setdefault(c.name, []).append(rank)
        if c.model_parallel is not None:
            _check_domains(c, nodes, builder, inventory)
    builder.groups = [
        GroupSummary(label, tuple(b.node_ranks), tuple(b.pool.gpus_per_node or ()), _tuples(ranks[label]))
        for label, b in bound.items()
    ]
    _models(spec, bound, inventory, builder.warnings)
    return shared


def _bind(g: NodeGroupSpec, inventory: Inventory, taken: Counter[int], spec: JobSpec) -> Bound:
    out = Bound(g)
    for want in g.gpus_per_node or ():
        node = next(
            (
                n.rank
                for n in inventory.nodes
                if n.num_gpus > 0 and n.rank not in out.node_ranks and n.num_gpus - taken[n.rank] >= want
            ),
            None,
        )
        if node is None:
            raise PlanError(_no_room(g, want, len(out.node_ranks), inventory, taken, spec))
        first = taken[node]
        taken[node] += want
        out.node_ranks.append(node)
        out.nodes.extend([node] * want)
        out.gpus.extend((first + k,) for k in range(want))
    return out


def _no_room(g: NodeGroupSpec, want: int, placed: int, inventory: Inventory, taken: Counter[int], spec: JobSpec) -> str:
    """Why pool `g` does not fit, naming the keys that size it."""
    keys = g.path
    nnodes = len(g.gpus_per_node or ())
    sized = f"{keys}.nnodes: {nnodes} x {keys}.n_gpus_per_node: {want}{_at(spec, keys)}"
    gpu_nodes = [n for n in inventory.nodes if n.num_gpus > 0]
    big = [n.rank for n in gpu_nodes if n.num_gpus >= want]
    if len(big) < nnodes:
        have = ", ".join(sorted({f"{n.num_gpus}" for n in gpu_nodes})) or "no"
        fix = (
            f"plan on {nnodes} nodes of {want} GPUs (--nodes {nnodes}x{want})"
            if len(big) < nnodes and len(gpu_nodes) >= nnodes
            else f"plan on at least {nnodes} node(s) (--nodes {nnodes}x{want}) or lower {keys}.nnodes"
        )
        return (
            f"{g.label} ({sized}) needs {nnodes} node(s) with {want} GPUs each, as verl places one placement group "
            f"per node; the inventory has {len(big)} such node(s) (GPUs per node: {have}): {fix}"
        )
    free = ", ".join(f"node {n.rank}: {n.num_gpus - taken[n.rank]}" for n in gpu_nodes)
    return (
        f"{g.label} ({sized}) needs {nnodes} node(s) with {want} free GPUs each; after the pools verl makes before "
        f"it, {placed} node(s) have room (free GPUs: {free}): plan on more nodes or make the pools smaller"
    )


def _at(spec: JobSpec, keys: str) -> str:
    where = [spec.locations[k] for k in (f"{keys}.nnodes", f"{keys}.n_gpus_per_node") if k in spec.locations]
    return f", written at {' and '.join(dict.fromkeys(where))}" if where else ""


def _idle(spec: JobSpec, inventory: Inventory, taken: Counter[int], warnings: list[str]) -> None:
    """GPUs of the inventory that no verl pool takes: verl leaves them to whatever else runs there."""
    idle = [(n.rank, g) for n in inventory.nodes for g in range(taken[n.rank], n.num_gpus)]
    if not idle:
        return
    used = [g for g in spec.node_groups if any(c.placement and g.label in c.placement.groups for c in spec.components)]
    by_keys: dict[str, list[NodeGroupSpec]] = {}
    for g in used:
        by_keys.setdefault(g.path, []).append(g)
    sizes = "; ".join(_sizes(keys, pools) for keys, pools in by_keys.items())
    warnings.append(
        f"{len(idle)} GPU(s) of the inventory are in no verl pool and stay idle ({idle_by_node(idle)}): verl's "
        f"pools take {sizes}"
    )


def _sizes(keys: str, pools: list[NodeGroupSpec]) -> str:
    """`trainer_pool 1 x 4 GPUs (trainer.nnodes x trainer.n_gpus_per_node)`, or a run of replica pools."""
    shape = {(len(g.gpus_per_node or ()), (g.gpus_per_node or (0,))[0]) for g in pools}
    (n, k), *_ = shape
    each = f"{n} x {k} GPUs" if len(shape) == 1 else "several sizes"
    what = pools[0].label if len(pools) == 1 else f"{len(pools)} pools {pools[0].label}..{pools[-1].label}, {each} each"
    if len(pools) == 1:
        what += f" {each}"
    return f"{what} (from {keys}.nnodes x {keys}.n_gpus_per_node)"


def _models(spec: JobSpec, bound: dict[str, Bound], inventory: Inventory, warnings: list[str]) -> None:
    """A pool whose nodes have different GPU models: verl's ranks then run at the slowest model's pace."""
    for b in bound.values():
        models = {r: inventory.node(r).gpu_model for r in dict.fromkeys(b.node_ranks)}
        if len(set(models.values())) > 1:
            listed = ", ".join(f"node {r}: {m or 'unknown'}" for r, m in models.items())
            warnings.append(
                f"{b.pool.label} ({b.pool.path}.nnodes x {b.pool.path}.n_gpus_per_node) spans GPU models ({listed}): "
                "verl runs its ranks in lock-step, so every step waits for the slowest; plan it on nodes of one model"
            )


def _check_domains(c: ComponentSpec, nodes: list[int], builder: PlanBuilder, inventory: Inventory) -> None:
    """Warn for each group of consecutive ranks of `c` that spans more NVLink domains than it must (verl takes
    ranks in bundle order, so the layout is fixed by the pool sizes); record it for the pictures."""
    of_rank = domains(builder.topology, nodes)
    largest = max(domain_gpus(builder.topology, inventory).values(), default=0)
    for (kind, size, origin), _, bad in spanning(c, of_rank, largest, builder.split_groups):
        if bad:
            named = "; ".join(
                f"group {start // size} (ranks {start}-{start + size - 1}) spans "
                + " and ".join(domain_name(d) for d in spanned)
                for start, spanned in bad[:_SHOWN]
            )
            more = f"; and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
            builder.warnings.append(
                f"{c.name}: {len(bad)} of its {len(of_rank) // size} {kind} groups ({size} consecutive ranks each: "
                f"{origin}) span NVLink domains: {named}{more}. verl takes ranks in bundle order, node by node: "
                f"make the GPUs of each pool per NVLink domain a multiple of {size}, or the groups smaller"
            )


def _tuples(ranks: dict[str, list[int]]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(r) for name, r in ranks.items()}
