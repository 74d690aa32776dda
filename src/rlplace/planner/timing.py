"""`predict(plan, workload, inventory)`: the seconds of one iteration of a plan, phase by phase.

Pure: no Ray, no clock. The same function scores `rlplace plan --time`, every candidate `rlplace tune` plans, and
(for a bench comparing predicted with measured time) any plan with a recorded profile. The model, its equations,
limits and published figures: docs/guide.md, "Choosing a placement". In short:

1. Each timed component's GPUs in the plan (RLinf's inference, when not placed, the actor's): n GPUs, the slowest
   GPU model among them; its compute seconds = curve(n) x reference speed / slowest speed (planner/scaling.py).
2. Memory: on each GPU, the components using it must fit the GPU model's memory together, or, with offload on,
   each alone; a component that shares its GPUs pays, with offload on, 2 x memory / host bandwidth (offload after
   its phase, reload before) on the slowest host link among its GPUs.
3. The order of phases (planner/phase_order.py): members of a block add, blocks side by side stream or add.
4. Transfers: the estimate's flows (weight sync and the per-step streams, planner/estimate.py) over per-level
   bandwidths: between nodes of one NVLink domain NVLink (per GPU x GPUs of the node), inside a zone InfiniBand
   (per NIC x NICs of the node), between zones the cross-zone figure; each node sends and receives its flows
   one after another, both directions at once, and the transfer takes as long as the busiest node.
5. The iteration = compute (3) + weight sync + per-step transfers.
A component whose time cannot be told (a GPU count its curve has no time for, memory that does not fit, a
model-parallel group split across NVLink domains, whose traffic the model does not count) makes the plan
infeasible: `Prediction.problems` says why and `seconds` is None.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rlplace.inventory import Inventory
from rlplace.plan import Plan, PlanTopology
from rlplace.planner.estimate import WEIGHTS, Estimate, Flow, estimate
from rlplace.planner.figures import GpuModel
from rlplace.planner.phase_order import Block, blocks_of, iteration_seconds, mode, shared
from rlplace.planner.workload import Workload

GB = 1e9


@dataclass(frozen=True)
class StageTime:
    """One component's part: its GPUs, its compute seconds, and what offload adds."""

    name: str
    gpus: int
    gpu_model: str
    compute: float
    swap: float = 0.0
    memory_gb: float | None = None

    @property
    def seconds(self) -> float:
        return self.compute + self.swap

    def to_dict(self) -> dict:
        return {
            "component": self.name,
            "gpus": self.gpus,
            "gpu_model": self.gpu_model,
            "compute_seconds": round(self.compute, 6),
            "offload_seconds": round(self.swap, 6),
            "memory_gb": self.memory_gb,
        }


@dataclass(frozen=True)
class Prediction:
    seconds: float | None  # None: infeasible (`problems` says why)
    mode: str = ""  # collocated | disaggregated | hybrid
    stages: tuple[StageTime, ...] = ()
    blocks: tuple[Block, ...] = ()
    compute: float = 0.0  # the blocks' time (phase_order)
    weight_sync: float = 0.0
    per_step: float = 0.0  # experience, interaction, sampling
    streamed: bool = True
    batches: int = 1
    problems: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    estimate: Estimate | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        return {
            "seconds": None if self.seconds is None else round(self.seconds, 6),
            "mode": self.mode,
            "disaggregated_stages": "streamed" if self.streamed else "sequential",
            "batches": self.batches,
            "phases": [s.to_dict() for s in self.stages],
            "blocks": [b.to_dict() for b in self.blocks],
            "compute_seconds": round(self.compute, 6),
            "weight_sync_seconds": round(self.weight_sync, 6),
            "per_step_transfer_seconds": round(self.per_step, 6),
            "problems": list(self.problems),
            "assumed": list(self.assumed),
        }


def predict(plan: Plan, workload: Workload, inventory: Inventory, est: Estimate | None = None) -> Prediction:
    """The predicted seconds of one iteration of `plan`, with its breakdown. `est`: the plan's estimate when the
    caller has it (else made here, with the workload's model size)."""
    sets = stage_gpus(plan, workload)
    problems = [
        f"{s.name} has no GPUs in the plan: its time cannot be predicted" for s in workload.stages if not sets[s.name]
    ]
    if problems:
        return Prediction(None, problems=tuple(problems), assumed=workload.assumed)
    roots = blocks_of(sets)
    offload = plan.settings.enable_offload
    swapping = shared(roots) if offload else set()
    stages = []
    for s in workload.stages:
        gpus = sets[s.name]
        models = [workload.gpu(inventory.node(node).gpu_model) for node, _ in gpus]
        slowest = min(models, key=lambda g: g.speed)
        t = s.curve.seconds(len(gpus))
        if t is None or len(gpus) % s.unit:
            counts = ", ".join(str(n) for n in s.curve.counts if n % s.unit == 0)
            problems.append(f"{s.name} on {len(gpus)} GPU(s): no time for that count ({s.origin}; counts: {counts})")
            continue
        swap = 0.0
        if s.name in swapping and s.memory_gb:
            swap = 2 * s.memory_gb / min(g.pcie_gb_s for g in models)
        stages.append(
            StageTime(s.name, len(gpus), slowest.name, t * workload.reference_speed / slowest.speed, swap, s.memory_gb)
        )
    problems.extend(memory_problems(sets, workload, inventory, offload))
    problems.extend(
        f"{g.component}'s {g.kind} group of ranks {g.ranks[0]}-{g.ranks[-1]} spans NVLink domains "
        f"{', '.join(g.domains)}: it talks every step, which the model does not count; keep each group in one domain"
        for g in plan.split_groups
        if workload.stage(g.component) is not None
    )
    if problems:
        return Prediction(None, mode(roots), tuple(stages), roots, problems=tuple(problems), assumed=workload.assumed)
    own = {s.name: s.seconds for s in stages}
    compute = iteration_seconds(roots, own, workload.batches, workload.streamed)
    if est is None:
        est = estimate(plan, workload.model_bytes, inventory=inventory)
    weights = [f for f in est.flows if f.kind == WEIGHTS]
    steps = [f for f in est.flows if f.kind != WEIGHTS]
    sync = transfer_seconds(weights, plan.topology, workload, inventory)
    per_step = transfer_seconds(steps, plan.topology, workload, inventory)
    return Prediction(
        compute + sync + per_step,
        mode(roots),
        tuple(stages),
        roots,
        compute,
        sync,
        per_step,
        workload.streamed,
        workload.batches,
        assumed=workload.assumed,
        estimate=est,
    )


