"""What the topology picture shows, as plain data: one box per run of alike nodes, per GPU, per robot.

Both the SVG and the HTML page draw from this one scene, and the scene from the plan table's runs
(`rlplace.viz.collapse`) and the plan's `Estimate`, so the picture cannot disagree with the table or the
estimate about where a worker is, what share it holds, or what crosses a node. A run of one node is drawn GPU
by GPU; a run of several (`nodes 0-7`, alike but for their ranks) is one box with a row per run of alike
devices, as the table prints it. Drawing only lays out and styles.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from rlplace.inventory import Inventory
from rlplace.lifecycle import NodeMark
from rlplace.plan import GroupSummary, Plan, PlanTopology, Worker
from rlplace.planner.estimate import Estimate, crossing_of, estimate
from rlplace.viz.collapse import (
    CPU,
    GPU,
    HARDWARE,
    IDLE,
    NodeRun,
    Resident,
    SlotRun,
    device_label,
    node_runs,
    per_phrase,
    ranks_text,
    unit,
    workers_text,
)
from rlplace.viz.text import counted, fraction_label

__all__ = ["Device", "Entry", "NodeMarks", "NodeView", "Scene", "build_scene", "counted", "entries_of", "headline"]

#: More workers of one component at one place than this are drawn as one "x N (ranks)" entry.
LIST_LIMIT = 3

#: A node's mark after a failure, as `Job.node_health()` gives it: rank -> (mark, note), a `NodeMark` (or its
#: string): `lost` (waiting for a spare or replacement), `failed` (none came in time), `spare` (a hot spare serves
#: the rank), `replaced` (a node started again with the rank serves it). Ranks not listed are healthy.
NodeMarks = Mapping[int, tuple[str, str]]
NODE_STATES = tuple(NodeMark)


@dataclass(frozen=True)
class Entry:
    """One worker, or a run of one component's workers sharing a place, as one line of the picture."""

    component: str
    ranks: tuple[int, ...]  # ascending
    share: float | None  # GPU share of each (pinned) or GPUs requested (unpinned); None if mixed or off GPUs
    note: str = ""  # extra hover detail (GPUs of a multi-GPU worker, what a spanning process sees)
    suffix: str = ""  # on the chip after the ranks and share: "8 per node" (a box of several nodes)

    @property
    def rank_text(self) -> str:
        return ranks_text(self.ranks)

    @property
    def summarised(self) -> bool:
        return len(self.ranks) > 1

    def label(self, unpinned: bool = False) -> str:
        """Short text on the chip: `train 0 1/3`, `agent x100 (0-99)`, `eval 1 · 1 GPU`."""
        share = fraction_label(self.share) if self.share is not None and not unpinned else ""
        if self.summarised:
            text = f"{self.component} x{len(self.ranks)} ({self.rank_text})" + (f" {share}" if share else "")
            return text + (f" · {self.suffix}" if self.suffix else "")
        if unpinned:
            return f"{self.component} {self.ranks[0]} · {self.share or 0:g} GPU"
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
class RunRow:
    """In a box of several nodes: a run of alike devices, as the table's row says it."""

    kind: str  # collapse.GPU, SPAN, IDLE, HARDWARE, CPU
    label: str  # "GPU 0-7", "Franka 0-1", "CPU"
    text: str  # the table's words: "actor 0-63, one per GPU"
    entries: tuple[Entry, ...]
    caption: str = ""  # "one per GPU": how the entries sit on the devices


@dataclass(frozen=True)
class NodeView:
    """A box: one node (GPU cells, robots, CPU workers), or a run of alike nodes (`ranks`, `rows`)."""

    rank: int
    gpu_model: str | None
    devices: tuple[Device, ...]
    hardware: tuple[Hardware, ...]
    cpu: tuple[Entry, ...]  # pinned workers with neither GPUs nor hardware
    groups: tuple[str, ...]  # pools / node groups containing these nodes, in plan order
    state: str = NodeMark.OK  # see NodeMarks
    note: str = ""  # e.g. "on spare 10.0.0.7"
    ranks: tuple[int, ...] = ()  # every node of the box (empty: just `rank`)
    rows: tuple[RunRow, ...] = ()  # a box of several nodes: one row per run of alike devices
    gpus: int = 0  # GPUs per node
    label: str = ""  # the table's name of its nodes (`nodes 0-8, 18-26, …, 1008-1016`); "" for `title`'s own
    where: str = ""  # its place in the topology, as the table says it
    units: tuple[str | int, ...] = ()  # the topology units its nodes are in (a frame holds boxes of equal units)

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.ranks or (self.rank,)

    @property
    def used(self) -> bool:
        return bool(
            self.cpu or self.hardware or any(d.entries for d in self.devices) or any(r.entries for r in self.rows)
        )

    @property
    def title(self) -> str:
        """`node 3`, `nodes 0-7`."""
        if self.label:
            return self.label
        return f"node {self.rank}" if len(self.nodes) == 1 else f"nodes {ranks_text(self.nodes)}"


