"""The topology picture, read back as XML: every worker is there, where the plan put it, alike nodes share a
box as in the plan table, and the arrows, outlines and summaries a user looks for are drawn (and nothing is
drawn across a node)."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from tests.conftest import EXAMPLES
from tests.viz.plans import PLANS, all_colocated, colocated_node, default_strategy, hetero, mixed, settings, workers

from rlplace.config.ranges import parse_ranks
from rlplace.inventory import parse_nodes
from rlplace.plan import GroupSummary, Plan
from rlplace.planner import estimate
from rlplace.viz.check import missing_workers, shown_workers
from rlplace.viz.picture import html, svg, write_html, write_svg

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(text: str) -> ET.Element:
    return ET.fromstring(text)


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{{{NS['s']}}}g") if g.get("class") == cls]


def text_of(el: ET.Element) -> str:
    return " ".join(t.text or "" for t in el.iter(f"{{{NS['s']}}}text"))


def title_of(el: ET.Element) -> str:
    t = el.find("s:title", NS)
    return t.text if t is not None and t.text else ""


def worker_at(root: ET.Element, where: str) -> list[tuple[str, str]]:
    """(component, ranks) of the worker chips drawn at `where` (e.g. "node 0 GPU 3"), in drawing order."""
    return [
        (g.get("data-component"), g.get("data-ranks")) for g in groups(root, "worker") if g.get("data-where") == where
    ]


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_worker_of_the_plan_is_in_the_picture(name):
    plan, inventory = PLANS[name]()
    text = svg(plan, inventory)
    assert missing_workers(plan, text) == []
    assert len(shown_workers(text)) == len(plan.workers)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_same_plan_gives_the_same_bytes(name):
    plan, inventory = PLANS[name]()
    assert svg(plan, inventory) == svg(plan, inventory)


def test_colocated_workers_are_stacked_on_their_gpu_with_their_share():
    plan, inventory = colocated_node()
    root = parse(svg(plan, inventory))
    assert worker_at(root, "node 0 GPU 3") == [("train", "3"), ("eval", "3"), ("env", "3")]
    chips = [g for g in groups(root, "worker") if g.get("data-where") == "node 0 GPU 3"]
    assert [text_of(c) for c in chips] == ["train 3 1/3", "eval 3 1/3", "env 3 1/3"]
    assert "GPU share 1/3 each" in title_of(chips[0])
    assert worker_at(root, "node 0 · CPU only") == [("buffer", "0")]


def test_alike_nodes_share_a_box_with_a_row_per_run_of_alike_devices():
    plan, inventory = all_colocated()
    root = parse(svg(plan, inventory))
    (box,) = groups(root, "node")
    assert text_of(box).startswith("nodes 0-2 8 GPUs each")
    runs = {g.get("data-kind"): title_of(g) for g in groups(root, "run")}
    assert runs == {
        "gpu": "nodes 0-2 GPU 0-7: train 0-23 (1/3), eval 0-23 (1/3), env 0-23 (1/3), one of each per GPU",
        "cpu": "nodes 0-2 CPU: buffer 0-2, one per node",
    }
    chips = [g for g in groups(root, "worker") if g.get("data-where") == "nodes 0-2 GPU 0-7"]
    assert [text_of(c) for c in chips] == ["train x24 (0-23) 1/3", "eval x24 (0-23) 1/3", "env x24 (0-23) 1/3"]


def test_a_hundred_cpu_workers_a_node_are_one_entry_with_their_rank_range():
    plan, inventory = hetero()
    root = parse(svg(plan, inventory))
    (chip,) = [g for g in groups(root, "worker") if g.get("data-where") == "nodes 0-3 CPU"]
    assert chip.get("data-ranks") == "0-399"
    assert text_of(chip) == "agent x400 (0-399) · 100 per node"


def test_robot_nodes_show_the_robot_and_the_worker_driving_it():
    plan, inventory = hetero()
    root = parse(svg(plan, inventory))
    robots = {g.get("data-node"): (text_of(g), title_of(g)) for g in groups(root, "hardware")}
    assert robots["16"][0] == "Franka 10.10.10.1"
    assert "322142001230, 322142001231" in robots["16"][1]
    assert worker_at(root, "node 17 · Franka 10.10.10.2") == [("env", "1")]


def test_node_boxes_name_ranks_gpu_model_and_count():
    plan, inventory = hetero()
    root = parse(svg(plan, inventory))
    nodes = {g.get("data-node"): text_of(g) for g in groups(root, "node")}
    assert sorted(nodes, key=int) == ["0", "4", "8", "16", "17"]  # nodes 0-3 hold agents too, 4-7 do not
    assert nodes["0"].startswith("nodes 0-3 8x A800 each")
    assert nodes["8"].startswith("nodes 8-15 8x RTX4090 each")
    assert nodes["16"].startswith("node 16 CPU only")


def test_eighteen_nodes_fit_a_screen_and_the_picture_follows_the_page_width():
    plan, inventory = hetero()
    root = parse(svg(plan, inventory))
    rects = [g.find("s:rect", NS) for g in groups(root, "node")]
    rows: dict[str, int] = {}
    for r in rects:
        rows[r.get("y")] = rows.get(r.get("y"), 0) + 1
    assert max(rows.values()) <= 4 and len(rows) == 2
    _, _, width, height = map(float, root.get("viewBox").split())
    assert root.get("width") == "100%" and f"max-width: {width:g}px" in root.get("style")
    assert width <= 2000 and height <= 900


def test_pools_and_node_groups_are_outlined_and_in_the_legend():
    plan, inventory = mixed()
    root = parse(svg(plan, inventory))
    outlines = {g.get("data-group") for g in groups(root, "group-outline")}
    assert outlines == {"train_pool", "rollout_pool"}
    legend = [text_of(g) for g in groups(root, "legend-group")]
    assert legend == ["train_pool: nodes 0", "rollout_pool: nodes 1-2"]
    nodes = {g.get("data-node"): g.get("data-groups") for g in groups(root, "node")}
    assert nodes == {"0": "train_pool", "1": "rollout_pool"}  # nodes 1-2 are alike: one box


def flows_of(root: ET.Element) -> set[tuple[str, str, str, str]]:
    return {
        (g.get("data-kind"), g.get("data-src"), g.get("data-dst"), g.get("data-bytes")) for g in groups(root, "flow")
    }


GB, MB = 10**9, 10**6


def test_cross_node_flows_are_the_estimates_streams_labelled_with_their_bytes():
    plan, inventory = mixed()
    est = estimate(plan, 14 * GB, 256 * MB, inventory)
    root = parse(svg(plan, inventory, estimate=est))
    # nodes 1-2 are one box: one arrow each way carries both nodes' streams
    assert flows_of(root) == {("weights", "0", "1", str(28 * GB)), ("experience", "1", "0", str(256 * MB))}
    assert est.weight_sync_bytes == 28 * GB and est.experience_bytes == 256 * MB
    labels = {text_of(g) for g in groups(root, "flow")}
    assert labels == {"weights 28 GB", "experience 256 MB"}
    legend = [text_of(g) for g in groups(root, "legend-flow")]
    assert legend == ["experience (eval -> buffer)", "weight sync (train -> eval)"]


def test_weights_go_from_the_actor_nodes_to_the_rollout_nodes_named_as_in_the_config():
    plan, inventory = hetero()
    root = parse(svg(plan, inventory))
    # the robots' env workers step with rollout 0 (node 8) and rollout 32 (node 12): half the batch each way
    interaction = {("interaction", "16", "8", str(128 * MB)), ("interaction", "17", "8", str(128 * MB))}
    assert flows_of(root) == {("weights", "0", "8", str(8 * 14 * GB)), *interaction}
    weights, *steps = groups(root, "flow")
    assert title_of(weights) == (
        "weight sync (actor -> rollout): 112 GB per iteration, node 0 -> nodes 8-15, 64 rollout workers"
    )
    assert [title_of(g) for g in steps] == [
        "interaction (env -> rollout): 128 MB per iteration, node 16 -> node 8, 1 env worker",
        "interaction (env -> rollout): 128 MB per iteration, node 17 -> node 12, 1 env worker",
    ]
    legend = [text_of(g) for g in groups(root, "legend-flow")]
    assert legend == ["interaction (env -> rollout)", "weight sync (actor -> rollout)"]


def test_node_local_streams_draw_no_arrow_and_the_legend_says_why():
    gpus = [(0, (0,)), (0, (1,))]
    ws = workers("train", gpus, 1 / 3) + workers("eval", gpus, 1 / 3) + workers("env", gpus, 1 / 3)
    plan = Plan(tuple(ws + workers("buffer", [(0, ())], 0.0)), (), settings("colocate"))
    root = parse(svg(plan, parse_nodes("2x4")))
    assert flows_of(root) == set()
    (why,) = [text_of(g) for g in groups(root, "legend-text")]
    assert why == "none across nodes: weight sync (train -> eval) 0 B, experience (eval -> buffer) 0 B"


def path_points(d: str) -> list[tuple[float, float]]:
    coords = d.replace("M", " ").replace("L", " ").split()
    return [(float(coords[i]), float(coords[i + 1])) for i in range(0, len(coords), 2)]


def crosses(a: tuple[float, float], b: tuple[float, float], box: tuple[float, float, float, float]) -> bool:
    """Does the axis-parallel segment a-b pass through the inside of box (x, y, w, h)?"""
    x, y, w, h = box
    (x0, y0), (x1, y1) = a, b
    if y0 == y1:
        return y < y0 < y + h and min(x0, x1) < x + w and max(x0, x1) > x
    return x < x0 < x + w and min(y0, y1) < y + h and max(y0, y1) > y


@pytest.mark.parametrize("name", ["hetero", "mixed"])
def test_arrows_run_between_nodes_never_across_one(name):
    plan, inventory = PLANS[name]()
    root = parse(svg(plan, inventory))
    boxes = []
    for g in groups(root, "node"):
        r = g.find("s:rect", NS)
        boxes.append(tuple(float(r.get(k)) for k in ("x", "y", "width", "height")))
    arrows = groups(root, "flow")
    assert arrows
    for flow in arrows:
        pts = path_points(flow.find("s:path", NS).get("d"))
        assert all(a[0] == b[0] or a[1] == b[1] for a, b in itertools.pairwise(pts)), "orthogonal route"
        for a, b in itertools.pairwise(pts):
            assert not any(crosses(a, b, box) for box in boxes), f"{flow.get('data-src')}->{flow.get('data-dst')}"


def test_unpinned_workers_are_in_the_scheduled_by_ray_area():
    plan, inventory = default_strategy()
    root = parse(svg(plan, inventory))
    (area,) = groups(root, "unpinned")
    assert "scheduled by Ray" in text_of(area)
    assert worker_at(root, "scheduled by Ray") == [(c, str(r)) for c in ("train", "eval", "env") for r in (0, 1)]
    assert worker_at(root, "nodes 0-1 CPU") == [("buffer", "0-1")]
    idle = [title_of(g) for g in groups(root, "run") if g.get("data-kind") == "idle"]
    assert idle == ["nodes 0-1 GPU 0-3: idle"], "Ray, not the plan, decides where train/eval/env go"


def test_text_from_the_config_is_escaped():
    weird = "<ev&l>"
    plan = Plan(
        tuple(workers(weird, [(0, (0,))], group='p"1')),
        (),
        settings(),
        (GroupSummary('p"1', (0,), (1,)),),
        ("a warning with <tags> & 'quotes'",),
    )
    text = svg(plan)
    root = parse(text)  # well-formed despite the markup characters
    assert shown_workers(text) == {(weird, 0)}
    assert any(title_of(g) == "a warning with <tags> & 'quotes'" for g in groups(root, "warning"))
    assert {g.get("data-group") for g in groups(root, "group-outline")} == {'p"1'}


def test_boxes_past_max_nodes_are_listed_below_not_dropped():
    plan, inventory = hetero()
    root = parse(svg(plan, inventory, max_nodes=2))
    assert len(groups(root, "node")) == 2  # nodes 0-3 and 4-7
    (area,) = groups(root, "hidden-nodes")
    assert text_of(area).startswith("nodes 8-17 (10 nodes) not drawn")
    assert missing_workers(plan, ET.tostring(root, encoding="unicode")) == []
    hidden = {
        (g.get("data-component"), g.get("data-ranks"))
        for g in groups(root, "worker")
        if "nodes 8-17" in g.get("data-where")
    }
    assert hidden == {("rollout", "0-63"), ("env", "0"), ("env", "1")}


def test_multi_gpu_worker_appears_on_each_of_its_gpus():
    plan = Plan(tuple(workers("train", [(0, (0, 1)), (0, (2, 3))])), (), settings())
    root = parse(svg(plan))
    assert [worker_at(root, f"node 0 GPU {i}") for i in range(4)] == [[("train", "0")]] * 2 + [[("train", "1")]] * 2
    chip = next(g for g in groups(root, "worker") if g.get("data-where") == "node 0 GPU 1")
    assert "spans GPUs 0-1" in title_of(chip)


def test_without_inventory_nodes_and_gpu_counts_come_from_the_plan():
    plan, _ = mixed()
    root = parse(svg(plan))
    runs = {g.get("data-nodes"): (g.get("data-kind"), title_of(g)) for g in groups(root, "run")}
    assert runs["1-2"] == ("gpu", "nodes 1-2 GPU 0-7: eval 0-15 (1/2), env 0-15 (1/2), one of each per GPU")
    assert len([g for g in groups(root, "gpu") if g.get("data-node") == "0"]) == 8


def test_write_svg_and_html_write_files(tmp_path):
    plan, inventory = mixed()
    write_svg(plan, tmp_path / "p.svg", inventory)
    write_html(plan, tmp_path / "p.html", inventory)
    assert missing_workers(plan, (tmp_path / "p.svg").read_text(encoding="utf-8")) == []
    assert (tmp_path / "p.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_shown_workers_expands_rank_ranges():
    text = (
        '<svg xmlns="http://www.w3.org/2000/svg"><g data-component="a" data-ranks="0-2, 7"/>'
        '<g data-component="b" data-ranks="1"/></svg>'
    )
    assert shown_workers(text) == {("a", 0), ("a", 1), ("a", 2), ("a", 7), ("b", 1)}
    plan = Plan(tuple(workers("a", [(0, ())] * 4)), (), settings())
    assert missing_workers(plan, text) == ["rlplace:a:3"]


def test_ranks_stay_parseable_for_unsorted_plans():
    plan, inventory = mixed()
    shuffled = replace(plan, workers=tuple(reversed(plan.workers)))
    root = parse(svg(shuffled, inventory))
    for g in groups(root, "worker"):
        assert list(parse_ranks(g.get("data-ranks"))) == sorted(parse_ranks(g.get("data-ranks")))


def test_producers_without_a_local_shard_write_to_every_shard_in_turn():
    ws = workers("train", [(0, (0,)), (1, (1,))]) + workers("buffer", [(0, ()), (1, ())], 0.0)
    ws += workers("eval", [(2, (0,)), (2, (1,))])
    plan = Plan(tuple(ws), (), settings())
    root = parse(svg(plan, estimate=estimate(plan, GB, 100 * MB)))
    assert flows_of(root) == {
        ("experience", "2", "0", str(50 * MB)),
        ("experience", "2", "1", str(50 * MB)),
        ("weights", "0", "2", str(GB)),
    }


class _Cells(HTMLParser):
    """Text of every table row of an HTML page, and every title attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.titles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        self.titles += [v for k, v in attrs if k == "title" and v]

    def handle_data(self, data: str) -> None:
        if self.rows and data.strip():
            self.rows[-1].append(data.strip())


