"""The picture of every spec example, planned with the inventory its README row names, shows every
worker; with Chromium on PATH the documented render script screenshots them, and Chromium paints a lost node
and a node served by a spare distinctly (skipped without Chromium, except in CI, where .ci/run installs it)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import xml.etree.ElementTree as ET
from html import escape

import pytest

from rlplace.config import load
from rlplace.examples.cartpole_ppo import DEMO_CONFIG, DEMO_NODES
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.viz.check import missing_workers
from rlplace.viz.picture import STATE_STYLE, html, svg

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "render_pictures.py"
_spec = importlib.util.spec_from_file_location("render_pictures", SCRIPT)
render_pictures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_pictures)

CASES = render_pictures.examples()
SVG = "{http://www.w3.org/2000/svg}"


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


#: CI installs Chromium (.ci/run): there a missing browser is a failure, not a skip.
needs_browser = pytest.mark.skipif(
    render_pictures.find_browser() is None and not os.environ.get("CI"), reason="Chromium not on PATH"
)
#: A job that lost node 2 (nothing took over) and whose node 1 now runs on a hot spare.
HEALTH = {1: ("spare", "on spare 10.0.0.7"), 2: ("lost", "lost 12:00:01")}


def demo_plan():
    inventory = parse_nodes(DEMO_NODES)
    return plan(load(DEMO_CONFIG), inventory), inventory


def test_lost_node_and_spare_are_marked_in_the_picture_and_the_page():
    result, inventory = demo_plan()
    root = ET.fromstring(svg(result, inventory, health=HEALTH))
    nodes = {g.get("data-node"): g for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    assert {k: g.get("data-state") for k, g in nodes.items()} == {"0": None, "1": "spare", "2": "lost", "3": None}
    fills = {k: g.find(f"{SVG}rect").get("fill") for k, g in nodes.items()}
    assert len({fills["0"], fills["1"], fills["2"]}) == 3
    assert "node 1 SPARE" in ET.tostring(nodes["1"], encoding="unicode")
    assert "node 2 LOST" in ET.tostring(nodes["2"], encoding="unicode")
    assert missing_workers(result, ET.tostring(root, encoding="unicode")) == []
    page = html(result, inventory, health=HEALTH)
    assert '<span class="node-spare">SPARE: on spare 10.0.0.7</span>' in page
    assert '<span class="node-lost">LOST: lost 12:00:01</span>' in page


@needs_browser
def test_chromium_renders_a_lost_node_and_a_spare_distinctly(tmp_path):
    """About 2 s: the picture and the page screenshotted in headless Chromium, their pixels read back."""
    browser = render_pictures.find_browser()
    assert browser, "CI must have Chromium (.ci/run installs Debian's chromium)"
    result, inventory = demo_plan()
    picture = svg(result, inventory, health=HEALTH)
    (tmp_path / "failover.svg").write_text(picture, encoding="utf-8")
    (tmp_path / "failover.html").write_text(html(result, inventory, health=HEALTH), encoding="utf-8")
    width, height = render_pictures.svg_size(picture)
    render_pictures.screenshot(browser, tmp_path / "failover.svg", tmp_path / "failover.png", (width, height))
    _, _, rows = render_pictures.png_pixels(tmp_path / "failover.png")

    def inside(rank: str) -> tuple[int, int, int]:
        """The colour Chromium painted inside node `rank`'s box, right of its group chips."""
        box = next(g for g in ET.fromstring(picture).iter(f"{SVG}g") if g.get("id") == f"node-{rank}")
        rect = box.find(f"{SVG}rect")
        x = round(float(rect.get("x")) + float(rect.get("width")) - 12)
        y = round(float(rect.get("y")) + 32)
        return tuple(rows[y][3 * x : 3 * x + 3])

    healthy, spare, lost = inside("0"), inside("1"), inside("2")
    assert healthy == (255, 255, 255)
    assert spare == _rgb(STATE_STYLE["spare"][0]) and lost == _rgb(STATE_STYLE["lost"][0])
    page_png = tmp_path / "failover.page.png"
    page_size = (width + render_pictures.PAGE_EXTRA[0], height + render_pictures.PAGE_EXTRA[1])
    render_pictures.screenshot(browser, tmp_path / "failover.html", page_png, page_size)
    _, _, page_rows = render_pictures.png_pixels(page_png)
    counts = {c: sum(row.count(bytes(c)) for row in page_rows) for c in (spare, lost)}
    assert all(n > 5_000 for n in counts.values()), f"the page shows too little of each state: {counts}"


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


