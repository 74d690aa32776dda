"""Runs of alike nodes and devices: the rows of the plan table, which the picture and the HTML page share.

A 4,096-node plan is mostly one node 4,096 times, its ranks shifted; nobody checks a placement by reading
33,000 rows. So consecutive nodes that hold the same pattern (the same components on the same devices with
the same shares and CPUs, every component's ranks shifted by the same step from one node to the next) are
one `NodeRun`, and within a node consecutive devices with the same pattern are one `SlotRun`:
`nodes 0-7 (8x A800) | GPU 0-7 | actor 0-63, one per GPU`. Whatever differs gets rows of its own. The
ranks of a run follow its devices in order, which is what "one per GPU" promises; a run whose ranks do not
(a permuted placement) is simply split. `detail=True` gives one row per device of every node instead.

Shares: each GPU's residents hold `gpu_fraction` each; a process spanning GPUs shared with others asks Ray
for none (docs/planner.md), so it is shown holding what the others leave of each of its GPUs, and the
GPU's row names that remainder. Linear in the plan's size, and cheap: rendering must not cost more than
planning (bench/render_scale.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain, pairwise
from operator import attrgetter, sub

from rlplace.inventory import Inventory
from rlplace.lifecycle import NodeMark
from rlplace.plan import Plan, PlanTopology, Worker
from rlplace.planner.gc_pause import gc_paused
from rlplace.planner.ranges import format_ranks, ranks_brief
from rlplace.viz.text import counted, cpus, fraction_label
from rlplace.viz.units import group_level, where

#: Kinds of device slot, in the order a node's rows list them.
GPU, SPAN, IDLE, HARDWARE, CPU = "gpu", "span", "idle", "hardware", "cpu"
_ORDER = {GPU: 0, SPAN: 1, IDLE: 2, HARDWARE: 3, CPU: 4}


@dataclass(frozen=True)
class Resident:
    """One component's workers on a run of slots: `per_slot` of them on each, ranks in slot order."""

    component: str
    ranks: tuple[int, ...]  # every rank of the run, ascending
    per_slot: int
    share: float | None  # of each GPU of its slot; None off GPUs
    spans: bool = False  # a process over GPUs shared with others: sees them, asks Ray for none
    gpus: tuple[int, ...] | None = None  # the GPUs of one worker that has several (a row per device: --detail)
    sees: tuple[int, ...] | None = None  # GPUs it sees without reserving any (node, robot and CPU groups)


@dataclass(frozen=True)
class SlotRun:
    """Consecutive devices of a node with the same pattern (per node of its NodeRun)."""

    kind: str  # GPU | SPAN | IDLE | HARDWARE | CPU
    slots: tuple[tuple, ...]  # per node: GPU tuples; (type, index) of each hardware unit; ((),) for CPU
    residents: tuple[Resident, ...]
    rest: float = 0.0  # share of each of its GPUs that no resident requests (held for spanning processes)
    rest_to: tuple[str, ...] = ()  # components of the spanning processes on these GPUs
    unit: tuple[tuple[str, object], ...] = ()  # a hardware unit's fields other than its index (robot_ip, ...)

    @property
    def devices(self) -> int:
        return len(self.slots)


@dataclass(frozen=True)
class NodeRun:
    """Consecutive nodes with the same pattern, every component's ranks shifted by one step per node."""

    ranks: tuple[int, ...]
    gpus: int  # per node
    gpu_model: str | None
    cpus: float | None  # CPUs the plan's bundles reserve on each node (None: no placement groups)
    cpus_have: float | None  # CPUs each node has, where the inventory says
    groups: tuple[str, ...]
    slot_runs: tuple[SlotRun, ...]
    state: str = NodeMark.OK  # a running job's node health (the picture's lost / spare nodes)
    note: str = ""
    devices: tuple[SlotRun, ...] = ()  # a run of one node, asked `devices=True`: one slot run per device
    sample: tuple[Worker, ...] = field(default=(), repr=False)  # the first node's workers (the others are alike)
    #: Its place in the topology (`rack-3 · zone-0`, `9 in each of 57 racks (rack-0 … rack-56)`); "" without one.
    where: str = ""
    #: The units (of the level the views group by) its nodes are in: one, or every unit of alike merged units.
    units: tuple[str | int, ...] = ()

    @property
    def label(self) -> str:
        """`node 3`, `nodes 0-7`, `nodes 0-8, 18-26, …, 1008-1016` (the same nodes of alike racks)."""
        if len(self.ranks) == 1:
            return f"node {self.ranks[0]}"
        return f"nodes {ranks_brief(self.ranks)}"

    @property
    def hardware(self) -> str:
        """`8x A800`, `8 GPUs`, `CPU only`."""
        if not self.gpus:
            return "CPU only"
        return f"{self.gpus}x {self.gpu_model}" if self.gpu_model else counted(self.gpus, "GPU")


