"""Can every node hold what the plan reserves there? CPUs, accelerators and custom resources, per node.

Pure: a plan and an inventory in, messages out. `rlplace plan` asks before it prints a plan (against a live
cluster, or an inventory file that writes `cpus`), and `rlplace.ray.reserve` asks before it creates a single
placement group, so both refuse the same plans with the same words. A node whose CPUs the inventory does not
state (`--nodes`, an inventory entry without `cpus`) has its CPUs left unchecked; custom resources a node does
not advertise (a robot on a node not started with `--hardware`) are left out of what Ray reserves there, with
a warning, not a refusal (docs/ray.md).

It also says what a node still holds for a running job (`free_capacity`: the node minus every bundle of the
plan), where incremental planning (`planner.resize`) places new workers. Other jobs' use of a node is not known
here; the Ray layer's reservation reports it (a placement group that cannot be placed names its node).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from rlplace.errors import PlanError
from rlplace.inventory import Inventory, Node
from rlplace.plan import Bundle, Plan

Resources = Mapping[str, float]
EPS = 1e-9

#: Resource names Ray gives every node (with the node's accelerator name, GPU or NPU or ...).
_RAY_KINDS = ("GPU", "CPU")
#: How to need fewer CPUs: every worker reserves its component's CPUs (1 unless the config says otherwise).
CPU_HINT = (
    "Every worker reserves 1 CPU unless its component asks for less: `train_each_cpu_num: 0.5` (and the like "
    "for eval, env, buffer) in the pools dialect, `num_cpus: 0.5` in a component_placement entry in the "
    "node-groups dialect; or give the node more logical CPUs: `rlplace start ... -- --num-cpus N`"
)
REFUSAL = "the plan cannot be placed on this cluster:"


def bundle_resources(bundle: Bundle, accelerator: str | None = None) -> dict[str, float]:
    """The resource dict Ray reserves for one plan bundle; its devices under the accelerator resource name of
    the node (`accelerator`, the live node's; else the one the plan was made with: GPU, NPU, HPU, ...)."""
    resources: dict[str, float] = {}
    if bundle.gpus:
        resources[accelerator or bundle.accelerator] = float(len(bundle.gpus))
    if bundle.num_cpus > 0:
        resources["CPU"] = float(bundle.num_cpus)
    resources.update({k: float(v) for k, v in bundle.resources.items() if v > 0})
    return resources


def advertised(node: Node, resource: str) -> bool:
    """Does `node` have `resource` at all (Ray's own kinds always; custom ones when started with them)?"""
    return resource in _RAY_KINDS or resource == node.accelerator_resource or resource in node.resources


def reserved(bundle: Bundle, node: Node) -> dict[str, float]:
    """What Ray reserves for `bundle` on `node`: hardware the node does not advertise is left out."""
    return {k: v for k, v in bundle_resources(bundle, node.accelerator_resource).items() if advertised(node, k)}


def unadvertised(bundles: Iterable[Bundle], node: Node) -> list[str]:
    """Hardware resources the plan wants on `node` that the node was not started with."""
    wanted = {k for b in bundles for k in bundle_resources(b, node.accelerator_resource)}
    return sorted(k for k in wanted if not advertised(node, k))


def unadvertised_warning(node: Node, names: list[str]) -> str:
    return (
        f"node {node.rank} does not advertise {', '.join(names)}, so other jobs are not kept off that hardware; "
        "start the node with `rlplace start --hardware ...` (see docs/ray.md)"
    )


def demand(bundles: Iterable[Bundle], node: Node) -> dict[str, float]:
    """Everything the bundles reserve on `node`, summed per resource."""
    total: dict[str, float] = {}
    for b in bundles:
        add(total, reserved(b, node))
    return total


def add(total: dict[str, float], more: Resources) -> dict[str, float]:
    for key, value in more.items():
        total[key] = total.get(key, 0.0) + value
    return total


def shortfall(demand: Resources, have: Resources) -> dict[str, float]:
    """What `demand` asks for beyond `have` (resource -> amount missing); empty when it fits."""
    return {k: v - have.get(k, 0.0) for k, v in demand.items() if v - have.get(k, 0.0) > 1e-6}


def fmt(resources: Resources) -> str:
    """'2 GPU, 1.5 CPU, 1 rlplace/robot/franka/0' (GPU and CPU first)."""
    order = sorted(resources, key=lambda k: (k != "GPU", k != "CPU", k))
    return ", ".join(f"{resources[k]:g} {k}" for k in order) or "nothing"


def describe_node(node: Node) -> str:
    gpus = f"{node.num_gpus}x {node.gpu_model or 'GPU'}" if node.num_gpus else "no GPU"
    cpus = "CPUs not stated" if node.num_cpus is None else f"{node.num_cpus:g} CPU"
    return f"node {node.rank} ({gpus}, {cpus}, {node.address or '?'})"


def node_totals(node: Node) -> dict[str, float]:
    """What `node` has: its accelerators, its CPUs where known, its custom resources."""
    totals = {node.accelerator_resource: float(node.num_gpus), **node.resources}
    if node.num_cpus is not None:
        totals["CPU"] = float(node.num_cpus)
    return totals


def infeasible(node: Node, demand: Resources) -> str | None:
    """Why `demand` can never fit on `node`, or None when the node's totals would hold it (CPUs unchecked on a
    node whose CPUs are not stated)."""
    checked = {k: v for k, v in demand.items() if k != "CPU" or node.num_cpus is not None}
    missing = shortfall(checked, node_totals(node))
    if not missing:
        return None
    hints = [f"start the node with `--resources '{{\"{k}\": {v:g}}}'`" for k, v in missing.items() if "/" in k]
    hint = f" ({'; '.join(hints)})" if hints else ""
    if "CPU" in missing:
        hint += f". {CPU_HINT}"
    return (
        f"{describe_node(node)} can never hold what the plan reserves there ({fmt(demand)}): "
        f"missing {fmt(missing)}{hint}"
    )


def node_problem(node: Node, bundles: list[Bundle]) -> str | None:
    """Why `node` cannot hold the plan's `bundles` for it, or None."""
    reason = infeasible(node, demand(bundles, node))
    top = max((g for b in bundles for g in b.gpus), default=-1)
    if reason is None and top >= node.num_gpus:
        reason = f"{describe_node(node)} has no GPU {top} (the plan uses it)"
    return reason


def by_node(plan: Plan) -> dict[int, list[Bundle]]:
    """The plan's bundles per node rank, ranks ascending."""
    out: dict[int, list[Bundle]] = {}
    for b in plan.bundles:
        out.setdefault(b.node_rank, []).append(b)
    return dict(sorted(out.items()))


def problems(plan: Plan, inventory: Inventory) -> list[str]:
    """One message per node of `inventory` that cannot hold what `plan` reserves there (empty: it fits)."""
    return [
        reason
        for rank, bundles in by_node(plan).items()
        if rank < len(inventory) and (reason := node_problem(inventory.node(rank), bundles))
    ]


def warnings(plan: Plan, inventory: Inventory) -> list[str]:
    """One warning per live node that lacks hardware resources the plan reserves there (as `rlplace run` warns)."""
    out = []
    for rank, bundles in by_node(plan).items():
        node = inventory.node(rank) if rank < len(inventory) else None
        if node is not None and node.node_id is not None and (names := unadvertised(bundles, node)):
            out.append(unadvertised_warning(node, names))
    return out


def checked(plan: Plan, inventory: Inventory) -> Plan:
    """Refuse (PlanError) a plan some node of `inventory` cannot hold, with the words `rlplace.ray.reserve` would
    stop with; add the warnings it would give about unadvertised hardware (`rlplace plan` and `rlplace run`
    ask before anything starts)."""
    found = problems(plan, inventory)
    if found:
        raise PlanError(refusal(found))
    more = warnings(plan, inventory)
    return dataclasses.replace(plan, warnings=(*plan.warnings, *more)) if more else plan


def refusal(problems: list[str]) -> str:
    return f"{REFUSAL}\n  " + "\n  ".join(problems)


@dataclass(frozen=True)
class NodeFree:
    """One live node's capacity outside the plan: local GPU indices no bundle holds, CPUs and custom resources
    no bundle or pinned worker takes (negative when the plan already asks for more than the node has; infinite
    CPUs on a node whose CPUs the inventory does not state)."""

    rank: int
    gpus: tuple[int, ...]
    cpus: float
    resources: dict[str, float] = field(default_factory=dict, hash=False)
    num_gpus: int = 0  # the node's accelerators, reserved or not
    accelerator: str = "GPU"


def free_capacity(plan: Plan, live: Inventory, down: Collection[int] = ()) -> dict[int, NodeFree]:
    """Per live node rank (nodes in `down`, e.g. lost and not yet replaced, left out): what the plan leaves free.

    Reserved: every bundle of the plan (a bundle holds its GPUs and CPUs whether or not its seats are taken),
    and the CPUs of workers pinned to a node without a bundle (buffer shards under strategy default). Workers
    left to Ray's scheduler have no node and take nothing here.
    """
    used_gpus: dict[int, set[int]] = {}
    used_cpus: dict[int, float] = {}
    used_res: dict[int, dict[str, float]] = {}
    for b in plan.bundles:
        used_gpus.setdefault(b.node_rank, set()).update(b.gpus)
        used_cpus[b.node_rank] = used_cpus.get(b.node_rank, 0.0) + b.num_cpus
        add(used_res.setdefault(b.node_rank, {}), b.resources)
    for w in plan.workers:
        if w.bundle is None and w.node_rank is not None:
            used_cpus[w.node_rank] = used_cpus.get(w.node_rank, 0.0) + w.num_cpus
    out = {}
    for n in live.nodes:
        if n.rank in down:
            continue
        taken = used_gpus.get(n.rank, set())
        res = used_res.get(n.rank, {})
        out[n.rank] = NodeFree(
            rank=n.rank,
            gpus=tuple(g for g in range(n.num_gpus) if g not in taken),
            cpus=math.inf if n.num_cpus is None else n.num_cpus - used_cpus.get(n.rank, 0.0),
            resources={k: v - res.get(k, 0.0) for k, v in n.resources.items()},
            num_gpus=n.num_gpus,
            accelerator=n.accelerator_resource,
        )
    return out