@needs_browser
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


#: Where Chromium put every node group's outline and every node box, and how big the window is: written into
#: the root element, which --dump-dom prints. Added to a copy of the picture only; the shipped one has no script.
MEASURE = """<script>
var boxes = [];
document.querySelectorAll("g.group-outline > rect, g.node > rect").forEach(function (r) {
  var b = r.getBoundingClientRect();
  boxes.push([r.parentNode.getAttribute("data-group") || "node " + r.parentNode.getAttribute("data-node"),
              b.left, b.top, b.right, b.bottom].join(","));
});
var size = window.innerWidth + "x" + window.innerHeight;
document.documentElement.setAttribute("data-measured", size + ";" + boxes.join(";"));
</script>"""
WINDOW = (1400, 900)
#: Plans of three node groups or pools: the spec's fully disaggregated layout, a 40-node RLinf-shaped cluster,
#: and the README's own command (`rlplace plan job.yaml --nodes 2x8,1x4 --svg plan.svg`: two pools, an idle node).
THREE_GROUPS = [
    (render_pictures.EXAMPLES / "pools-fully-disaggregated.yaml", "3x8"),
    (
        pathlib.Path(__file__).resolve().parents[1] / "data/frameworks/rlinf/large/three_groups.yaml",
        "16x8:A800,16x8:RTX4090,8x0",
    ),
    (
        pathlib.Path(__file__).resolve().parents[2] / "src/rlplace/examples/cartpole_ppo/configs/disaggregate.yaml",
        "2x8,1x4",
    ),
]


def measured(browser: str, path: pathlib.Path, text: str) -> tuple[tuple[int, int], dict[str, tuple[float, ...]]]:
    marked = (
        text.replace("</svg>", MEASURE + "</svg>")
        if path.suffix == ".svg"
        else text.replace("</body>", MEASURE + "</body>")
    )
    path.write_text(marked, encoding="utf-8")
    dom = render_pictures.dump_dom(browser, path, WINDOW)
    window, *boxes = re.search(r'data-measured="([^"]*)"', dom).group(1).split(";")
    width, height = map(int, window.split("x"))
    return (width, height), {b.split(",")[0]: tuple(map(float, b.split(",")[1:])) for b in boxes}


@needs_browser
@pytest.mark.parametrize(("example", "nodes"), THREE_GROUPS, ids=["pools", "large", "readme"])
def test_every_node_group_is_inside_a_1400_x_900_window(tmp_path, example, nodes):
    """About 2 s: Chromium lays the picture out at 1400 x 900; every group outline and node box lies inside the
    window (the SVG scales to its width), and on the HTML page inside its width."""
    browser = render_pictures.find_browser()
    assert browser, "CI must have Chromium (.ci/run installs Debian's chromium)"
    inventory = parse_nodes(nodes)
    result = plan(load(example), inventory)
    (width, height), boxes = measured(browser, tmp_path / "plan.svg", svg(result, inventory))
    assert width == WINDOW[0] and len({g.name for g in result.groups} & set(boxes)) == len(result.groups) >= 2
    for name, (left, top, right, bottom) in boxes.items():
        assert 0 <= left < right <= width and 0 <= top < bottom <= height, f"{name} outside {width}x{height}"
    (width, _), boxes = measured(browser, tmp_path / "plan.html", html(result, inventory))
    for name, (left, _, right, _) in boxes.items():
        assert 0 <= left < right <= width, f"{name} outside the page's {width} px"