def node_runs(
    plan: Plan,
    inventory: Inventory | None = None,
    detail: bool = False,
    health: Mapping[int, tuple[str, str]] | None = None,
    devices: bool = False,
) -> tuple[NodeRun, ...]:
    """The plan's pinned workers, node run by node run (`detail`: one run per node, one slot per device).

    Nodes of the inventory that hold nothing are listed too (their GPUs idle); workers left to Ray or run in
    the driver are not (they have no node). `devices`: runs of one node also get their per-device view (the
    picture draws such a node GPU by GPU). `health` (node rank -> state, note) keeps nodes of different states
    in different runs."""
    with gc_paused():  # ~100k small tuples for a 4,096-node plan: collector passes would find nothing to free
        by_node: dict[int, list[Worker]] = {}
        for w in plan.workers:
            if w.node_rank is not None:
                by_node.setdefault(w.node_rank, []).append(w)
        facts = _NodeFacts(plan, inventory, by_node)
        health = health or {}
        level = group_level(plan.topology)
        units = plan.topology.units.get(level) if level is not None else None
        runs: list[NodeRun] = []
        run: _Open | None = None
        for node in facts.ranks:
            ws = by_node.get(node, [])
            keys, ranks = list(map(_KEY, ws)), list(map(_RANK, ws))
            unit = None if units is None or level is None else plan.topology.unit(level, node)  # units: of a level
            head = (facts.head[node], health.get(node), unit)
            if not detail and run is not None and run.takes(head, keys, ranks):
                continue
            if run is not None:
                runs.append(run.close(facts, health, detail, devices))
            run = _Open(node, ws, head, keys, ranks)
        if run is not None:
            runs.append(run.close(facts, health, detail, devices))
        if level is None:
            return tuple(runs)
        return _by_unit(runs, plan.topology, level, detail)


def _by_unit(runs: list[NodeRun], topology: PlanTopology, level: str, detail: bool) -> tuple[NodeRun, ...]:
    """The runs (which never cross a unit of `level`) with their place, alike consecutive units merged: the j-th run
    of each unit of a repeated pattern (the same runs, nodes and ranks shifted alike from unit to unit) is one run,
    so a cluster of racks that each hold train and rollout nodes reads as two rows, not two per rack."""
    if detail:  # a row per node: each says where it is
        unit = topology.unit
        return tuple(
            dataclasses.replace(r, where=where(topology, level, r.ranks), units=(unit(level, r.ranks[0]),))
            for r in runs
        )
    blocks: list[list[NodeRun]] = []
    for r in runs:
        if blocks and topology.unit(level, blocks[-1][0].ranks[0]) == topology.unit(level, r.ranks[0]):
            blocks[-1].append(r)
        else:
            blocks.append([r])
    out: list[NodeRun] = []
    alike: _Alike | None = None
    for block in blocks:
        if alike is not None and alike.takes(block):
            continue
        if alike is not None:
            out.extend(alike.close(topology, level))
        alike = _Alike(block)
    if alike is not None:
        out.extend(alike.close(topology, level))
    return tuple(out)


