"""The topology picture of a plan: `rlplace plan --svg out.svg` / `--html out.html`.

Boxes in rows (a pool's or node group's nodes kept together): a node, each GPU a cell listing who sits on it
(co-residents stacked with their share), robots and CPU-only workers below the GPUs; or a run of alike nodes
(`nodes 0-7`), a row per run of alike devices, as the plan table prints it. Pools and node groups are
outlined in their colour, the estimate's cross-node streams are arrows labelled with their bytes, and
workers Ray places freely (strategy `default`) have their own area. Every worker has an element carrying
`data-component` and `data-ranks`, so tools and tests can find it. The picture scales to the page: a
`viewBox`, a width of 100% and never wider than its natural size.

Pure string generation, deterministic: the same plan gives the same bytes.
"""

from __future__ import annotations

import math
import pathlib
import re
from collections import Counter

from rlplace.config.ranges import format_ranks
from rlplace.inventory import Inventory
from rlplace.lifecycle import NodeMark
from rlplace.output_files import write_file
from rlplace.plan import Plan
from rlplace.planner.estimate import (
    BUFFER_ROLES,
    ENV_ROLES,
    EVAL_ROLES,
    EXPERIENCE,
    INTERACTION,
    SAMPLING,
    TRAIN_ROLES,
    WEIGHTS,
    Estimate,
    format_bytes,
)
from rlplace.printable import printable
from rlplace.viz.collapse import HARDWARE as HARDWARE_KIND
from rlplace.viz.environments import environments
from rlplace.viz.layout import (
    CELL_GAP,
    CELL_W,
    CHIPS_H,
    ENTRY_H,
    GAP_MIN,
    GAP_PAD,
    GAP_X,
    GPU_COLS,
    HEADER_H,
    LABEL_H,
    MARGIN,
    NODE_PAD,
    NODE_W,
    Box,
    cell_h,
    node_h,
    run_row_h,
    wrap_rows,
)
from rlplace.viz.routes import Router, label_point
from rlplace.viz.scene import (
    BoxFlow,
    Device,
    Entry,
    NodeMarks,
    NodeView,
    RunRow,
    Scene,
    build_scene,
    counted,
    entries_of,
    headline,
)
from rlplace.viz.svgkit import Svg, escape, fit, num, text_width
from rlplace.viz.text import ABSENT, LEVEL_NAMES, UNKNOWN, estimate_line, flow_label, flow_name, settings_parts
from rlplace.viz.units import frame, group_level

MAX_NODES = 64
SMALL, BODY, LEGEND, TITLE = 9.0, 12.0, 11.0, 18.0

#: (stroke, fill) per component: the usual RL roles keep their colour in every picture.
PALETTE = (
    ("#4e79a7", "#dbe6f1"),
    ("#59a14f", "#def0db"),
    ("#f28e2b", "#fde6cf"),
    ("#b07aa1", "#efe2ec"),
    ("#e15759", "#f9dcdc"),
    ("#76b7b2", "#dff0ef"),
    ("#c9a227", "#f8efcf"),
    ("#9c755f", "#ece2db"),
    ("#d37295", "#f7e1ea"),
    ("#79706e", "#e8e6e5"),
)
ROLE_COLOUR = {
    **dict.fromkeys(TRAIN_ROLES, 0),
    **dict.fromkeys(EVAL_ROLES, 1),
    **dict.fromkeys(ENV_ROLES, 2),
    **dict.fromkeys(BUFFER_ROLES, 3),
}
GROUP_COLOURS = ("#1f4e79", "#8e24aa", "#2e7d32", "#c62828", "#8d6e00", "#00838f", "#5d4037", "#ad1457")
FLOW_COLOURS = {WEIGHTS: "#1565c0", EXPERIENCE: "#e65100", INTERACTION: "#6a1b9a", SAMPLING: "#00695c"}
#: Node states after a failure: (box fill, box stroke, dash, header word). Lost and failed nodes are red and
#: dashed (nothing runs there), a rank served by a spare is green: told apart at a glance, also in grey.
STATE_STYLE: dict[str, tuple[str, str, str | None, str]] = {
    NodeMark.LOST: ("#fde7e7", "#b71c1c", "6 3", "LOST"),
    NodeMark.FAILED: ("#fde7e7", "#b71c1c", "6 3", "LOST"),
    NodeMark.SPARE: ("#e3f4e5", "#1b5e20", None, "SPARE"),
    NodeMark.REPLACED: ("#fff", "#1b5e20", None, "REPLACED"),
}
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"

