"""Near misses of component names: `rolout: 4-7` beside a `rollout:` section, `actr,rollout: 0-7`.

RLinf takes any key of `component_placement` as a component, so a misspelled one runs as a component of its
own while the component meant is never placed; rlplace plans it the same way, and warns. A placed name is a
near miss when it is neither a component RLinf's runners know nor a section of the config, and is spelled
almost like one of those (the same near-miss rule as for keys). The warning says what the
name as written changes: the GPUs it takes, and the share of each process it sits beside.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from rlplace.config.problems import Path, Reporter, near_miss
from rlplace.config.ranges import format_ranks
from rlplace.model import ComponentSpec, JobSpec

#: The components RLinf's runners and placement classes place (rlinf/utils/placement.py, rlinf/runners/).
RLINF_COMPONENTS = (
    "actor",
    "rollout",
    "env",
    "reward",
    "inference",
    "critic",
    "agent",
    "actor_inference",
    "critic_inference",
    "rollout_judge",
    "reward_server",
)
_NOT_COMPONENTS = ("cluster", "defaults", "hydra", "runner", "algorithm", "data")


def warn_near_misses(spec: JobSpec, top: object, base: Path, rep: Reporter) -> None:
    """A warning for each placed component whose name is a near miss of an unplaced known one."""
    placed = {c.name for c in spec.components}
    sections = [k for k in top if isinstance(k, str)] if isinstance(top, Mapping) and base else []
    known = {*RLINF_COMPONENTS, *(k for k in sections if k not in _NOT_COMPONENTS)}
    for c in spec.components:
        if c.name in known:
            continue
        meant = near_miss(c.name, sorted(known))
        if meant is None:
            continue
        where = "a section of this config" if meant in sections else "a component RLinf knows"
        also = f"'{meant}' is placed too" if meant in placed else f"nothing places '{meant}'"
        rep.warn(
            _key_path(c, base, top),
            f"component '{c.name}' is placed and {also} ({where}); did you mean '{meant}'? As written, "
            f"'{c.name}' is a component of its own{_effect(c, spec)}",
            c.name,
        )


def _effect(c: ComponentSpec, spec: JobSpec) -> str:
    """What the misspelled component takes: its ranks, and the share it cuts for a process beside it."""
    mine = _per_rank(c)
    if mine is None or c.placement is None:
        return ""
    groups = c.placement.groups
    shown = f" on {'+'.join(groups)} ranks {format_ranks(sorted(mine))}"
    beside = [(o, _per_rank(o)) for o in spec.components if o.placement is not None and o.placement.groups == groups]
    for other, theirs in beside:
        common = sorted(set(mine) & set(theirs or ())) if other is not c else []
        if not common:
            continue
        r = common[0]
        total = sum((p or {}).get(r, 0) for _, p in beside)
        before, after = Fraction(1, total - mine[r]), Fraction(1, total)
        return f"{shown}, where it cuts the share of each {other.name} process from {before} to {after} of a GPU"
    return f"{shown}, beside no other component"


def _per_rank(c: ComponentSpec) -> dict[int, int] | None:
    """Processes of `c` on each resource rank, or None when a segment is `all` (its size needs an inventory)."""
    if c.placement is None or c.process_shape is not None:
        return None
    out: dict[int, int] = {}
    for seg in c.placement.segments:
        if seg.resources is None:
            return None
        n, m = len(seg.processes or seg.resources), len(seg.resources)
        for r in seg.resources:
            out[r] = out.get(r, 0) + max(n // m, 1)
    return out


def _key_path(c: ComponentSpec, base: Path, top: object) -> Path:
    cluster = top.get("cluster") if isinstance(top, Mapping) and base else top
    placements = cluster.get("component_placement") if isinstance(cluster, Mapping) else None
    for key in placements or ():
        if c.name in (n.strip() for n in str(key).split(",")):
            return (*base, "component_placement", str(key))
    return (*base, "component_placement")
