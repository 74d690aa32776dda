"""Arrow routes for the cross-node flows: orthogonal paths through the gaps between node boxes."""

from __future__ import annotations

from rlplace.planner.estimate import WEIGHTS
from rlplace.viz.layout import GAP_X, MARGIN, NODE_W, Box
from rlplace.viz.scene import BoxFlow


class Router:
    """Orthogonal arrow routes that run only through the gaps between nodes, never across a node.

    An arrow leaves its source through the side facing the target, runs along the gap next to that
    row, down (or up) the gap between columns if rows must be skipped, and enters the target from the
    gap next to its row. Arrows of one kind from one node share their lanes, so a fan-out (weights from
    train rank 0 to every rollout node) reads as one trunk with branches; other arrows get lanes of
    their own in every gap, channel and box side, side by side instead of on top of each other.
    """

    LANE = 12.0
    PORT = 14.0

    def __init__(self, boxes: dict[int, Box], row_spans: list[tuple[float, float]], gaps: list[float]) -> None:
        self.boxes = boxes
        self.rows = row_spans
        self.gaps = gaps
        self.lanes: dict[tuple[str, int], int] = {}  # place -> lanes handed out there
        self.taken: dict[tuple[str, int, object], int] = {}  # (place, bundle) -> its lane index

    def _index(self, place: tuple[str, int], bundle: object) -> int:
        """`bundle`'s lane at `place`: the first bundle there gets 0, the next 1, and so on."""
        key = (*place, bundle)
        if key not in self.taken:
            self.taken[key] = self.lanes.get(place, 0)
            self.lanes[place] = self.taken[key] + 1
        return self.taken[key]

    def _lane(self, place: tuple[str, int], bundle: object, step: float) -> float:
        """Offset from the centre line of a gap or channel: 0, -step, +step, -2 step, ..."""
        n = self._index(place, bundle)
        return ((n + 1) // 2) * step * (1 if n % 2 == 0 else -1)

    def _port(self, box: Box, side: str, bundle: object, toward: float) -> tuple[float, float]:
        """A point on the box's top or bottom edge, on the half facing x = `toward`."""
        sign = 1 if toward >= box.cx else -1
        x = box.cx + sign * (self._index((side, box.node.rank), bundle) + 1) * self.PORT
        return x, box.y if side == "top" else box.y + box.h

    def _gap_y(self, row: int, below: bool, bundle: object) -> float:
        """Centre line of the gap above (or below) `row`, plus this bundle's lane."""
        top, bottom = self.rows[row]
        gap = row + 1 if below else row
        centre = bottom + self.gaps[gap] / 2 if below else top - self.gaps[gap] / 2
        return centre + self._lane(("gap", gap), bundle, self.LANE)

    def route(self, f: BoxFlow) -> list[tuple[float, float]]:
        a, b = self.boxes[f.src], self.boxes[f.dst]
        out, into = (f.kind, f.src), (f.kind, f.src, f.dst)
        if a.row == b.row:  # weights over the row, experience under it: the two kinds never share a gap
            side = "top" if f.kind == WEIGHTS else "bottom"
            (x0, y0), (x1, y1) = self._port(a, side, out, b.cx), self._port(b, side, into, a.cx)
            y = self._gap_y(a.row, side == "bottom", out)
            return [(x0, y0), (x0, y), (x1, y), (x1, y1)]
        down = b.row > a.row
        (x0, y0) = self._port(a, "bottom" if down else "top", out, b.cx)
        (x1, y1) = self._port(b, "top" if down else "bottom", into, a.cx)
        ya = self._gap_y(a.row, down, out)
        if abs(b.row - a.row) == 1:
            return [(x0, y0), (x0, ya), (x1, ya), (x1, y1)]
        channel = a.col + (0 if b.col < a.col else 1)
        xc = MARGIN + channel * (NODE_W + GAP_X) + self._lane(("channel", channel), out, self.LANE)
        yb = self._gap_y(b.row, not down, out)
        return [(x0, y0), (x0, ya), (xc, ya), (xc, yb), (x1, yb), (x1, y1)]


def label_point(points: list[tuple[float, float]], fan_out: bool) -> tuple[float, float, str]:
    """Where a flow's label goes: beside its arrowhead when it shares a trunk, else just above the middle of its
    first horizontal run (not on it: the line would show between the words)."""
    if fan_out:
        (x1, y1), (_, yb) = points[-1], points[-2]
        return x1 + 6, y1 + (-8 if yb < y1 else 16), "start"
    (x0, y0), (x1, _) = points[1], points[2]
    return (x0 + x1) / 2, y0 - 5, "middle"