def test_html_page_has_the_plan_tables_rows_the_pictures_hover_titles_and_escaped_warnings():
    plan, inventory = mixed()
    page = html(plan, inventory)
    cells = _Cells()
    cells.feed(page)
    row = ["nodes 1-2 (8 GPUs)", "GPU 0-7", "eval 0-15 (1/2), env 0-15 (1/2), one of each per GPU", "0 each"]
    assert row in [r[:4] for r in cells.rows]
    assert "<title>eval ranks 0-15 · nodes 1-2 GPU 0-7 · GPU share 1/2 each</title>" in page  # the picture's hover
    assert "&lt;reserves&gt; &amp; idles" in page and "<reserves>" not in page.split("<svg", 1)[0]
    assert page.count("<svg") == 1 and "<script" not in page


def _planned(text: str, nodes: str):
    from rlplace.config import load
    from rlplace.planner import plan

    inventory = parse_nodes(nodes)
    return plan(load(text), inventory), inventory


GROUPS_WITH_ENV = """\
cluster:
  num_nodes: 3
  node_groups:
    - label: a800
      node_ranks: 0-1
      env_configs:
        - node_ranks: 0-1
          python_interpreter_path: /opt/venv/openpi/bin/python3
          env_vars:
            - GLOO_SOCKET_IFNAME: eth0
  component_placement:
    actor: {node_group: a800, placement: 0-7}
    rollout: {node_group: cluster, placement: 8-11}
"""


