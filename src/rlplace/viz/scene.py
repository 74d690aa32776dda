"""What the topology picture shows, as plain data: one view per node, per GPU, per robot.

Both the SVG and the HTML page draw from this one scene, so they cannot disagree about where a
worker is. Building it is the only place that decides grouping and summarising (100 agents on a node
become one entry with their rank range); drawing only lays out and styles.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rlplace.config.ranges import format_ranks
from rlplace.inventory import Inventory
from rlplace.plan import GroupSummary, Plan, Worker
from rlplace.viz.flows import Flow, cross_node_flows

#: More workers of one component at one place than this are drawn as one "x N (ranks)" entry.
LIST_LIMIT = 3

#: A node's state after a failure, as `Job.node_health()` gives it: rank -> (state, note), state one of
#: `lost` (waiting for a spare or replacement), `failed` (none came in time), `spare` (a hot spare serves
#: the rank), `replaced` (a node started again with the rank serves it). Ranks not listed are healthy.
NodeHealth = Mapping[int, tuple[str, str]]
NODE_STATES = ("ok", "lost", "failed", "spare", "replaced")


@dataclass(frozen=True)
class Entry:
    """One worker, or a run of one component's workers sharing a place, as one line of the picture."""

    component: str
    ranks: tuple[int, ...]
    share: float | None  # GPU share of each (pinned) or GPUs requested (unpinned); None if mixed
    note: str = ""  # extra hover detail (GPUs of a multi-GPU worker, hardware fields)

    @property
    def rank_text(self) -> str:
        return format_ranks(sorted(self.ranks))

    @property
    def summarised(self) -> bool:
        return len(self.ranks) > 1

    def label(self, unpinned: bool = False) -> str:
        """Short text on the chip: `train 0 1/3`, `agent x100 (0-99)`, `eval 1 · 1 GPU`."""
        if self.summarised:
            return f"{self.component} x{len(self.ranks)} ({self.rank_text})"
        if unpinned:
            return f"{self.component} {self.ranks[0]} · {self.share or 0:g} GPU"
        share = fraction_label(self.share) if self.share is not None else ""
        return f"{self.component} {self.ranks[0]}" + (f" {share}" if share else "")

    def title(self, where: str, unpinned: bool = False) -> str:
        """Hover text: every rank spelled out, where it runs and with what share."""
        parts = [f"{self.component} rank{'s' if self.summarised else ''} {self.rank_text}", where]
        if self.share is not None and unpinned:
            parts.append(f"{self.share:g} GPU requested each")
        elif self.share is not None:
            parts.append("whole GPU" if self.share >= 1 - 1e-9 else f"GPU share {fraction_label(self.share)} each")
        if self.note:
            parts.append(self.note)
        return " · ".join(parts)


@dataclass(frozen=True)
class Device:
    """One GPU of a node and who sits on it (co-residents stacked); no entries means idle."""

    index: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Hardware:
    """A robot (or other attached unit) and the workers that drive it."""

    label: str
    detail: str
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class NodeView:
    rank: int
    gpu_model: str | None
    devices: tuple[Device, ...]
    hardware: tuple[Hardware, ...]
    cpu: tuple[Entry, ...]  # pinned workers with neither GPUs nor hardware
    groups: tuple[str, ...]  # pools / node groups containing this node, in plan order
    state: str = "ok"  # see NodeHealth
    note: str = ""  # e.g. "on spare 10.0.0.7"

    @property
    def used(self) -> bool:
        return bool(self.cpu or self.hardware or any(d.entries for d in self.devices))


@dataclass(frozen=True)
class Scene:
    plan: Plan
    nodes: tuple[NodeView, ...]
    unpinned: tuple[Entry, ...]
    components: tuple[str, ...]
    groups: tuple[GroupSummary, ...]
    flows: tuple[Flow, ...]
    driver: tuple[Entry, ...] = ()  # workers run in the driver process (remote: false), nothing reserved