STYLE = f"""
text {{ font-family: {FONT}; }}
.title {{ font-size: {num(TITLE)}px; font-weight: bold; }}
.body {{ font-size: {num(BODY)}px; }}
.legend {{ font-size: {num(LEGEND)}px; }}
.small {{ font-size: {num(SMALL)}px; }}
.bold {{ font-weight: bold; }}
.muted {{ fill: #777; }}
.halo {{ paint-order: stroke; stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }}
.warn {{ fill: #8a5a00; }}
"""


def svg(
    plan: Plan,
    inventory: Inventory | None = None,
    max_nodes: int = MAX_NODES,
    health: NodeMarks | None = None,
    estimate: Estimate | None = None,
) -> str:
    """The picture as an SVG document. `inventory` adds GPU models, idle GPUs and unused nodes; `health`
    (a running job's `node_health()`) marks lost nodes and ranks served by a spare; `estimate` is the one whose
    streams the arrows draw (default: `rlplace.planner.estimate(plan, inventory=inventory)`).

    Alike nodes share a box, so a 4,096-node plan draws as its few patterns. Boxes past the first `max_nodes`
    are not drawn; their workers are listed, as rank ranges, in one area below. A terminal control in the config's
    text is written as a visible escape (`printable`): XML allows none, and `cat plan.svg` would obey it.
    """
    return printable(_Drawing(build_scene(plan, inventory, health, estimate), max_nodes).render())


def write_svg(
    plan: Plan,
    path: str | pathlib.Path,
    inventory: Inventory | None = None,
    max_nodes: int = MAX_NODES,
    health: NodeMarks | None = None,
    estimate: Estimate | None = None,
) -> pathlib.Path:
    """Write `svg(...)` to `path` (atomically, never through a link: `rlplace.output_files`); returns the path."""
    return write_file(path, svg(plan, inventory, max_nodes, health, estimate))


def html(
    plan: Plan,
    inventory: Inventory | None = None,
    max_nodes: int = MAX_NODES,
    health: NodeMarks | None = None,
    estimate: Estimate | None = None,
) -> str:
    """A self-contained page: the picture, the plan table, streams, warnings and notes (no external files); terminal
    controls written as visible escapes, as in `svg`."""
    from rlplace.viz.page import render_page

    scene = build_scene(plan, inventory, health, estimate)
    return printable(render_page(scene, _Drawing(scene, max_nodes).render(xml_declaration=False)))


def write_html(
    plan: Plan,
    path: str | pathlib.Path,
    inventory: Inventory | None = None,
    max_nodes: int = MAX_NODES,
    health: NodeMarks | None = None,
    estimate: Estimate | None = None,
) -> pathlib.Path:
    """Write `html(...)` to `path` (atomically, never through a link: `rlplace.output_files`); returns the path."""
    return write_file(path, html(plan, inventory, max_nodes, health, estimate))


