"""Where things go in the picture: node boxes in rows, GPU cells in a grid, gaps sized for arrows.

Pure geometry over a scene's nodes; no SVG here. All sizes are in px at the picture's font sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlplace.viz.scene import NodeView, RunRow

MARGIN = 24
NODES_PER_ROW = 4
GPU_COLS = 4
CELL_W, CELL_GAP = 96.0, 4.0
NODE_PAD = 8.0
NODE_W = 2 * NODE_PAD + GPU_COLS * CELL_W + (GPU_COLS - 1) * CELL_GAP
GAP_X = 64.0
GAP_MIN, GAP_PAD = 40.0, 24.0  # a gap between rows: at least GAP_MIN, else its arrow lanes plus GAP_PAD a side
HEADER_H, CHIPS_H = 24.0, 18.0
LABEL_H, ENTRY_H = 13.0, 14.0


@dataclass(frozen=True)
class Box:
    """A node's box: top-left corner, height (width is NODE_W for all), and its row and column."""

    node: NodeView
    x: float
    y: float
    h: float
    row: int
    col: int

    @property
    def cx(self) -> float:
        return self.x + NODE_W / 2


def cell_h(node: NodeView) -> float:
    """Height of every GPU cell of a node: room for its most crowded GPU, so the grid stays even."""
    stacked = max((len(d.entries) for d in node.devices), default=0)
    return LABEL_H + max(stacked, 1) * ENTRY_H + 3


def run_row_h(row: RunRow) -> float:
    """Height of a run of alike devices in a box of several nodes: its label and a chip per component."""
    return LABEL_H + max(len(row.entries), 1) * ENTRY_H + 3


def node_h(node: NodeView) -> float:
    """Height of a box: header, group chips, runs of devices (several nodes) or GPU grid, robots, CPU workers."""
    h = HEADER_H + (CHIPS_H if node.groups else 0)
    h += sum(run_row_h(r) + CELL_GAP + 2 for r in node.rows)
    rows = math.ceil(len(node.devices) / GPU_COLS)
    if rows:
        h += rows * cell_h(node) + (rows - 1) * CELL_GAP + 6
    for hw in node.hardware:
        h += LABEL_H + len(hw.entries) * ENTRY_H + 6
    if node.cpu:
        h += LABEL_H + len(node.cpu) * ENTRY_H + 2
    return h + NODE_PAD


def wrap_rows(nodes: tuple[NodeView, ...]) -> list[list[NodeView]]:
    """Rows of at most NODES_PER_ROW; a run of nodes in the same groups starts a new row if it fits whole there,
    so a pool or node group reads as one block."""
    runs: list[list[NodeView]] = []
    for n in nodes:
        if runs and runs[-1][-1].groups == n.groups:
            runs[-1].append(n)
        else:
            runs.append([n])
    rows: list[list[NodeView]] = [[]]
    for run in runs:
        if rows[-1] and len(rows[-1]) + len(run) > NODES_PER_ROW and len(run) <= NODES_PER_ROW:
            rows.append([])
        for n in run:
            if len(rows[-1]) == NODES_PER_ROW:
                rows.append([])
            rows[-1].append(n)
    return [r for r in rows if r]
