"""The plan as a run shows it before anything starts, one way for `rlplace run ... -- COMMAND` and the bundled
pipeline (`rlplace run CONFIG`, `rlplace demo`): the table and the estimate line as `rlplace plan` prints them, and
the topology picture (SVG and HTML, the same estimate's arrows) written where the run's `--out` says."""

from __future__ import annotations

import pathlib
from typing import Any

from rlplace.inventory import Inventory
from rlplace.plan import Plan
from rlplace.planner.estimate import Estimate, estimate


def show_plan(
    console: Any,
    plan: Plan,
    inventory: Inventory,
    stem: pathlib.Path | None,
    est: Estimate | None = None,
) -> Estimate:
    """Print `plan`'s table and estimate line on `console`, write the picture to `stem`.svg and .html (none when
    `stem` is None) and say where; the estimate shown (default: the plan's own, `rlplace.planner.estimate`)."""
    from rlplace.viz.table import render
    from rlplace.viz.text import estimate_line

    est = estimate(plan, inventory=inventory) if est is None else est
    console.print(render(plan, inventory))
    console.print(estimate_line(plan, est))
    if stem is not None:
        svg, html = write_pictures(plan, inventory, stem, est)
        console.print(f"Topology picture: {svg} and {html}")
    return est


def write_pictures(
    plan: Plan, inventory: Inventory, stem: pathlib.Path, est: Estimate, health: Any = None
) -> tuple[pathlib.Path, pathlib.Path]:
    """The topology picture as `stem`.svg and `stem`.html (`health`: a running job's lost and replaced nodes)."""
    from rlplace.viz.picture import write_html, write_svg

    svg = write_svg(plan, stem.with_suffix(".svg"), inventory, health=health, estimate=est)
    html = write_html(plan, stem.with_suffix(".html"), inventory, health=health, estimate=est)
    return svg, html