def test_the_env_vars_and_interpreter_of_node_groups_are_in_the_table_picture_and_page():
    """RLinf's env_configs appeared only in --format json."""
    from rich.console import Console

    from rlplace.viz.table import render

    p, inventory = _planned(GROUPS_WITH_ENV, "2x4,1x4")
    line = (
        "env of actor 0-7 on nodes 0-1 (node group a800): GLOO_SOCKET_IFNAME=eth0, python /opt/venv/openpi/bin/python3"
    )
    for detail in (False, True):
        console = Console(width=300, record=True)
        console.print(render(p, inventory, detail=detail))
        assert line in console.export_text().splitlines()
    root = parse(svg(p, inventory))
    (environments,) = groups(root, "environments")
    assert text_of(environments) == f"1 environment: - {line}"
    assert f"<li>{line}</li>" in html(p, inventory)


def test_notes_in_the_picture_are_wrapped_whole_not_cut():
    p, inventory = _planned((EXAMPLES / "auto-disaggregate.yaml").read_text(), "3x8")
    assert p.notes and any(len(n) > 200 for n in p.notes)
    root = parse(svg(p, inventory))
    for note, drawn in zip(p.notes, groups(root, "note"), strict=True):
        assert "…" not in text_of(drawn)
        assert " ".join(text_of(drawn).removeprefix("- ").split()) == note


def test_the_pictures_title_and_heading_are_one_sentence():
    """One SVG's embedded title said "7 workers on 3 nodes" and its heading "on 2 nodes": the inventory's nodes
    against those the workers are on."""
    p, inventory = _planned((EXAMPLES / "auto-disaggregate.yaml").read_text(), "3x8,1x0")
    root = parse(svg(p, inventory))
    heading = next(t.text for t in root.iter(f"{{{NS['s']}}}text") if t.get("class") == "title")
    assert root.find("s:title", NS).text == heading == f"rlplace plan: {len(p.workers)} workers on 2 of 4 nodes"
    page = html(p, inventory)
    assert f"<title>{heading}</title>" in page and f"<h1>{heading}</h1>" in page
