"""The views of a plan on racks and NVLink domains: the table groups nodes by them and stays a few rows at any size,
the picture frames them, and the arrows that cross a rack or zone say so."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tests.planner.specs import auto

from rlplace.inventory import parse_nodes
from rlplace.planner import estimate, plan
from rlplace.viz.collapse import node_runs, rows
from rlplace.viz.picture import svg

SVG = "{http://www.w3.org/2000/svg}"
NVL72 = "1026x4:GB200/rack=18/nvlink_domain=rack"


def test_57_racks_of_train_and_rollout_read_as_a_few_rows_naming_the_racks():
    inv = parse_nodes(NVL72)
    p = plan(auto("disaggregate", "default", train=2052, eval=1026, env=1026), inv)
    table = rows(node_runs(p, inv))
    heads = [r.node for r in table if r.node]
    assert len(table) <= 6, [r.node for r in table]
    assert heads[0] == (
        "nodes 0-8, 18-26, …, 1008-1016 (4x GB200) · 9 in each of 57 NVLink domains (nvl-0 … nvl-56) · rack-0 … rack-56"
    )
    assert table[0].workers == "train 0-2051, one per GPU"
    assert rows(node_runs(p, inv, detail=True))[0].node == "node 0 (4x GB200) · nvl-0 · rack-0"


def test_the_picture_frames_the_units_and_marks_the_arrows_that_cross_racks():
    inv = parse_nodes("8x2:H100/rack=2/zone=4")
    p = plan(auto("disaggregate", "default", train=2, eval=6, env=0), inv)
    root = ET.fromstring(svg(p, inv, estimate=estimate(p, inventory=inv)))
    frames = [g for g in root.iter(f"{SVG}g") if g.get("class") == "unit-frame"]
    assert frames and all(g.find(f"{SVG}title").text.startswith(("rack-", "2 alike racks")) for g in frames)
    crossing = [g for g in root.iter(f"{SVG}g") if g.get("class") == "flow" and g.get("data-across")]
    assert crossing and all("across racks" in "".join(t.text or "" for t in g.iter(f"{SVG}text")) for g in crossing)
    assert all(g.find(f"{SVG}path").get("stroke-dasharray") for g in crossing)
    plain = ET.fromstring(svg(plan(auto("disaggregate", "default", train=2, eval=6, env=0), parse_nodes("8x2")), None))
    assert not [g for g in plain.iter(f"{SVG}g") if g.get("class") in ("unit-frame",) or g.get("data-across")]