def component_colours(components: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """Role colours for train/eval/env/buffer (and actor/rollout), the rest of the palette in plan order."""
    spare = [i for i in range(len(PALETTE)) if i not in ROLE_COLOUR.values()]
    out, k = {}, 0
    for c in components:
        if c in ROLE_COLOUR:
            out[c] = PALETTE[ROLE_COLOUR[c]]
        else:
            out[c] = PALETTE[spare[k % len(spare)]]
            k += 1
    return out


class _Drawing:
    """Lays out a scene top to bottom and writes it as SVG."""

    def __init__(self, scene: Scene, max_nodes: int = MAX_NODES) -> None:
        self.scene = scene
        self.drawn, self.hidden = scene.nodes[:max_nodes], scene.nodes[max_nodes:]
        self.colours = component_colours(scene.components)
        self.group_colour = {g.name: GROUP_COLOURS[i % len(GROUP_COLOURS)] for i, g in enumerate(scene.groups)}
        rows = wrap_rows(self.drawn)
        self.width = max(2 * MARGIN + max((len(r) for r in rows), default=0) * (NODE_W + GAP_X), 2 * MARGIN + 960.0)
        self.row_spans: list[tuple[float, float]] = []  # (top, bottom) of each row of nodes
        self.gaps: list[float] = []  # height of the gap above each row, and below the last
        self.out = Svg()

    def render(self, xml_declaration: bool = True) -> str:
        body = Svg()
        self.out = body
        y = self._header(MARGIN)
        y = self._legend(y + 8)
        boxes, y = self._nodes(y)
        if self.hidden:
            y = self._hidden(y, boxes)
        if self.scene.unpinned:
            heading = "scheduled by Ray: not pinned to a node (strategy default, no placement group)"
            y = self._area(y, "unpinned", heading, self.scene.unpinned, "scheduled by Ray", unpinned=True)
        if self.scene.driver:
            heading = "in the driver process (remote: false): not Ray actors, nothing reserved"
            y = self._area(y, "driver", heading, self.scene.driver, "in the driver process")
        envs = tuple(e.line() for e in environments(self.scene.plan))
        if envs:
            y = self._listed(y, "environment", envs)
        if self.scene.plan.warnings:
            y = self._listed(y, "warning", self.scene.plan.warnings)
        if self.scene.plan.notes:
            y = self._listed(y, "note", self.scene.plan.notes)
        self._flows(boxes)
        height = y + MARGIN
        head = '<?xml version="1.0" encoding="UTF-8"?>\n' if xml_declaration else ""
        plan = self.scene.plan
        nodes = sum(len(n.nodes) for n in self.scene.nodes)
        return (
            f'{head}<svg xmlns="http://www.w3.org/2000/svg" width="100%" '
            f'viewBox="0 0 {num(self.width)} {num(height)}" style="max-width: {num(self.width)}px; height: auto" '
            f'data-workers="{len(plan.workers)}" data-nodes="{nodes}">\n'
            f"<title>{escape(headline(self.scene))}</title>\n"
            f"<style>{STYLE}</style>\n{self._markers()}\n"
            f'<rect x="0" y="0" width="{num(self.width)}" height="{num(height)}" fill="#fff"/>\n'
            f"{body.render()}\n</svg>\n"
        )

    # ---- header and legend -------------------------------------------------------------------------
    def _header(self, y: float) -> float:
        plan = self.scene.plan
        self.out.text(MARGIN, y + TITLE, headline(self.scene), class_="title")
        room = self.width - 2 * MARGIN
        lines = _wrapped(settings_parts(plan), " · ", room)  # wrap at the separators, never inside a setting
        if self.scene.estimate is not None:  # the estimate as the terminal prints it, broken only between figures
            words = re.split(r"(?<=[;,]) (?=[a-z])", estimate_line(plan, self.scene.estimate))
            lines += _wrapped(words, " ", room)
        self.out.open("g", class_="settings")
        for i, line in enumerate(lines):
            self.out.text(MARGIN, y + TITLE + 20 + 16 * i, line, class_="body muted")
        self.out.close("g")
        return y + TITLE + 26 + 16 * (len(lines) - 1)

    def _legend(self, y: float) -> float:
        counts = Counter(w.component for w in self.scene.plan.workers)
        items = [(c, f"{c} ({counts[c]})", "component") for c in self.scene.components]
        y = self._legend_row(y, "components", items)
        groups = [(g.name, f"{g.name}: nodes {format_ranks(sorted(g.node_ranks))}", "group") for g in self.scene.groups]
        if groups:
            y = self._legend_row(y, "pools / node groups", groups)
        kinds = sorted({f.kind for f in self.scene.flows})
        est = self.scene.estimate
        if kinds and est is not None:
            flows = [(k, flow_name(k, est), "flow") for k in kinds]
        else:
            flows = [("", self._no_flows(), "text")]
        if any(_across(f) for f in self.scene.flows):
            flows.append(("", "dashed and wide: crosses racks or zones", "text"))
        y = self._legend_row(y, "cross-node flows", [*flows, ("", "idle GPU", "idle")])
        states = sorted({n.state for n in self.scene.nodes if n.state != NodeMark.OK}, key=list(STATE_STYLE).index)
        if states:
            y = self._legend_row(y, "node failures", [(s, _STATE_LEGEND[s], "state") for s in states])
        return y

    def _no_flows(self) -> str:
        """Why no arrow is drawn, in the estimate's words."""
        est, plan = self.scene.estimate, self.scene.plan
        if est is None:
            return "none"
        none = UNKNOWN if not plan.uses_placement_groups else ABSENT
        amounts = [
            f"{flow_name(WEIGHTS, est)} {format_bytes(est.weight_sync_bytes, none)}",
            f"{flow_name(EXPERIENCE, est)} {format_bytes(est.experience_bytes, none)}",
        ]
        return "none across nodes: " + ", ".join(amounts)

    def _legend_row(self, y: float, heading: str, items: list[tuple[str, str, str]]) -> float:
        x0 = MARGIN + 150
        self.out.text(MARGIN, y + 12, heading, class_="legend bold")
        x: float = x0
        for key, label, kind in items:
            w = 22 + text_width(label, LEGEND) + 18
            if x + w > self.width - MARGIN and x > x0:
                x, y = x0, y + 18
            self.out.open("g", class_=f"legend-{kind}", data_key=key or None)
            if kind == "component":
                stroke, fill = self.colours[key]
                self.out.rect(x, y + 2, 14, 12, rx=2, fill=fill, stroke=stroke)
            elif kind == "group":
                self.out.rect(x, y + 1, 16, 14, rx=4, fill="none", stroke=self.group_colour[key], stroke_width=2.5)
            elif kind == "flow":
                self.out.empty("path", d=f"M{num(x)} {num(y + 8)} h14", **_flow_style(key))
            elif kind == "idle":
                self.out.rect(x, y + 2, 14, 12, rx=2, fill="#fafafa", stroke="#aaa", stroke_dasharray="3 2")
            elif kind == "state":
                fill, stroke, dash, _ = STATE_STYLE[key]
                self.out.rect(x, y + 1, 16, 14, rx=3, fill=fill, stroke=stroke, stroke_width=2, stroke_dasharray=dash)
            self.out.text(x + (0 if kind == "text" else 22), y + 12, label, class_="legend")
            self.out.close("g")
            x += w
        return y + 20

    def _markers(self) -> str:
        return (
            "<defs>"
            + "".join(
                f'<marker id="arrow-{k}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
                f'orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="{c}"/></marker>'
                for k, c in FLOW_COLOURS.items()
            )
            + "</defs>"
        )

    # ---- nodes ---------------------------------------------------------------------------------------
    def _nodes(self, y: float) -> tuple[dict[int, Box], float]:
        """Place the rows, sizing each gap between them for the arrows that run through it."""
        rows = wrap_rows(self.drawn)
        self.gaps = [GAP_MIN] * (len(rows) + 1)  # gap i lies above row i
        boxes, _ = self._place(rows, y)
        trial = Router(boxes, self.row_spans, self.gaps)
        for f in self.scene.flows:
            if f.src in boxes and f.dst in boxes:
                trial.route(f)
        self.gaps = [
            max(GAP_MIN, 2 * GAP_PAD + trial.lanes.get(("gap", i), 0) * Router.LANE) for i in range(len(rows) + 1)
        ]
        boxes, y = self._place(rows, y)
        self._unit_frames(boxes)
        self._group_outlines(boxes)
        for box in boxes.values():
            self._node(box)
        return boxes, y

    def _place(self, rows: list[list[NodeView]], y: float) -> tuple[dict[int, Box], float]:
        boxes: dict[int, Box] = {}
        self.row_spans = []
        for i, row in enumerate(rows):
            y += self.gaps[i]
            h = max(node_h(n) for n in row)
            for j, node in enumerate(row):
                boxes[node.rank] = Box(node, MARGIN + GAP_X / 2 + j * (NODE_W + GAP_X), y, node_h(node), i, j)
            self.row_spans.append((y, y + h))
            y += h
        return boxes, y + self.gaps[-1]

    def _unit_frames(self, boxes: dict[int, Box]) -> None:
        """A frame around each run of side-by-side boxes in the same topology units (an NVLink domain, a rack, or
        alike ones merged), labelled with them as the table names them: `nvl-3 · rack-3`."""
        level = group_level(self.scene.plan.topology)
        if level is None:
            return
        runs: list[list[Box]] = []
        for b in sorted(boxes.values(), key=lambda b: (b.row, b.x)):
            prev = runs[-1][-1] if runs else None
            if prev and prev.row == b.row and prev.node.units == b.node.units:
                runs[-1].append(b)
            elif b.node.units:
                runs.append([b])
        pad = 14 + 5 * max((len(b.node.groups) for b in boxes.values()), default=0)
        for run in runs:
            nodes = [n for b in run for n in b.node.nodes]
            label = frame(self.scene.plan.topology, level, run[0].node.units, nodes)
            top, bottom = min(b.y for b in run), max(b.y + b.h for b in run)
            x, w = run[0].x - pad, run[-1].x + NODE_W - run[0].x + 2 * pad
            self.out.open("g", class_="unit-frame", data_units=" ".join(map(str, run[0].node.units)))
            self.out.title(label)
            self.out.rect(x, top - pad, w, bottom - top + 2 * pad, rx=12, fill="#f7f9fc", stroke="#90a4ae")
            self.out.text(x + 8, top - pad + 11, fit(label, w - 16, SMALL), class_="small muted")
            self.out.close("g")

    def _group_outlines(self, boxes: dict[int, Box]) -> None:
        """One outline per group around each run of its nodes that sit side by side in a row."""
        for g in self.scene.groups:
            members = sorted((boxes[r] for r in g.node_ranks if r in boxes), key=lambda b: (b.row, b.x))
            runs: list[list[Box]] = []
            for b in members:
                prev = runs[-1][-1] if runs else None
                if prev and prev.row == b.row and abs(b.x - prev.x - NODE_W - GAP_X) < 1:
                    runs[-1].append(b)
                else:
                    runs.append([b])
            for run in runs:
                level = max(b.node.groups.index(g.name) for b in run)
                pad = 6 + 5 * level
                top, bottom = min(b.y for b in run), max(b.y + b.h for b in run)
                self.out.open("g", class_="group-outline", data_group=g.name)
                self.out.title(f"{g.name}: nodes {format_ranks(sorted(g.node_ranks))}")
                self.out.rect(
                    run[0].x - pad,
                    top - pad,
                    run[-1].x + NODE_W - run[0].x + 2 * pad,
                    bottom - top + 2 * pad,
                    rx=10,
                    fill="none",
                    stroke=self.group_colour[g.name],
                    stroke_width=2,
                    stroke_dasharray="8 4",
                )
                self.out.close("g")

    def _node(self, box: Box) -> None:
        node, x, y = box.node, box.x, box.y
        gpus = node.gpus
        hw = f"{gpus}x {node.gpu_model}" if gpus and node.gpu_model else f"{gpus} GPU{'s' if gpus != 1 else ''}"
        hw = hw + (" each" if len(node.nodes) > 1 else "") if gpus else "CPU only"
        stroke = self.group_colour[node.groups[0]] if node.groups else "#888"
        fill, dash, word = "#fff" if node.used else "#f4f4f4", None, ""
        if node.state in STATE_STYLE:
            fill, stroke, dash, word = STATE_STYLE[node.state]
        self.out.open(
            "g",
            class_="node",
            id=f"node-{node.rank}",
            data_node=node.rank,
            data_groups=" ".join(node.groups),
            data_state=None if node.state == NodeMark.OK else node.state,
        )
        extra = f" · {word}: {node.note}" if word else ""
        self.out.title(f"{node.title} · {hw}" + (f" · groups {', '.join(node.groups)}" if node.groups else "") + extra)
        self.out.rect(x, y, NODE_W, box.h, rx=6, fill=fill, stroke=stroke, stroke_width=2, stroke_dasharray=dash)
        title = node.title + (f" {word}" if word else "")
        self.out.text(x + NODE_PAD, y + 17, title, class_="body bold", fill=stroke if word else None)
        detail = node.note if word and node.note else hw + ("" if node.used else " · unused")
        self.out.text(
            x + NODE_W - NODE_PAD,
            y + 17,
            fit(detail, NODE_W - 2 * NODE_PAD - text_width(title + " ", BODY), BODY),
            class_="body muted",
            text_anchor="end",
        )
        cy = y + HEADER_H
        if node.groups:
            cx = x + NODE_PAD
            for name in node.groups:
                w = text_width(name, SMALL) + 10
                self.out.rect(cx, cy, w, 14, rx=7, fill=self.group_colour[name], data_group=name)
                self.out.text(cx + 5, cy + 10, name, class_="small", fill="#fff")
                cx += w + 4
            cy += CHIPS_H
        for run_row in node.rows:
            cy = self._run_row(node, run_row, x + NODE_PAD, cy)
        ch = cell_h(node)
        for i, dev in enumerate(node.devices):
            col, row = i % GPU_COLS, i // GPU_COLS
            self._device(node.rank, dev, x + NODE_PAD + col * (CELL_W + CELL_GAP), cy + row * (ch + CELL_GAP), ch)
        if node.devices:
            cy += math.ceil(len(node.devices) / GPU_COLS) * (ch + CELL_GAP) - CELL_GAP + 6
        inner = NODE_W - 2 * NODE_PAD
        for unit in node.hardware:
            h = LABEL_H + len(unit.entries) * ENTRY_H + 3
            self.out.open("g", class_="hardware", data_node=node.rank)
            self.out.title(unit.detail)
            self.out.rect(x + NODE_PAD, cy, inner, h, rx=4, fill="#fff8e1", stroke="#c9a227")
            self.out.text(x + NODE_PAD + 4, cy + 10, fit(unit.label, inner - 8, SMALL), class_="small bold")
            self.out.close("g")
            for k, e in enumerate(unit.entries):
                self._entry(
                    e, x + NODE_PAD + 3, cy + LABEL_H + k * ENTRY_H, inner - 6, f"node {node.rank} · {unit.label}"
                )
            cy += h + 6
        if node.cpu:
            self.out.text(x + NODE_PAD, cy + 10, "CPU workers", class_="small muted")
            for k, e in enumerate(node.cpu):
                self._entry(e, x + NODE_PAD, cy + LABEL_H + k * ENTRY_H, inner, f"node {node.rank} · CPU only")
        self.out.close("g")

    def _run_row(self, node: NodeView, row: RunRow, x: float, y: float) -> float:
        """A run of alike devices in a box of several nodes: the devices, then one chip per component."""
        inner = NODE_W - 2 * NODE_PAD
        h = run_row_h(row)
        idle = not row.entries
        where = f"{node.title} {row.label}"
        self.out.open("g", class_="run", data_nodes=format_ranks(node.nodes), data_kind=row.kind)
        self.out.title(f"{where}: {row.text}")
        fill, stroke = ("#fff8e1", "#c9a227") if row.kind == HARDWARE_KIND else ("#f6f7f9", "#b8bec8")
        if idle:
            self.out.rect(x, y, inner, h, rx=3, fill="#fafafa", stroke="#aaa", stroke_dasharray="3 2")
        else:
            self.out.rect(x, y, inner, h, rx=3, fill=fill, stroke=stroke)
        label = f"{row.label} · {row.text if idle else row.caption}" if idle or row.caption else row.label
        self.out.text(x + 4, y + 10, fit(label, inner - 8, SMALL), class_="small muted")
        self.out.close("g")
        for k, e in enumerate(row.entries):
            self._entry(e, x + 3, y + LABEL_H + k * ENTRY_H, inner - 6, where)
        return y + h + CELL_GAP + 2

    def _device(self, node_rank: int, dev: Device, x: float, y: float, h: float) -> None:
        idle = not dev.entries
        self.out.open("g", class_="gpu", data_node=node_rank, data_gpu=dev.index, data_idle="true" if idle else None)
        self.out.title(f"node {node_rank} GPU {dev.index}" + (" · idle" if idle else ""))
        if idle:
            self.out.rect(x, y, CELL_W, h, rx=3, fill="#fafafa", stroke="#aaa", stroke_dasharray="3 2")
        else:
            self.out.rect(x, y, CELL_W, h, rx=3, fill="#f6f7f9", stroke="#b8bec8")
        self.out.text(x + 4, y + 10, f"GPU {dev.index}" + (" idle" if idle else ""), class_="small muted")
        self.out.close("g")
        for k, e in enumerate(dev.entries):
            self._entry(e, x + 3, y + LABEL_H + k * ENTRY_H, CELL_W - 6, f"node {node_rank} GPU {dev.index}")

    def _entry(self, e: Entry, x: float, y: float, w: float, where: str, unpinned: bool = False) -> None:
        stroke, fill = self.colours[e.component]
        self.out.open(
            "g",
            class_="worker",
            data_component=e.component,
            data_ranks=e.rank_text,
            data_where=where,
        )
        self.out.title(e.title(where, unpinned))
        self.out.rect(x, y, w, ENTRY_H - 2, rx=2, fill=fill, stroke=stroke)
        self.out.text(x + 4, y + 9, fit(e.label(unpinned), w - 6, SMALL), class_="small")
        self.out.close("g")

    # ---- areas below the nodes: nodes not drawn, unpinned workers, warnings ---------------------------
    def _hidden(self, y: float, boxes: dict[int, Box]) -> float:
        ranks = {r for n in self.hidden for r in n.nodes}
        order = {c: i for i, c in enumerate(self.scene.components)}
        entries = entries_of((w for w in self.scene.plan.workers if w.node_rank in ranks), order)
        skipped = sum(1 for f in self.scene.flows if f.src not in boxes or f.dst not in boxes)
        where = f"nodes {format_ranks(sorted(ranks))}"
        heading = f"{where} ({len(ranks)} nodes) not drawn; the plan table lists them all"
        if skipped:
            heading += f"; {skipped} cross-node streams to or from them not drawn"
        return self._area(y, "hidden-nodes", heading, entries, where)

    def _area(
        self, y: float, cls: str, heading: str, entries: tuple[Entry, ...], where: str, unpinned: bool = False
    ) -> float:
        """A full-width box of worker chips that flow into lines."""
        inner = self.width - 2 * MARGIN
        widths = [text_width(e.label(unpinned=unpinned), SMALL) + 12 for e in entries]
        lines, x = 1, 0.0
        for w in widths:
            if x + w > inner - 16 and x > 0:
                lines, x = lines + 1, 0.0
            x += w + 6
        h = 26 + lines * (ENTRY_H + 4) + 4
        self.out.open("g", class_=cls)
        self.out.rect(MARGIN, y, inner, h, rx=6, fill="#fbfbfb", stroke="#888", stroke_dasharray="6 3")
        self.out.text(MARGIN + 8, y + 17, fit(heading, inner - 16, BODY), class_="body bold")
        self.out.close("g")
        x, cy = MARGIN + 8, y + 26
        for e, w in zip(entries, widths, strict=True):
            if x + w > MARGIN + inner - 8 and x > MARGIN + 8:
                x, cy = MARGIN + 8, cy + ENTRY_H + 4
            self._entry(e, x, cy, w, where, unpinned=unpinned)
            x += w + 6
        return y + h + 16

    def _listed(self, y: float, kind: str, lines: tuple[str, ...]) -> float:
        """The plan's warnings (or notes, or its node groups' environments), each wrapped between words to the
        picture's width, never cut."""
        style = "warn" if kind == "warning" else "muted"
        room = self.width - 2 * MARGIN - 24
        self.out.open("g", class_=f"{kind}s")
        self.out.text(MARGIN, y + 14, f"{counted(len(lines), kind)}:", class_=f"body bold {style}")
        row = 0
        for line in lines:
            self.out.open("g", class_=kind)
            self.out.title(line)
            for i, part in enumerate(_wrapped(line.split(" "), " ", room)):
                x = MARGIN + (12 if i == 0 else 24)
                self.out.text(x, y + 32 + row * 16, f"- {part}" if i == 0 else part, class_=f"body {style}")
                row += 1
            self.out.close("g")
        self.out.close("g")
        return y + 32 + row * 16

    # ---- flows -----------------------------------------------------------------------------------------
    def _flows(self, boxes: dict[int, Box]) -> None:
        router = Router(boxes, self.row_spans, self.gaps)
        fan_out = Counter((f.kind, f.src) for f in self.scene.flows)
        self.out.open("g", class_="flows")
        for f in self.scene.flows:
            if f.src not in boxes or f.dst not in boxes:
                continue
            points = router.route(f)
            lx, ly, anchor = label_point(points, fan_out[(f.kind, f.src)] > 1)
            across = _across(f)
            self.out.open(
                "g",
                class_="flow",
                data_kind=f.kind,
                data_src=f.src,
                data_dst=f.dst,
                data_bytes=f.bytes,
                data_across=" ".join(f"{lv}:{x}" for lv, x in across) or None,
            )
            self.out.title(self._flow_title(f))
            path = "M" + " L".join(f"{num(x)} {num(y)}" for x, y in points)
            self.out.empty("path", d=path, stroke_linejoin="round", **_flow_style(f.kind, bool(across)))
            label = flow_label(f.kind, f.bytes, self.scene.estimate)
            more = "".join(f" · {format_bytes(x)} across {LEVEL_NAMES[lv]}" for lv, x in across)
            self.out.text(
                lx, ly, label + more, class_="legend bold halo", text_anchor=anchor, fill=FLOW_COLOURS[f.kind]
            )
            self.out.close("g")
        self.out.close("g")

    def _flow_title(self, f: BoxFlow) -> str:
        """Hover text of an arrow: the stream by the config's names, its bytes, and whom it serves."""
        est = self.scene.estimate
        name = flow_name(f.kind, est) if est is not None else f.kind
        src = f"node {f.src_nodes[0]}" if len(f.src_nodes) == 1 else f"nodes {format_ranks(f.src_nodes)}"
        dst = f"node {f.dst_nodes[0]}" if len(f.dst_nodes) == 1 else f"nodes {format_ranks(f.dst_nodes)}"
        who = f.target if f.kind == WEIGHTS else f.source
        across = "".join(f", {format_bytes(x)} across {LEVEL_NAMES[lv]}" for lv, x in _across(f))
        return (
            f"{name}: {format_bytes(f.bytes)} per iteration, {src} -> {dst}, {counted(f.workers, who + ' worker')}"
            f"{across}"
        )


_STATE_LEGEND: dict[str, str] = {
    NodeMark.LOST: "lost: waiting for a spare or replacement",
    NodeMark.FAILED: "lost: no spare or replacement in time",
    NodeMark.SPARE: "served by a hot spare",
    NodeMark.REPLACED: "served by a replacement node",
}


def _wrapped(parts: list[str], sep: str, room: float) -> list[str]:
    """`parts` joined by `sep` into lines of at most `room` px, broken only between parts."""
    lines = [""]
    for part in parts:
        joined = f"{lines[-1]}{sep}{part}" if lines[-1] else part
        if lines[-1] and text_width(joined, BODY) > room:
            lines.append(part)
        else:
            lines[-1] = joined
    return lines


#: The levels whose crossing makes an arrow stand out (wider, dashed): the thin links between racks and zones.
_THIN = ("rack", "zone")


def _across(f: BoxFlow) -> list[tuple[str, int]]:
    """(level, bytes) of the rack and zone crossings an arrow carries, the outermost level last."""
    return [(lv, f.crossing[lv]) for lv in _THIN if f.crossing.get(lv)]


def _flow_style(kind: str, thin_links: bool = False) -> dict[str, object]:
    style: dict[str, object] = {
        "fill": "none",
        "stroke": FLOW_COLOURS[kind],
        "stroke_width": 4.5 if thin_links else 2.5,
        "stroke_opacity": 0.85,
        "marker_end": f"url(#arrow-{kind})",
    }
    if thin_links:
        style["stroke_dasharray"] = "10 5"
    return style
