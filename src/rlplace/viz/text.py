"""The words every view of a plan uses: shares, settings, the estimate line, per-component facts.

The terminal table, the SVG picture and the HTML page print a plan's numbers through these functions only,
so a share, a byte count or a setting reads the same wherever it is shown. Pure text; no rich, no SVG.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlplace.plan import Plan, Worker
from rlplace.planner.estimate import EXPERIENCE, WEIGHTS, Estimate, format_bytes
from rlplace.planner.ranges import format_ranks

#: What the estimate says when the plan leaves the workers' nodes to Ray, and when it lacks the roles.
UNKNOWN = "unknown (Ray schedules)"
ABSENT = "n/a"
FLOW_NAMES = {WEIGHTS: "weight sync", EXPERIENCE: "experience"}


def fraction_label(fraction: float) -> str:
    """A GPU share as users think of it: `1/3` for one of three co-residents, `""` for a whole GPU, else `0.4`."""
    if fraction >= 1 - 1e-9:
        return ""
    k = round(1 / fraction) if fraction > 1e-9 else 0
    if k and abs(1 / k - fraction) < 1e-6:
        return f"1/{k}"
    return f"{fraction:g}"


def counted(n: int, noun: str) -> str:
    """`1 node`, `3 nodes`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cpus(n: float) -> str:
    return f"{n:g}"


def settings_parts(plan: Plan) -> list[str]:
    """The settings actually used, one `key value` part each (a view joins them, and wraps only between them)."""
    s = plan.settings
    return [
        f"mode {s.mode}",
        f"strategy {s.strategy}",
        f"env_strategy {s.env_strategy}",
        f"is_colocated {str(s.is_colocated).lower()}",
        f"enable_offload {str(s.enable_offload).lower()}",
        f"buffer shards {s.buffer_worker_num}",
        "placement groups" if plan.uses_placement_groups else "no placement groups",
    ]


def flow_name(kind: str, est: Estimate) -> str:
    """`weight sync (actor -> rollout)`: a stream named with the config's own components."""
    source, target = (est.roles or {}).get(kind, ("", ""))
    return f"{FLOW_NAMES[kind]} ({source} -> {target})" if source else FLOW_NAMES[kind]


def estimate_line(plan: Plan, est: Estimate) -> str:
    """The estimate in one line, as `rlplace plan` prints it under the table (and the picture and page show it)."""
    none = UNKNOWN if not plan.uses_placement_groups else ABSENT
    idle = "?" if est.gpus_idle is None else str(est.gpus_idle)
    weights = _named(WEIGHTS, est, format_bytes(est.weight_sync_bytes, none))
    experience = _named(EXPERIENCE, est, format_bytes(est.experience_bytes, none))
    return (
        f"estimate: {est.gpus_used} GPU(s) used, {idle} idle; per iteration across nodes: {weights} "
        f"(model {format_bytes(est.model_bytes)}), {experience} (batch {format_bytes(est.batch_bytes)})"
    )


def _named(kind: str, est: Estimate, amount: str) -> str:
    return f"{flow_name(kind, est)} {amount}"


@dataclass(frozen=True)
class ComponentFacts:
    """What every worker of one component gets, as the plan says it: one line of the table's component list and
    one entry of the JSON's `components` (the place for further per-component facts)."""

    name: str
    workers: int
    gpus: str  # "1 GPU each", "1/3 GPU each", "4 shared GPUs each, stride 2", "no GPU", ...
    cpus: str  # CPUs each worker reserves ("1", or "0.5-1" when they differ)
    where: str  # "pinned" | "left to Ray" | "in the driver" | "mixed"
    origin: str = ""  # where a process shape came from (RLinf's tensor-parallel sizes)

    def to_dict(self) -> dict:
        return {"workers": self.workers, "gpus": self.gpus, "cpus": self.cpus, "where": self.where}

    def line(self) -> str:
        origin = f" (from {self.origin})" if self.origin else ""
        where = "" if self.where == "pinned" else f", {self.where}"
        return f"{self.name}: {counted(self.workers, 'worker')}, {self.gpus}{origin}, {self.cpus} CPU each{where}"


def component_facts(plan: Plan) -> list[ComponentFacts]:
    """One entry per component, in plan order: count, GPUs and CPUs per worker, where it runs."""
    by: dict[str, list[Worker]] = {}
    for w in plan.workers:
        by.setdefault(w.component, []).append(w)
    out = []
    for name, ws in by.items():
        shape = plan.process_shapes.get(name)
        origin = shape.origin if shape is not None and shape.devices_per_process > 1 else ""
        out.append(
            ComponentFacts(name, len(ws), _gpus_each(ws, shape), _range({w.num_cpus for w in ws}), _where(ws), origin)
        )
    return out


def _gpus_each(ws: list[Worker], shape: object) -> str:
    kinds = {_gpu_kind(w) for w in ws}
    if len(kinds) > 1:
        return "GPUs mixed"
    (kind,) = kinds
    stride = getattr(shape, "stride", 1)
    if kind.endswith("GPUs each") and stride > 1:
        kind += f", stride {stride}"
    return kind


def _gpu_kind(w: Worker) -> str:
    if w.gpus and w.visible_gpus is not None:
        return f"{len(w.gpus)} shared GPUs each"
    if w.gpus:
        share = fraction_label(w.gpu_fraction)
        return f"{share} GPU each" if share else f"{counted(len(w.gpus), 'GPU')} each"
    if w.sees_node_gpus:
        return "no GPU (sees its node's GPUs)"
    if w.node_rank is None and not w.in_driver and w.gpu_fraction:
        return f"{w.gpu_fraction:g} GPU requested each"
    return "no GPU"


def _where(ws: list[Worker]) -> str:
    kinds = {"in the driver" if w.in_driver else "left to Ray" if w.node_rank is None else "pinned" for w in ws}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _range(values: set[float]) -> str:
    return cpus(min(values)) if len(values) == 1 else f"{cpus(min(values))}-{cpus(max(values))}"


def rank_text(ranks: list[int] | tuple[int, ...]) -> str:
    return format_ranks(ranks)