def build_scene(plan: Plan, inventory: Inventory | None = None, health: NodeHealth | None = None) -> Scene:
    """Arrange `plan` by node and device. `inventory` adds GPU models, idle GPUs and unused nodes; `health`
    marks nodes lost, failed, or served by a spare or replacement (a running job's `node_health()`).

    Linear in the plan's size: a 4,096-node plan must not take minutes to draw.
    """
    order = {c: i for i, c in enumerate(plan.components)}
    by_node: dict[int, list[Worker]] = defaultdict(list)
    for w in plan.workers:
        if w.node_rank is not None:
            by_node[w.node_rank].append(w)
    groups_of: dict[int, list[str]] = defaultdict(list)
    gpus: dict[int, int] = defaultdict(int)  # GPUs per node: declared, or as far as the plan uses them
    for g in plan.groups:
        for r, n in zip(g.node_ranks, g.gpus_per_node, strict=False):
            gpus[r] = max(gpus[r], n)
        for r in dict.fromkeys(g.node_ranks):
            groups_of[r].append(g.name)
    for b in plan.bundles:
        gpus[b.node_rank] = max(gpus[b.node_rank], max(b.gpus, default=-1) + 1)
    for w in plan.workers:
        if w.node_rank is not None:
            gpus[w.node_rank] = max(gpus[w.node_rank], max(w.gpus, default=-1) + 1)
    if inventory is not None:
        for n in inventory.nodes:
            gpus[n.rank] = max(gpus[n.rank], n.num_gpus)
    nodes = tuple(
        NodeView(
            rank=rank,
            gpu_model=inventory.node(rank).gpu_model if inventory is not None and rank < len(inventory) else None,
            devices=_devices(by_node[rank], gpus[rank], order),
            hardware=_hardware([w for w in by_node[rank] if w.hardware], order),
            cpu=entries_of((w for w in by_node[rank] if not w.gpus and not w.hardware), order, share=_no_share),
            groups=tuple(groups_of[rank]),
            **_health(health, rank),
        )
        for rank in sorted(gpus)
    )
    return Scene(
        plan=plan,
        nodes=nodes,
        unpinned=entries_of((w for w in plan.workers if w.node_rank is None and not w.in_driver), order),
        components=tuple(plan.components),
        groups=plan.groups,
        flows=cross_node_flows(plan.workers),
        driver=entries_of((w for w in plan.workers if w.in_driver), order, share=_no_share),
    )


def _health(health: NodeHealth | None, rank: int) -> dict[str, str]:
    if not health or rank not in health:
        return {}
    state, note = health[rank]
    if state not in NODE_STATES:
        raise ValueError(f"node {rank}: unknown state {state!r}; one of {', '.join(NODE_STATES)}")
    return {"state": state, "note": note}


def fraction_label(fraction: float) -> str:
    """A GPU share as users think of it: `1/3` for one of three co-residents, `""` for a whole GPU."""
    if fraction >= 1 - 1e-9:
        return ""
    k = round(1 / fraction) if fraction > 0 else 0
    if k and abs(1 / k - fraction) < 1e-6:
        return f"1/{k}"
    return f"{fraction:.2f}"


def counted(n: int, noun: str) -> str:
    """`1 node`, `3 nodes`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _gpu_share(w: Worker) -> float | None:
    return w.gpu_fraction


def _no_share(w: Worker) -> float | None:
    """CPU-only workers: a GPU share would be noise."""
    return None


def entries_of(
    workers: Iterable[Worker], order: dict[str, int], share: Callable[[Worker], float | None] = _gpu_share
) -> tuple[Entry, ...]:
    """One entry per worker, except a component with more than LIST_LIMIT workers here: one summary entry."""
    by_comp: dict[str, list[Worker]] = defaultdict(list)
    for w in workers:
        by_comp[w.component].append(w)
    out: list[Entry] = []
    for comp in sorted(by_comp, key=lambda c: (order.get(c, len(order)), c)):
        ws = sorted(by_comp[comp], key=lambda w: w.rank)
        if len(ws) > LIST_LIMIT:
            shares = {share(w) for w in ws}
            out.append(Entry(comp, tuple(w.rank for w in ws), shares.pop() if len(shares) == 1 else None))
        else:
            out.extend(Entry(comp, (w.rank,), share(w), _note(w)) for w in ws)
    return tuple(out)


def _note(w: Worker) -> str:
    if len(w.gpus) > 1:
        return f"spans GPUs {format_ranks(sorted(w.gpus))}"
    return ""


def _devices(workers: list[Worker], count: int, order: dict[str, int]) -> tuple[Device, ...]:
    on: dict[int, list[Worker]] = defaultdict(list)
    for w in workers:
        for i in w.gpus:
            on[i].append(w)
    return tuple(Device(i, entries_of(on[i], order)) for i in range(count))


def _hardware(workers: list[Worker], order: dict[str, int]) -> tuple[Hardware, ...]:
    """Workers sharing identical hardware info drive the same unit: one box per unit."""
    units: dict[str, list[Worker]] = {}
    for w in workers:
        units.setdefault(json.dumps(w.hardware, sort_keys=True, default=str), []).append(w)
    out = []
    for key in sorted(units):
        info = units[key][0].hardware or {}
        entries = entries_of(units[key], order, share=lambda w: w.gpu_fraction if w.gpus else None)
        out.append(Hardware(_hardware_label(info), _hardware_detail(info), entries))
    return tuple(out)


def _hardware_label(info: dict[str, object]) -> str:
    kind = str(info.get("type") or info.get("hardware_type") or "hardware")
    address = next((str(info[k]) for k in ("robot_ip", "ip", "address", "host") if info.get(k)), "")
    return f"{kind} {address}".strip()


def _hardware_detail(info: dict[str, object]) -> str:
    def show(v: object) -> str:
        return ", ".join(map(str, v)) if isinstance(v, list | tuple) else str(v)

    return "; ".join(f"{k}: {show(v)}" for k, v in sorted(info.items()))