class _Alike:
    """Units holding the same runs, each unit's nodes and every component's ranks one step on from the last's."""

    def __init__(self, block: list[NodeRun]) -> None:
        self.blocks = [block]
        self.node_step: int | None = None
        self.steps: dict[str, int] = {}

    def takes(self, block: list[NodeRun]) -> bool:
        last = self.blocks[-1]
        if len(block) != len(last) or any(len(a.ranks) != len(b.ranks) for a, b in zip(last, block, strict=True)):
            return False
        step = block[0].ranks[0] - last[0].ranks[0]
        if self.node_step is not None and step != self.node_step:
            return False
        steps = dict(self.steps)
        for a, b in zip(last, block, strict=True):
            if b.ranks[0] - a.ranks[0] != step or _facts(a) != _facts(b) or not _shifted_alike(a, b, steps):
                return False
        self.node_step, self.steps = step, steps
        self.blocks.append(block)
        return True

    def close(self, topology: PlanTopology, level: str) -> list[NodeRun]:
        units = tuple(topology.unit(level, block[0].ranks[0]) for block in self.blocks)
        if len(self.blocks) == 1:
            return [dataclasses.replace(r, where=where(topology, level, r.ranks), units=units) for r in self.blocks[0]]
        out = []
        for j, first in enumerate(self.blocks[0]):
            same = [block[j] for block in self.blocks]
            ranks = tuple(chain.from_iterable(r.ranks for r in same))
            slot_runs = tuple(
                SlotRun(
                    s.kind,
                    s.slots,
                    tuple(
                        dataclasses.replace(res, ranks=_joined([r.slot_runs[i].residents[k].ranks for r in same]))
                        for k, res in enumerate(s.residents)
                    ),
                    s.rest,
                    s.rest_to,
                    s.unit,
                )
                for i, s in enumerate(first.slot_runs)
            )
            text = where(topology, level, ranks, len(same))
            out.append(
                dataclasses.replace(first, ranks=ranks, slot_runs=slot_runs, devices=(), where=text, units=units)
            )
        return out


def _facts(r: NodeRun) -> tuple:
    return (r.gpus, r.gpu_model, r.cpus, r.cpus_have, r.groups, r.state, r.note, len(r.slot_runs))


def _shifted_alike(a: NodeRun, b: NodeRun, steps: dict[str, int]) -> bool:
    """Whether `b` is `a` with every component's ranks moved on by its step in `steps` (set on first sight)."""
    for sa, sb in zip(a.slot_runs, b.slot_runs, strict=True):
        if _pattern(sa) != _pattern(sb) or sa.slots != sb.slots:
            return False
        for ra, rb in zip(sa.residents, sb.residents, strict=True):
            d = steps.setdefault(ra.component, rb.ranks[0] - ra.ranks[0])
            if d <= 0 or len(ra.ranks) != len(rb.ranks) or not _moved(ra.ranks, rb.ranks, d):
                return False
    return True


def _moved(a: tuple[int, ...], b: tuple[int, ...], d: int) -> bool:
    if a[-1] - a[0] + 1 == len(a) and b[-1] - b[0] + 1 == len(b):  # contiguous: their ends say it
        return b[0] == a[0] + d
    return all(y - x == d for x, y in zip(a, b, strict=True))


