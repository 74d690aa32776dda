"""How the views name a node's place in the topology: the unit the table and the picture group nodes by.

The views group nodes by the innermost level whose units hold several nodes (the NVLink domain of an NVL72 rack,
else the rack, else the zone), and name the outer levels beside it: `nvl-3 · rack-3`, `rack-0 · zone-0`. A run of
alike nodes repeated in alike units reads `9 in each of 57 NVLink domains (nvl-0 … nvl-56)`. Pure text.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlplace.plan import PlanTopology

#: Singular and plural of each level, as the views write them.
WORDS = {"nvlink_domain": ("NVLink domain", "NVLink domains"), "rack": ("rack", "racks"), "zone": ("zone", "zones")}
#: Label values that already say their level (`nvl-0`, `rack-3`, `zone-1`, as the compact --nodes form writes them).
_SAYS = {"nvlink_domain": ("nvl", "nvlink"), "rack": ("rack",), "zone": ("zone",)}


def group_level(topology: PlanTopology) -> str | None:
    """The level the views group nodes by: the innermost whose units hold several nodes; None for none."""
    for level in topology.levels:
        values = [v for v in topology.units[level] if v is not None]
        if len(set(values)) < len(values):
            return level
    return None


def unit_name(level: str, unit: str | int) -> str:
    """`rack-3`, `rack B7`, `NVLink domain nvl-2`, `node 5` (a node that carries no label of the level)."""
    if isinstance(unit, int):
        return f"node {unit}"
    says = unit.lower().startswith(_SAYS.get(level, (level,)))
    return unit if says else f"{WORDS.get(level, (level,))[0]} {unit}"


def where(topology: PlanTopology, level: str, nodes: Sequence[int], units: int = 1) -> str:
    """Where a run of `nodes` sits: its unit at `level` and the units of the outer levels (`nvl-3 · rack-3`);
    for a run repeated in `units` alike units, `9 in each of 57 racks (rack-0 … rack-56)`."""
    levels = topology.levels
    outer = levels[levels.index(level) + 1 :]
    parts = []
    for lv in (level, *outer):
        names = list(dict.fromkeys(unit_name(lv, topology.unit(lv, n)) for n in nodes))
        if lv == level and units > 1:
            plural = WORDS.get(lv, (lv, lv))[1]
            parts.append(f"{len(nodes) // units} in each of {units} {plural} ({_span(names)})")
        else:
            parts.append(_span(names))
    return " · ".join(parts)


def frame(topology: PlanTopology, level: str, units: Sequence[str | int], nodes: Sequence[int]) -> str:
    """The label of the frame around the boxes of `units` (one, or alike units merged): `nvl-3 · rack-3`,
    `57 alike NVLink domains (nvl-0 … nvl-56) · rack-0 … rack-56`."""
    levels = topology.levels
    names = [unit_name(level, u) for u in units]
    head = names[0] if len(names) == 1 else f"{len(names)} alike {WORDS.get(level, (level, level))[1]} ({_span(names)})"
    outer = [
        _span(list(dict.fromkeys(unit_name(lv, topology.unit(lv, n)) for n in nodes)))
        for lv in levels[levels.index(level) + 1 :]
    ]
    return " · ".join([head, *outer])


def _span(names: list[str]) -> str:
    """`rack-0`, `rack-0, rack-1`, `rack-0 … rack-56`."""
    return names[0] if len(names) == 1 else ", ".join(names) if len(names) == 2 else f"{names[0]} … {names[-1]}"