def stage_gpus(plan: Plan, workload: Workload) -> dict[str, frozenset[tuple[int, int]]]:
    """Each stage's (node, GPU) pairs in the plan, in stage order; a stage the plan does not place gets its host's."""
    sets: dict[str, set[tuple[int, int]]] = {}
    for w in plan.workers:
        if w.node_rank is not None:
            sets.setdefault(w.component, set()).update((w.node_rank, g) for g in w.gpus)
    out = {}
    for s in workload.stages:
        mine = sets.get(s.name) or (sets.get(s.host) if s.host is not None else None) or set()
        out[s.name] = frozenset(mine)
    return out


def memory_problems(
    sets: dict[str, frozenset[tuple[int, int]]], workload: Workload, inventory: Inventory, offload: bool
) -> list[str]:
    """Each GPU model whose memory the components on one of its GPUs overflow (together, or one alone with offload)."""
    need = {s.name: s.memory_gb for s in workload.stages if s.memory_gb}
    if not need:
        return []
    on: dict[tuple[int, int], list[str]] = {}
    for name, gpus in sets.items():
        if name in need:
            for g in gpus:
                on.setdefault(g, []).append(name)
    out: dict[str, str] = {}
    for (node, _), names in on.items():
        model = workload.gpu(inventory.node(node).gpu_model)
        if not model.memory_gb:
            continue
        where = f"in {model.name}'s {model.memory_gb:g} GB (node {node})"
        if offload:  # each alone must fit
            for n in names:
                if need[n] > model.memory_gb:
                    out.setdefault(n, f"{n} {need[n]:g} GB does not fit {where}, even with offload")
        elif sum(need[n] for n in names) > model.memory_gb:
            parts = " + ".join(f"{n} {need[n]:g} GB" for n in names)
            verb = "does" if len(names) == 1 else "do"
            out.setdefault("+".join(names), f"{parts} {verb} not fit together {where} (offload off)")
    return list(out.values())


def transfer_seconds(flows: Iterable[Flow], topology: PlanTopology, workload: Workload, inventory: Inventory) -> float:
    """How long the busiest node takes to send, or to receive, its share of `flows` (each at the bandwidth of
    the outermost level it crosses)."""
    sent: dict[int, float] = {}
    received: dict[int, float] = {}
    for f in flows:
        for dst in f.dst:
            seconds = f.each / (GB * link_gb_s(f.src, dst, topology, workload, inventory))
            sent[f.src] = sent.get(f.src, 0.0) + seconds
            received[dst] = received.get(dst, 0.0) + seconds
    return max([*sent.values(), *received.values()], default=0.0)


def link_gb_s(src: int, dst: int, top: PlanTopology, workload: Workload, inventory: Inventory) -> float:
    """Bandwidth between two nodes: NVLink inside a shared NVLink domain, InfiniBand inside a zone, else the
    cross-zone figure; each end's, the slower."""
    levels = top.levels
    if "zone" in levels and top.unit("zone", src) != top.unit("zone", dst):
        return workload.links.cross_zone_gb_s
    if "nvlink_domain" in levels and top.unit("nvlink_domain", src) == top.unit("nvlink_domain", dst):
        return min(nvlink_gb_s(n, workload, inventory) for n in (src, dst))
    return min(nics(n, workload, inventory) for n in (src, dst)) * workload.links.infiniband_gb_s


def nvlink_gb_s(node: int, workload: Workload, inventory: Inventory) -> float:
    """A node's NVLink bandwidth to other nodes of its domain: per GPU x its GPUs."""
    n = inventory.node(node)
    model: GpuModel = workload.gpu(n.gpu_model)
    return model.nvlink_gb_s * max(n.num_gpus, 1)


def nics(node: int, workload: Workload, inventory: Inventory) -> int:
    """A node's NICs: the profile's `links.nics_per_node`, else one per GPU."""
    return workload.links.nics_per_node or max(inventory.node(node).num_gpus, 1)
