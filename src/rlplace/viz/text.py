"""The words every view of a plan uses: shares, settings, the estimate line.

The terminal table, the SVG picture and the HTML page print a plan's numbers through these functions only,
so a share, a byte count or a setting reads the same wherever it is shown. Pure text; no rich, no SVG.
"""

from __future__ import annotations

from rlplace.plan import Plan
from rlplace.planner.estimate import (
    ASSUMED,
    EXPERIENCE,
    INTERACTION,
    MODEL_BYTES_KEY,
    NODE,
    SAMPLING,
    WEIGHTS,
    Estimate,
    format_bytes,
)

#: What the estimate says when the plan leaves the workers' nodes to Ray, and when it lacks the roles.
UNKNOWN = "unknown (Ray schedules)"
ABSENT = "n/a"
FLOW_NAMES = {WEIGHTS: "weight sync", EXPERIENCE: "experience", INTERACTION: "interaction", SAMPLING: "sampling"}
#: How a line names the units of a topology level, plural.
LEVEL_NAMES = {NODE: "nodes", "nvlink_domain": "NVLink domains", "rack": "racks", "zone": "zones"}


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
    """The settings actually used, one `key value` part each (a view joins them, and wraps only between them), in
    the words of the config's dialect: a node-groups (RLinf) plan has no strategies and, unless it places a
    component named buffer, no buffer shards, so neither is shown."""
    s = plan.settings
    where = "placement groups" if plan.uses_placement_groups else "no placement groups"
    shared = [f"is_colocated {str(s.is_colocated).lower()}", f"enable_offload {str(s.enable_offload).lower()}"]
    if s.dialect == "node_groups":
        buffer = [f"buffer shards {s.buffer_worker_num}"] if s.buffer_worker_num else []
        return ["node groups (component_placement)", *shared, *buffer, where]
    return [
        f"mode {s.mode}",
        f"strategy {s.strategy}",
        f"env_strategy {s.env_strategy}",
        *shared,
        f"buffer shards {s.buffer_worker_num}",
        where,
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
    more = "".join(f", {_named(k, est, format_bytes(v))}" for k, v in _step_streams(est))
    return (
        f"estimate: {est.gpus_used} GPU(s) used, {idle} idle; per iteration across nodes: {weights} "
        f"({model_size(est)}), {experience} (batch {format_bytes(est.batch_bytes)}){more}"
        + "".join(f"; {part}" for part in crossing_parts(est))
    )


def _step_streams(est: Estimate) -> list[tuple[str, int]]:
    """The per-step streams besides experience that the plan has and that cross nodes."""
    return [(k, v) for k, v in ((INTERACTION, est.interaction_bytes), (SAMPLING, est.sampling_bytes)) if v]


def crossing_parts(est: Estimate) -> list[str]:
    """`across racks: weight sync 14 GB (lower bound 0 B), per step 26 MB`, one part per topology level."""
    out = []
    for level in est.levels[1:]:
        weights = "n/a"
        if est.crossing is not None and est.crossing_lower_bound is not None:
            weights = (
                f"{format_bytes(est.crossing[level])} (lower bound {format_bytes(est.crossing_lower_bound[level])})"
            )
        out.append(
            f"across {LEVEL_NAMES.get(level, level)}: weight sync {weights}, per step "
            f"{format_bytes(est.crossing_per_step[level])}"
        )
    return out


def model_size(est: Estimate) -> str:
    """`model 14 GB, assumed: ...` when nobody said it, else `model 2.2 MB from cluster.model_bytes`."""
    size = f"model {format_bytes(est.model_bytes)}"
    if est.model_source == ASSUMED:
        return f"{size}, assumed: write {MODEL_BYTES_KEY} or pass --model-bytes"
    return f"{size} from {est.model_source}"


def flow_label(kind: str, amount: int, est: Estimate | None) -> str:
    """An arrow's label: `weights 14 GB`, with `(assumed)` when the model's size is."""
    assumed = kind == WEIGHTS and est is not None and est.model_source == ASSUMED
    return f"{kind} {format_bytes(amount)}" + (" (assumed)" if assumed else "")


def _named(kind: str, est: Estimate, amount: str) -> str:
    return f"{flow_name(kind, est)} {amount}"