@dataclass(frozen=True)
class BoxFlow:
    """The estimate's flows of one kind between two boxes, summed: what one arrow stands for."""

    kind: str
    src: int  # box (its first node rank)
    dst: int
    bytes: int
    workers: int
    src_nodes: tuple[int, ...]
    dst_nodes: tuple[int, ...]
    source: str
    target: str
    #: Of `bytes`, those crossing each topology level (nvlink_domain, rack, zone: the levels the plan's nodes carry).
    crossing: dict[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Scene:
    plan: Plan
    nodes: tuple[NodeView, ...]  # the boxes
    unpinned: tuple[Entry, ...]
    components: tuple[str, ...]
    groups: tuple[GroupSummary, ...]
    flows: tuple[BoxFlow, ...]
    driver: tuple[Entry, ...] = ()  # workers run in the driver process (remote: false), nothing reserved
    estimate: Estimate | None = None
    runs: tuple[NodeRun, ...] = ()  # the table's runs, which the boxes draw


def headline(scene: Scene) -> str:
    """`rlplace plan: 7 workers on 2 of 3 nodes`: the picture's title and heading and the page's, from one place
    (the nodes the workers are on, of the nodes drawn)."""
    used = sum(len(n.nodes) for n in scene.nodes if n.used)
    every = sum(len(n.nodes) for n in scene.nodes)
    where = counted(used, "node") if used == every else f"{used} of {counted(every, 'node')}"
    return f"rlplace plan: {counted(len(scene.plan.workers), 'worker')} on {where}"


def build_scene(
    plan: Plan, inventory: Inventory | None = None, health: NodeMarks | None = None, est: Estimate | None = None
) -> Scene:
    """Arrange `plan` by node run and device. `inventory` adds GPU models, idle GPUs and unused nodes; `health`
    marks nodes lost, failed, or served by a spare or replacement (a running job's `node_health()`); `est` is the
    estimate whose flows the arrows draw (by default the one `rlplace plan` prints without size options).

    Linear in the plan's size: a 4,096-node plan must not take minutes to draw.
    """
    for rank, (state, _) in (health or {}).items():
        if state not in NODE_STATES:
            raise ValueError(f"node {rank}: unknown state {state!r}; one of {', '.join(NODE_STATES)}")
    est = est if est is not None else estimate(plan, inventory=inventory)
    order = {c: i for i, c in enumerate(plan.components)}
    runs = node_runs(plan, inventory, health=health, devices=True)
    boxes = tuple(_box(run) for run in runs)
    return Scene(
        plan=plan,
        nodes=boxes,
        unpinned=entries_of((w for w in plan.workers if w.node_rank is None and not w.in_driver), order),
        components=tuple(plan.components),
        groups=plan.groups,
        flows=_box_flows(est, runs, plan.topology),
        driver=entries_of((w for w in plan.workers if w.in_driver), order, share=_no_share),
        estimate=est,
        runs=runs,
    )


class _BoxFields(TypedDict):
    """The fields of a NodeView that a box of one node and a box of several take alike from their run."""

    gpu_model: str | None
    groups: tuple[str, ...]
    state: str
    note: str
    gpus: int
    label: str
    where: str
    units: tuple[str | int, ...]


def _box(run: NodeRun) -> NodeView:
    common = _BoxFields(
        gpu_model=run.gpu_model,
        groups=run.groups,
        state=run.state,
        note=run.note,
        gpus=run.gpus,
        label=run.label if run.where else "",
        where=run.where,
        units=run.units,
    )
    if len(run.ranks) > 1 or not run.devices:
        rows = tuple(
            RunRow(
                s.kind, device_label(s), workers_text(s, len(run.ranks)), _row_entries(s), per_phrase(s, len(run.ranks))
            )
            for s in run.slot_runs
        )
        return NodeView(run.ranks[0], devices=(), hardware=(), cpu=(), ranks=run.ranks, rows=rows, **common)
    devices = {s.slots[0][0]: _entries(s) for s in run.devices if s.kind in (GPU, IDLE)}
    hardware = tuple(
        Hardware(_hardware_label(s), _hardware_detail(s), _entries(s)) for s in run.devices if s.kind == HARDWARE
    )
    cpu = next((_entries(s) for s in run.devices if s.kind == CPU), ())
    return NodeView(
        run.ranks[0],
        devices=tuple(Device(g, devices.get(g, ())) for g in range(run.gpus)),
        hardware=hardware,
        cpu=cpu,
        **common,
    )


def _note(r: Resident, per: str) -> str:
    notes = []
    if r.spans:
        notes.append("spans several GPUs shared with others: sees them, asks Ray for none")
    if r.gpus is not None:
        notes.append(f"spans GPUs {ranks_text(r.gpus)}")
    if r.sees is not None:
        notes.append(f"sees GPUs {ranks_text(r.sees)}, reserves none")
    if r.per_slot > 1:
        notes.append(f"{r.per_slot} per {per}")
    return "; ".join(notes)


def _entries(s: SlotRun) -> tuple[Entry, ...]:
    """One device's residents: an entry per worker, or one summary when a component has many here."""
    out: list[Entry] = []
    for r in s.residents:
        note = _note(r, unit(s))
        if len(r.ranks) > LIST_LIMIT:
            out.append(Entry(r.component, r.ranks, r.share, note))
        else:
            out.extend(Entry(r.component, (k,), r.share, note) for k in r.ranks)
    return tuple(out)


def _row_entries(s: SlotRun) -> tuple[Entry, ...]:
    per = unit(s)
    return tuple(
        Entry(r.component, r.ranks, r.share, _note(r, per), f"{r.per_slot} per {per}" if r.per_slot > 1 else "")
        for r in s.residents
    )


def _hardware_label(s: SlotRun) -> str:
    info = _unit_info(s)
    kind = str(info.get("type") or info.get("hardware_type") or "hardware")
    address = next((str(info[k]) for k in ("robot_ip", "ip", "address", "host") if info.get(k)), "")
    return f"{kind} {address}".strip()


def _hardware_detail(s: SlotRun) -> str:
    """`key: value` of each key of the unit, with where a value read from the node's environment came from."""

    def show(v: object) -> str:
        return ", ".join(map(str, v)) if isinstance(v, list | tuple) else str(v)

    fields = dict(s.unit)
    written = fields.pop("from", None)
    sources = dict(written) if isinstance(written, dict) else {}  # robots' {key: where its value came from}
    return "; ".join(
        f"{k}: {show(v)}" + (f" (from {sources[k]})" if k in sources else "") for k, v in sorted(fields.items())
    )


def _unit_info(s: SlotRun) -> dict[str, object]:
    return {k: ", ".join(map(str, v)) if isinstance(v, tuple) else v for k, v in s.unit if k != "from"}


def _box_flows(est: Estimate, runs: tuple[NodeRun, ...], topology: PlanTopology) -> tuple[BoxFlow, ...]:
    """The estimate's flows merged per (kind, source box, target box), in the estimate's order, with the bytes of
    each crossing each topology level (counted as the estimate counts them, `crossing_of`).

    A producer node's experience reaches every shard node; those flows share one destination tuple, which is
    split into boxes once (`split`), not once per flow: 2,048 producer nodes x 2,048 shard nodes stay cheap."""
    box = {r: run.ranks[0] for run in runs for r in run.ranks}
    split: dict[int, dict[int, tuple[int, ...]]] = {}  # id of a destination tuple -> box -> its nodes
    merged: dict[tuple[str, int, int], list] = {}
    for f in est.flows:
        boxes = split.get(id(f.dst))
        if boxes is None:
            parts: dict[int, list[int]] = {}
            for n in f.dst:
                parts.setdefault(box.get(n, n), []).append(n)
            boxes = split[id(f.dst)] = {b: tuple(nodes) for b, nodes in parts.items()}
        for dst, nodes in boxes.items():
            m = merged.setdefault((f.kind, box.get(f.src, f.src), dst), [0, 0, set(), set(), f.source, f.target, []])
            m[0] += f.each * len(nodes)
            m[1] += f.workers
            m[2].add(f.src)
            m[3].update(nodes)
            m[6].append(f if nodes is f.dst else dataclasses.replace(f, dst=nodes))
    levels = topology.levels
    return tuple(
        BoxFlow(
            kind,
            src,
            dst,
            b,
            n,
            tuple(sorted(s)),
            tuple(sorted(d)),
            source,
            target,
            {lv: x for lv, x in crossing_of(parts, topology).items() if lv in levels} if levels else {},
        )
        for (kind, src, dst), (b, n, s, d, source, target, parts) in merged.items()
    )


def _gpu_share(w: Worker) -> float | None:
    return w.gpu_fraction


def _no_share(w: Worker) -> float | None:
    """CPU-only workers: a GPU share would be noise."""
    return None


def entries_of(
    workers: Iterable[Worker], order: dict[str, int], share: Callable[[Worker], float | None] = _gpu_share
) -> tuple[Entry, ...]:
    """One entry per worker, except a component with more than LIST_LIMIT workers here: one summary entry
    (for workers with no node: left to Ray, in the driver, or on nodes the picture does not draw)."""
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
            out.extend(Entry(comp, (w.rank,), share(w)) for w in ws)
    return tuple(out)
