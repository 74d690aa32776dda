"""The picture of every spec example, planned with the inventory its README row names, shows every
worker; with Chromium on PATH the documented render script screenshots them (skipped otherwise)."""

from __future__ import annotations

import importlib.util
import pathlib
import xml.etree.ElementTree as ET
from html import escape

import pytest

from rlplace.config import load
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.viz.check import missing_workers
from rlplace.viz.picture import html, svg

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "render_pictures.py"
_spec = importlib.util.spec_from_file_location("render_pictures", SCRIPT)
render_pictures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_pictures)

CASES = render_pictures.examples()


def test_the_readme_table_lists_all_nine_examples():
    assert len(CASES) == 9
    assert dict((p.name, n) for p, n in CASES)["hetero-18-nodes.yaml"] == "8x8:A800,8x8:RTX4090,2x0"


@pytest.mark.parametrize(("example", "nodes"), CASES, ids=[p.stem for p, _ in CASES])
def test_spec_example_picture_shows_every_worker(example, nodes):
    inventory = parse_nodes(nodes)
    result = plan(load(example), inventory)
    picture = svg(result, inventory)
    assert missing_workers(result, picture) == []
    page = html(result, inventory)
    assert page.count("<svg") == 1 and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert all(escape(w) in page for w in result.warnings)


def test_default_strategy_example_puts_unpinned_workers_in_their_own_area():
    inventory = parse_nodes("2x4")
    result = plan(load(render_pictures.EXAMPLES / "auto-default.yaml"), inventory)
    root = ET.fromstring(svg(result, inventory))
    areas = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "unpinned"]
    assert len(areas) == 1


@pytest.mark.skipif(render_pictures.find_browser() is None, reason="Chromium not on PATH")
@pytest.mark.slow
def test_render_script_screenshots_pictures_in_headless_chromium(tmp_path):
    rc = render_pictures.main(["--out", str(tmp_path), "--only", "hetero-18-nodes", "pools-mixed"])
    assert rc == 0
    for name in ("hetero-18-nodes", "pools-mixed"):
        png = tmp_path / f"{name}.png"
        width, height = render_pictures.svg_size((tmp_path / f"{name}.svg").read_text(encoding="utf-8"))
        assert render_pictures.png_size(png) == (width, height)
        assert png.stat().st_size > 20_000, "a blank screenshot compresses to almost nothing"
        assert render_pictures.png_size(tmp_path / f"{name}.page.png")[0] == width + render_pictures.PAGE_EXTRA[0]
