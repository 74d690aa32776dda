"""The terminal view of a plan: per node its GPUs and who is on each, then the warnings.

Workers of one component on one device are written as rank runs (`train 0-7`), so a 400-agent node
stays one line; very large plans show the first `max_nodes` nodes and say how many were left out.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rlplace.plan import Plan, Worker
from rlplace.planner.ranges import format_ranks


def render(plan: Plan, max_nodes: int = 64) -> Group:
    """A rich renderable: settings line, the node/GPU table, unpinned workers, warnings."""
    s = plan.settings
    head = Text.assemble(
        ("plan ", "bold"),
        f"mode {s.mode} · strategy {s.strategy} · env_strategy {s.env_strategy} · "
        f"is_colocated {str(s.is_colocated).lower()} · enable_offload {str(s.enable_offload).lower()} · "
        f"buffer shards {s.buffer_worker_num} · "
        f"{'placement groups' if plan.uses_placement_groups else 'no placement groups'}",
    )
    parts: list = [head]
    accelerators = sorted({b.accelerator for b in plan.bundles if b.gpus} - {"GPU"})
    if accelerators:
        parts.append(Text(f"devices are {' and '.join(accelerators)} accelerators (Ray resource names)"))
    for name, shape in plan.process_shapes.items():
        stride = f", stride {shape.stride}" if shape.stride > 1 else ""
        origin = f" (from {shape.origin})" if shape.origin else ""
        parts.append(Text(f"{name}: {shape.devices_per_process} device(s) per process{stride}{origin}"))
    nodes, free, driver = _by_node(plan)
    if nodes:
        parts.append(_table(nodes, max_nodes))
    if free:
        parts.append(Text("left to Ray's scheduler (not pinned): " + "; ".join(free)))
    if driver:
        parts.append(Text("in the driver process (remote: false, nothing reserved): " + "; ".join(driver)))
    for name, r in plan.elastic.items():
        now = len(plan.by_component(name))
        parts.append(Text(f"elastic {name}: {now} worker(s), may change from {r.min} to {r.max} (start {r.start})"))
    for w in plan.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    for n in plan.notes:
        parts.append(Text(f"note: {n}", style="cyan"))
    return Group(*parts)


def _by_node(
    plan: Plan,
) -> tuple[dict[int, dict[tuple[int, ...], dict[str, list[Worker]]]], list[str], list[str]]:
    nodes: dict[int, dict[tuple[int, ...], dict[str, list[Worker]]]] = {}
    unpinned: dict[str, list[Worker]] = {}
    in_driver: dict[str, list[Worker]] = {}
    for w in plan.workers:
        if w.node_rank is None:
            (in_driver if w.in_driver else unpinned).setdefault(w.component, []).append(w)
            continue
        nodes.setdefault(w.node_rank, {}).setdefault(_device(w), {}).setdefault(w.component, []).append(w)
    free = [f"{c} {format_ranks(x.rank for x in ws)} ({ws[0].gpu_fraction:g} GPU each)" for c, ws in unpinned.items()]
    driver = [f"{c} {format_ranks(x.rank for x in ws)}" for c, ws in in_driver.items()]
    return dict(sorted(nodes.items())), free, driver


def _device(w: Worker) -> tuple:
    """What a worker sits on: its GPUs; a hardware unit (robot), as (type, index); or () for CPU."""
    if w.gpus:
        return w.gpus
    if w.hardware:
        return (str(w.hardware.get("type", "hardware")), w.hardware.get("index", 0))
    return ()


def _label(device: tuple) -> str:
    if not device:
        return "cpu"
    if isinstance(device[0], str):
        return f"{device[0]} {device[1]}"
    return format_ranks(device)


def _table(nodes: dict[int, dict[tuple[int, ...], dict[str, list[Worker]]]], max_nodes: int) -> Table:
    t = Table(show_lines=False)
    t.add_column("node", justify="right")
    t.add_column("device", justify="right")
    t.add_column("workers (share of the device)")
    for i, (node, devices) in enumerate(nodes.items()):
        if i == max_nodes:
            t.add_row("…", "", f"{len(nodes) - max_nodes} more node(s): use --format json for all")
            break
        for j, (device, comps) in enumerate(sorted(devices.items(), key=_order)):
            on_gpu = bool(device) and not isinstance(device[0], str)
            t.add_row(str(node) if j == 0 else "", _label(device), _who(comps, on_gpu))
    return t


def _order(item: tuple) -> tuple:
    """GPUs first (by index), then hardware units, then CPU."""
    device = item[0]
    kind = 2 if not device else (1 if isinstance(device[0], str) else 0)
    return (kind, tuple(map(str, device)) if kind == 1 else device)


def _who(comps: dict[str, list[Worker]], on_gpu: bool) -> str:
    parts = []
    for c, ws in comps.items():
        text = f"{c} {format_ranks(w.rank for w in ws)}"
        if on_gpu and ws[0].visible_gpus is not None:
            text += " (shares these GPUs; sees them, reserves none)"
        elif on_gpu:
            text += f" ({_share(ws[0].gpu_fraction)})"
        elif ws[0].sees_node_gpus:
            text += f" (sees GPUs {format_ranks(ws[0].visible_gpus or ())} unreserved)"
        parts.append(text)
    return ", ".join(parts)


def _share(f: float) -> str:
    k = round(1 / f) if f else 0
    return f"1/{k}" if k > 1 and abs(f * k - 1) < 1e-9 else f"{f:g}"
