"""The terminal view of a plan: its settings, its components, the node table, then warnings and notes.

By default the table has a row per run of alike nodes and devices (`rlplace.viz.collapse`), so it grows with
what differs, not with the cluster: `nodes 0-7 (8x A800) | GPU 0-7 | actor 0-63, one per GPU`. `detail=True`
(`rlplace plan --detail`) gives a row per device of every node. The rows' text is the HTML page's too. Text from
the config goes through `printable` before rich makes a `Text` of it (rlplace's consoles, `viz.console`, do the
same for every string and segment they print).
"""

from __future__ import annotations

from itertools import groupby
from operator import attrgetter

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from rlplace.inventory import Inventory
from rlplace.plan import Plan, Worker
from rlplace.printable import printable
from rlplace.viz.collapse import COLUMNS, NodeRun, node_runs, ranks_text, rows
from rlplace.viz.components import component_facts, unplaced
from rlplace.viz.environments import environments
from rlplace.viz.text import settings_parts


def render(plan: Plan, inventory: Inventory | None = None, detail: bool = False) -> Group:
    """A rich renderable: settings line, components, the node table, the node groups' environments, unpinned
    workers, warnings, notes."""
    parts: list = [Parts("plan ", settings_parts(plan))]
    accelerators = sorted({b.accelerator for b in plan.bundles if b.gpus} - {"GPU"})
    if accelerators:
        parts.append(Text(printable(f"devices are {' and '.join(accelerators)} accelerators (Ray resource names)")))
    runs = node_runs(plan, inventory, detail)
    parts += [Text(printable(f.line())) for f in component_facts(plan, runs)]
    if runs:
        parts.append(node_table(runs))
    parts += [Text(printable(e.line())) for e in environments(plan)]  # node groups' env vars and interpreters
    free, driver = unplaced(plan)
    if free:
        parts.append(Text(printable("left to Ray's scheduler (not pinned): " + _listed(free, requested=True))))
    if driver:
        parts.append(Text(printable("in the driver process (remote: false, nothing reserved): " + _listed(driver))))
    parts += [Text(printable(f"warning: {w}"), style="yellow") for w in plan.warnings]
    parts += [Text(printable(f"note: {n}"), style="cyan") for n in plan.notes]
    return Group(*parts)


def node_table(runs: tuple[NodeRun, ...]) -> Table:
    t = Table(show_lines=False)
    for name in COLUMNS:  # a narrow terminal wraps a cell, never cuts it with "…" (a pipe gets whole lines)
        t.add_column(name, overflow="fold", justify="right" if name == COLUMNS[3] else "left")
    for r in rows(runs):
        t.add_row(r.node, r.device, r.workers, r.cpus)
    return t


def _listed(workers: list[Worker], requested: bool = False) -> str:
    """`train 0-15 (1 GPU each); eval 0-7 (1 GPU each)`: each component's ranks (in plan order, a component's
    workers are consecutive and ascending, so grouping them costs one C-speed pass)."""
    parts = []
    for c, ws in groupby(workers, key=attrgetter("component")):
        group = list(ws)
        ranks = sorted(map(attrgetter("rank"), group))
        parts.append(f"{c} {ranks_text(ranks)}" + (f" ({group[0].gpu_fraction:g} GPU each)" if requested else ""))
    return "; ".join(parts)


class Parts:
    """`key value · key value · ...` on as few lines as the console allows, broken only between parts (never
    inside a setting: `is_colocated` and its value stay on one line)."""

    def __init__(self, head: str, parts: list[str]) -> None:
        self.head, self.parts = head, parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines, line = [], self.head
        for part in self.parts:
            joined = f"{line} · {part}" if line != self.head else line + part
            if line != self.head and len(joined) > options.max_width:
                lines.append(line)
                line = part
            else:
                line = joined
        lines.append(line)
        for i, text in enumerate(lines):
            out = Text(printable(text))
            if i == 0:
                out.stylize("bold", 0, len(self.head.rstrip()))
            yield out
