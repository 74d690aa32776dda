"""Read a picture back: which workers it shows. The render script and the tests use it to prove that
no worker of a plan went missing from its picture (summaries count through their rank ranges)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rlplace.config.ranges import parse_ranks
from rlplace.plan import Plan


def shown_workers(svg_text: str) -> set[tuple[str, int]]:
    """(component, rank) of every worker element (`data-component`, `data-ranks`) in an SVG document."""
    root = ET.fromstring(svg_text)
    return {
        (el.attrib["data-component"], rank)
        for el in root.iter()
        if "data-component" in el.attrib
        for rank in parse_ranks(el.attrib["data-ranks"])
    }


def missing_workers(plan: Plan, svg_text: str) -> list[str]:
    """Actor names (`rlplace:<component>:<rank>`) of the plan's workers the picture does not show."""
    shown = shown_workers(svg_text)
    return [w.name for w in plan.workers if (w.component, w.rank) not in shown]