def _joined(parts: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Ranks of alike units, one after the other; ascending (sorted only where the units' ranks interleave)."""
    out = tuple(chain.from_iterable(parts))
    return out if all(x[-1] < y[0] for x, y in pairwise(parts)) else tuple(sorted(out))


#: What must be equal, worker by worker in plan order, for two nodes to be alike (their ranks aside). A robot's
#: fields (its address, its index) differ from node to node, so robot nodes are never merged: each is shown.
_KEY = attrgetter("component", "gpus", "gpu_fraction", "visible_gpus", "sees_node_gpus", "hardware", "num_cpus")
_RANK = attrgetter("rank")


class _Open:
    """A node run being read: its first node, and what the next node must match to continue it."""

    def __init__(self, node: int, ws: list[Worker], head: tuple, keys: list, ranks: list[int]) -> None:
        self.node, self.ws, self.head, self.keys, self.last = node, ws, head, keys, ranks
        self.count = 1
        self.step: dict[str, int] = {}  # each component's rank step from one node to the next
        self.diffs: list[int] | None = None  # that step, worker by worker (compared at C speed)

    def takes(self, head: tuple, keys: list, ranks: list[int]) -> bool:
        """Add the next node if it is alike: same pattern, every component's ranks one step on."""
        if head != self.head or keys != self.keys:
            return False
        diffs = list(map(sub, ranks, self.last))
        if self.diffs is None:
            step: dict[str, int] = {}
            for key, d in zip(keys, diffs, strict=True):
                if d <= 0 or step.setdefault(key[0], d) != d:
                    return False
            self.step, self.diffs = step, diffs
        elif diffs != self.diffs:
            return False
        self.last = ranks
        self.count += 1
        return True

    def close(self, facts: _NodeFacts, health: Mapping, detail: bool, devices: bool) -> NodeRun:
        node, count = self.node, self.count
        state, note = health.get(node, (NodeMark.OK, ""))
        gpus = facts.gpus.get(node, 0)
        slot_runs = tuple(_expand(r, self.step, count) for r in _slot_runs(self.ws, gpus, detail))
        per_device = tuple(_slot_runs(self.ws, gpus, True)) if devices and count == 1 else ()
        return NodeRun(
            tuple(range(node, node + count)),
            gpus,
            facts.model(node),
            facts.cpus(node),
            facts.cpus_have(node),
            facts.groups(node),
            slot_runs,
            state,
            note,
            per_device,
            tuple(self.ws),
        )


class _NodeFacts:
    """Per node: GPU count and model, CPUs reserved and present, groups (`head`: all of them, compared at once)."""

    def __init__(self, plan: Plan, inventory: Inventory | None, by_node: dict[int, list[Worker]]) -> None:
        self.reserves = plan.uses_placement_groups
        gpus: dict[int, int] = {}
        groups: dict[int, list[str]] = {}
        for g in plan.groups:
            for r, count in zip(g.node_ranks, g.gpus_per_node, strict=False):
                gpus[r] = max(gpus.get(r, 0), count)
            for r in dict.fromkeys(g.node_ranks):
                groups.setdefault(r, []).append(g.name)
        cpus: dict[int, float] = {}
        for b in plan.bundles:
            cpus[b.node_rank] = cpus.get(b.node_rank, 0.0) + b.num_cpus
            if b.gpus and inventory is None:  # the inventory knows each node's GPUs, and the plan fits it
                gpus[b.node_rank] = max(gpus.get(b.node_rank, 0), max(b.gpus) + 1)
        if not plan.bundles and inventory is None:  # else the bundles, or the inventory, know every used GPU
            for node, ws in by_node.items():
                top = max((g for w in ws for g in w.gpus), default=-1)
                gpus[node] = max(gpus.get(node, 0), top + 1)
        known: dict[int, tuple[str | None, float | None]] = {}
        if inventory is not None:
            for n in inventory.nodes:
                gpus[n.rank] = max(gpus.get(n.rank, 0), n.num_gpus)
                known[n.rank] = (n.gpu_model, n.num_cpus)
        self.gpus = gpus
        self.ranks = sorted(gpus.keys() | by_node.keys())
        self.head = {
            r: (gpus.get(r, 0), *known.get(r, (None, None)), cpus.get(r, 0.0), tuple(groups.get(r, ())))
            for r in self.ranks
        }

    def model(self, node: int) -> str | None:
        return self.head[node][1]

    def cpus_have(self, node: int) -> float | None:
        return self.head[node][2]

    def cpus(self, node: int) -> float | None:
        """CPUs the plan's bundles reserve on `node`; None for a plan without placement groups."""
        return self.head[node][3] if self.reserves else None

    def groups(self, node: int) -> tuple[str, ...]:
        return self.head[node][4]


def _expand(run: SlotRun, step: dict[str, int], count: int) -> SlotRun:
    """A node's slot run as the node run's: every resident's ranks on all `count` nodes."""
    if count == 1:
        return run
    residents = tuple(
        Resident(r.component, _shifted(r.ranks, step[r.component], count), r.per_slot, r.share, r.spans, r.gpus, r.sees)
        for r in run.residents
    )
    return SlotRun(run.kind, run.slots, residents, run.rest, run.rest_to, run.unit)


def _shifted(ranks: tuple[int, ...], step: int, count: int) -> tuple[int, ...]:
    """`ranks` on each of `count` nodes, `step` apart, ascending (at C speed when they are contiguous)."""
    first, last = ranks[0], ranks[-1]
    if last - first + 1 == len(ranks) == step:
        return tuple(range(first, first + step * count))
    out = [x + k * step for k in range(count) for x in ranks]
    return tuple(out) if step > last - first else tuple(sorted(out))


def unit_fields(hardware: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    """What tells a hardware unit apart besides its index: its type, address, cameras... (hashable)."""
    return tuple((k, _frozen(v)) for k, v in sorted(hardware.items()) if k not in ("index", "node_rank"))


def _unit_at(w: Worker, key: tuple) -> Mapping[str, object]:
    """The record of the unit `key` (type, index) among the units `w` owns."""
    return next((u for u in w.hardware_units if (str(u.get("type", "hardware")), u.get("index", 0)) == key), {})


def _frozen(value: object) -> object:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in sorted(value.items()))
    return value


# -- one node: its slots, their residents, runs of alike slots ----------------------------------------------


def _slot_runs(ws: list[Worker], gpus: int, detail: bool) -> list[SlotRun]:
    slots: dict[tuple, list[Worker]] = {}
    held: dict[int, float] = {}  # GPU -> share requested by its (non-spanning) residents
    spanning: dict[int, list[Worker]] = {}  # GPU -> spanning processes on it
    for w in ws:
        if w.gpus and w.visible_gpus is not None:
            for g in w.gpus:
                spanning.setdefault(g, []).append(w)
            if not detail:
                slots.setdefault((SPAN, w.gpus), []).append(w)
                continue
        elif w.gpus:
            for g in w.gpus:
                held[g] = held.get(g, 0.0) + w.gpu_fraction
        if w.gpus:
            for key in ((GPU, (g,)) for g in w.gpus) if detail else ((GPU, w.gpus),):
                slots.setdefault(key, []).append(w)
        elif w.hardware:
            for u in w.hardware_units:
                slots.setdefault((HARDWARE, (str(u.get("type", "hardware")), u.get("index", 0))), []).append(w)
        else:
            slots.setdefault((CPU, ()), []).append(w)
    used = held.keys() | spanning.keys()
    idle = [(g,) for g in range(gpus) if g not in used]
    shares = _Shares(held, spanning)
    out: list[SlotRun] = []
    for (kind, key), residents in sorted(slots.items(), key=lambda kv: (_ORDER[kv[0][0]], kv[0][1])):
        run = _slot(kind, key, residents, shares, detail)
        if not detail and out and _extends(out[-1], run):
            out[-1] = _merged(out[-1], run)
        else:
            out.append(run)
    out = [_sorted(r) for r in out]
    if idle:
        runs = [SlotRun(IDLE, (g,), ()) for g in idle] if detail else [SlotRun(IDLE, tuple(idle), ())]
        at = next((i for i, r in enumerate(out) if _ORDER[r.kind] > _ORDER[IDLE]), len(out))
        out[at:at] = runs
    return out


class _Shares:
    """The share each resident holds of a GPU: its gpu_fraction, or, for a spanning process, an equal part of
    what the other residents leave (it asks Ray for none; the GPU's bundle keeps that part)."""

    def __init__(self, held: dict[int, float], spanning: dict[int, list[Worker]]) -> None:
        self.held, self.spanning = held, spanning

    def rest(self, g: int) -> float:
        return max(0.0, 1.0 - self.held.get(g, 0.0))

    def of(self, w: Worker, gpus: tuple[int, ...]) -> float | None:
        if w.visible_gpus is None:
            return w.gpu_fraction
        parts = {round(self.rest(g) / len(self.spanning[g]), 9) for g in gpus}
        return parts.pop() if len(parts) == 1 else None


def _slot(kind: str, key: tuple, ws: list[Worker], shares: _Shares, detail: bool) -> SlotRun:
    by: dict[str, list[Worker]] = {}
    for w in ws:
        by.setdefault(w.component, []).append(w)
    residents = []
    for c, cws in by.items():
        w0 = cws[0]
        on_gpu = kind in (GPU, SPAN)
        residents.append(
            Resident(
                c,
                tuple(sorted(w.rank for w in cws)),
                len(cws),
                shares.of(w0, key if detail and kind == GPU else w0.gpus) if on_gpu else None,
                on_gpu and w0.visible_gpus is not None,
                w0.gpus if detail and len(w0.gpus) > 1 else None,
                w0.visible_gpus if w0.sees_node_gpus else None,
            )
        )
    rest = 0.0
    rest_to: tuple[str, ...] = ()
    if kind == GPU:
        rest = shares.rest(key[0])
        if detail:
            rest = max(0.0, rest - sum(r.share or 0.0 for r in residents if r.spans))
        rest_to = tuple(dict.fromkeys(w.component for w in shares.spanning.get(key[0], ()))) if not detail else ()
    unit = unit_fields(_unit_at(ws[0], key)) if kind == HARDWARE else ()
    return SlotRun(kind, (key,), tuple(residents), round(rest, 9), rest_to, unit)


def _sorted(run: SlotRun) -> SlotRun:
    """Ranks ascending (merging keeps them in slot order, which the progression check reads)."""
    if run.devices == 1:
        return run
    residents = tuple(
        Resident(r.component, tuple(sorted(r.ranks)), r.per_slot, r.share, r.spans, r.gpus, r.sees)
        for r in run.residents
    )
    return SlotRun(run.kind, run.slots, residents, run.rest, run.rest_to, run.unit)


def _pattern(r: SlotRun) -> tuple:
    kind, slot = r.kind, r.slots[0]
    shape = slot[0] if kind == HARDWARE else len(slot)
    people = tuple((x.component, x.per_slot, x.share, x.spans, x.sees) for x in r.residents)
    return (kind, shape, people, r.rest, r.rest_to, r.unit)


def _extends(run: SlotRun, slot: SlotRun) -> bool:
    """Does `slot` (one device) continue `run`: same pattern, each component's ranks one step on?"""
    if run.kind == CPU or _pattern(run) != _pattern(slot):
        return False
    n = run.devices
    for a, b in zip(run.residents, slot.residents, strict=True):
        first = a.ranks[: a.per_slot]
        step = a.ranks[a.per_slot] - first[0] if n > 1 else b.ranks[0] - first[0]
        if step <= 0 or b.ranks != tuple(x + n * step for x in first):
            return False
    return True


def _merged(run: SlotRun, slot: SlotRun) -> SlotRun:
    residents = tuple(
        Resident(a.component, a.ranks + b.ranks, a.per_slot, a.share, a.spans, a.gpus, a.sees)
        for a, b in zip(run.residents, slot.residents, strict=True)
    )
    return SlotRun(run.kind, run.slots + slot.slots, residents, run.rest, run.rest_to, run.unit)


# -- words --------------------------------------------------------------------------------------------------


#: The table's columns (terminal and HTML page).
COLUMNS = ("node", "device", "workers (share of each GPU)", "CPUs reserved")


@dataclass(frozen=True)
class Row:
    """One table row as text: the same strings in the terminal table and the HTML page."""

    node: str  # "nodes 0-7 (8x A800)" on the first row of a node run, else ""
    device: str  # "GPU 0-7", "GPU 0, 2, 4, 6 · 1, 3, 5, 7", "Franka 0-1", "CPU"
    workers: str  # "actor 0-63, one per GPU"
    cpus: str  # CPUs reserved per node, on the first row of a node run


def rows(runs: tuple[NodeRun, ...]) -> list[Row]:
    out = []
    for run in runs:
        head = f"{run.label} ({run.hardware})" + (f" · {run.where}" if run.where else "")
        reserved = "-" if run.cpus is None else cpus(run.cpus)
        reserved += f" of {cpus(run.cpus_have)}" if run.cpus_have is not None else ""
        reserved += " each" if len(run.ranks) > 1 else ""
        for i, s in enumerate(run.slot_runs or (SlotRun(IDLE, (), ()),)):
            out.append(
                Row(
                    head if i == 0 else "", device_label(s), workers_text(s, len(run.ranks)), reserved if i == 0 else ""
                )
            )
    return out


def device_label(s: SlotRun) -> str:
    if s.kind == CPU:
        return "CPU"
    if s.kind == HARDWARE:
        kinds = dict.fromkeys(t for t, _ in s.slots)
        label = " · ".join(f"{t} {ranks_text([i for u, i in s.slots if u == t])}" for t in kinds)
        address = unit_address(s)
        return f"{label} ({address})" if address and s.devices == 1 else label
    if not s.slots:
        return "-"
    if all(len(slot) == 1 for slot in s.slots):
        return f"GPU {format_ranks(slot[0] for slot in s.slots)}"
    return "GPU " + " · ".join(format_ranks(slot) for slot in s.slots)


def unit_address(s: SlotRun) -> str:
    """A robot's address (robot_ip, ip, address or host), as written; "" if it has none."""
    fields = dict(s.unit)
    return next((str(fields[k]) for k in ("robot_ip", "ip", "address", "host") if fields.get(k)), "")


def unit(s: SlotRun) -> str:
    """What "one per ..." counts: a GPU, `4 GPUs`, a robot (its type), a node."""
    if s.kind in (GPU, SPAN):
        return "GPU" if len(s.slots[0]) == 1 else f"{len(s.slots[0])} GPUs"
    if s.kind == HARDWARE:
        return str(s.slots[0][0])
    return "node"


def workers_text(s: SlotRun, nodes: int = 1) -> str:
    """`actor 0-63, one per GPU`; `train 0-23 (1/3), eval 0-23 (1/3), one of each per GPU`; `idle`."""
    if not s.residents:
        return "idle" if s.slots else "unused"
    per = unit(s)
    parts = []
    for r in s.residents:
        notes = []
        share = fraction_label(r.share) if r.share is not None else ""
        if r.spans and r.gpus is None:  # a row of its own: the same share of each GPU it spans
            of = f"{share} of each of its GPUs" if share else "what the others leave of its GPUs"
            notes.append(f"{of}, asks Ray for none")
        elif share:
            notes.append(share)
        if r.gpus is not None:  # a row per device: this GPU is one of several
            notes.append(f"spans GPUs {format_ranks(r.gpus)}" + (", asks Ray for none" if r.spans else ""))
        if r.sees is not None:
            notes.append(f"sees GPUs {format_ranks(r.sees)}, reserves none")
        if r.per_slot > 1:
            notes.append(f"{r.per_slot} per {per}")
        parts.append(f"{r.component} {ranks_brief(r.ranks)}" + (f" ({', '.join(notes)})" if notes else ""))
    text = ", ".join(parts)
    phrase = per_phrase(s, nodes)
    if phrase:
        text += f", {phrase}"
    if s.rest > 1e-9:
        share = fraction_label(s.rest) or "all"
        if s.rest_to:
            text += f"; the other {share} of each GPU: {', '.join(s.rest_to)} (spans GPUs, its own row)"
        else:
            text += f"; {share} of each GPU requested by none"
    return text


def per_phrase(s: SlotRun, nodes: int = 1) -> str:
    """`one per GPU`, `one of each per GPU` when every component has one worker on each of several devices."""
    slots = s.devices * (1 if s.kind == HARDWARE else nodes)
    if not s.residents or slots == 1 or any(r.per_slot != 1 for r in s.residents):
        return ""
    return f"one per {unit(s)}" if len(s.residents) == 1 else f"one of each per {unit(s)}"


def ranks_text(ranks: tuple[int, ...] | list[int]) -> str:
    """`0-32767` without walking 32,768 ranks when they are contiguous (they are ascending and unique)."""
    if ranks and ranks[-1] - ranks[0] + 1 == len(ranks):
        return str(ranks[0]) if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}"
    return format_ranks(ranks)
