"""The picture and the HTML page say what the plan and its estimate say, number for number and name for name.

For every spec example and a set of framework-shaped configs (tests/viz/corpus.py), the SVG's text and hover
titles and the HTML page's text are read back and every number and every word in them is checked against
what the plan or the estimate holds: ranks, nodes, GPU indices and counts, shares (the plan's fractions, and
what a spanning process is left), CPUs, byte counts of the estimate's streams, component and group names,
settings, GPU models, robot fields. The plan's own sentences (warnings, notes, where a process shape came
from) must appear whole and are then set aside; what remains may only use the views' fixed vocabulary. So a
"0.00" share, a "train -> eval" legend for a plan without train and eval, or a weights arrow where the
estimate says 0 B cannot pass.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import escape
from html.parser import HTMLParser

import pytest
from tests.viz.corpus import FRAMEWORKS, SPEC

from rlplace.config import load
from rlplace.inventory import Inventory, parse_nodes
from rlplace.plan import Plan
from rlplace.planner import estimate, plan
from rlplace.planner.estimate import WEIGHTS, Estimate, format_bytes
from rlplace.viz.collapse import node_runs, rows
from rlplace.viz.environments import environments
from rlplace.viz.picture import html, svg
from rlplace.viz.text import estimate_line, flow_label, fraction_label, settings_parts

SVG = "{http://www.w3.org/2000/svg}"
CASES = [(path, nodes, ()) for path, nodes in SPEC] + FRAMEWORKS
IDS = [f"{p.parent.name}/{p.stem}" for p, _, _ in CASES]

#: Every word the views write themselves (headings, legends, hover phrases). No component-like name
#: (train, eval, env, buffer, actor, rollout, ...) may be here: those must come from the plan.
VOCABULARY = frozenset(
    """
    a across actors alike all also and any are as asks b bound buffer_worker_num by bytes components cpu cpus
    cross cross-node crosses dashed default detail device devices domain domains driver each enable_offload
    env_strategy estimate experience failures false flows for from gb gpu gpus group groups held hidden idle in
    interaction is_colocated it iteration its kb leave left lists lower mb mode n/a no node node's nodes none
    not note notes nothing nvlink of on one only or other others own per pinned placement plan pools process
    processes rack racks rank ranks ray ray's remote requested reserve reserved reserves rlplace row rows
    sampling scheduled schedules sees settings several shards share shared shares spanning spans step strategy
    stream streams stride sync table tb the them these they to true unknown unused used warning warnings weight
    weights what whole wide with worker workers x zone zones
    assumed cluster.model_bytes model-bytes pass write env environment environments
    """.split()  # noqa: SIM905 (a word list reads better as words)
)
WORD = re.compile(r"[A-Za-z][\w./-]*(?:'[a-z]+)?")
NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?(B|KB|MB|GB|TB)\b)?")


def build(case) -> tuple[Plan, Inventory, Estimate, str, str]:
    path, nodes, overrides = case
    inventory = parse_nodes(nodes)
    p = plan(load(path, overrides=list(overrides)), inventory)
    est = estimate(p, inventory=inventory)
    return p, inventory, est, svg(p, inventory, estimate=est), html(p, inventory, estimate=est)


class _Text(HTMLParser):
    """Every text node of a page outside <style>, and every title attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = False

    def handle_starttag(self, tag, attrs):
        self._skip = tag == "style"
        self.parts += [v for k, v in attrs if k == "title" and v]

    def handle_endtag(self, tag):
        self._skip = False

    def handle_data(self, data):
        if not self._skip and data.strip() and not data.strip().endswith("…"):  # cut text: whole in its title
            self.parts.append(data.strip())


def svg_texts(text: str) -> list[str]:
    """Every text and hover title of a picture, except text cut to fit (`...…`): its element's title has it whole."""
    root = ET.fromstring(text)
    tags = (f"{SVG}text", f"{SVG}title")
    return [el.text for el in root.iter() if el.tag in tags and el.text and not el.text.endswith("…")]


def page_texts(page: str) -> list[str]:
    parser = _Text()
    parser.feed(page)
    return parser.parts


def held_sentences(p: Plan, est: Estimate) -> list[str]:
    """Text the plan and estimate hold whole: it must appear as written, and is then set aside."""
    origins = [s.origin for s in p.process_shapes.values() if s.origin]
    envs = [e.settings() for e in environments(p)]  # env vars and interpreters, as the config writes them
    return [*p.warnings, *p.notes, *origins, estimate_line(p, est), *settings_parts(p), *envs]


def names(p: Plan, inventory: Inventory) -> set[str]:
    """Every name the plan holds: components, groups, settings values, GPU models, robot fields."""
    out = set(p.components) | {g.name for g in p.groups}
    s = p.settings
    out |= {s.mode, s.strategy, s.env_strategy, s.dialect}
    out |= {n.gpu_model for n in inventory.nodes if n.gpu_model} | {n.accelerator_resource for n in inventory.nodes}
    out |= {v for values in p.topology.units.values() for v in values if v is not None}  # rack-0, nvl-3, ...
    for w in p.workers:
        out |= {word for f in _fields(w.hardware or {}) for word in [f, *WORD.findall(f)]}
    return {x.lower() for x in out}


def _fields(value: object) -> list[str]:
    """Keys and scalar values of a robot's hardware info, nested lists and mappings included."""
    if isinstance(value, dict):
        return [str(k) for k in value] + [x for v in value.values() for x in _fields(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _fields(v)]
    return [str(value)]


def numbers(p: Plan, inventory: Inventory, est: Estimate, picture: str) -> set[str]:
    """Every number the plan and the estimate hold, written as the views write them."""
    ints = {w.rank for w in p.workers} | {w.world_size for w in p.workers} | set(range(len(inventory) + 1))
    ints |= {g for n in inventory.nodes for g in range(n.num_gpus + 1)}  # GPU indices and counts
    ints |= {len(p.workers), len(p.warnings), len(p.notes), est.gpus_used, est.gpus_idle or 0}
    ints |= {p.settings.buffer_worker_num} | {f.workers for f in est.flows}
    ints |= {shape.devices_per_process for shape in p.process_shapes.values()}
    ints |= {shape.stride for shape in p.process_shapes.values()}
    counts: dict[str, int] = {}
    for w in p.workers:
        counts[w.component] = counts.get(w.component, 0) + 1
    ints |= set(counts.values()) | set(range(max(counts.values(), default=0) + 1))  # x64, "8 per node", ...
    out = {str(i) for i in ints} | {g.name for g in p.groups if g.name.isdigit()}  # a group named "4090"
    out |= {f"{c:g}" for c in [w.num_cpus for w in p.workers] + [b.num_cpus for b in p.bundles]}
    cpus: dict[int, float] = {}
    for b in p.bundles:
        cpus[b.node_rank] = cpus.get(b.node_rank, 0.0) + b.num_cpus
    out |= {f"{c:g}" for c in cpus.values()}
    out |= {f"{w.gpu_fraction:g}" for w in p.workers}  # GPUs requested by workers left to Ray
    amounts = [est.weight_sync_bytes, est.experience_bytes, est.model_bytes, est.batch_bytes]
    amounts += [f.bytes for f in est.flows] + [f.each for f in est.flows]
    amounts += [int(g.get("data-bytes")) for g in ET.fromstring(picture).iter(f"{SVG}g") if g.get("data-bytes")]
    for across in (est.crossing, est.crossing_lower_bound, est.crossing_per_step):
        amounts += list((across or {}).values())
    amounts += [int(x.split(":")[1]) for g in ET.fromstring(picture).iter(f"{SVG}g") for x in _across(g)]
    out |= {format_bytes(a) for a in amounts if a is not None}
    for w in p.workers:  # robot fields: addresses, camera serials, device paths
        out |= {n for f in _fields(w.hardware or {}) for n in re.findall(r"\d+(?:\.\d+)?", f)}
    return out


def _across(g: ET.Element) -> list[str]:
    """An arrow's `data-across` (`rack:14000000000 zone:...`): its bytes crossing racks and zones."""
    return (g.get("data-across") or "").split()


def shares(p: Plan) -> set[str]:
    """Each GPU's shares: its residents' fractions, and for a spanning process what the others leave."""
    held: dict[tuple, float] = {}
    spanning: dict[tuple, int] = {}
    for w in p.workers:
        for g in w.gpus:
            key = (w.node_rank, g)
            if w.visible_gpus is None:
                held[key] = held.get(key, 0.0) + w.gpu_fraction
            else:
                spanning[key] = spanning.get(key, 0) + 1
    out = {fraction_label(w.gpu_fraction) for w in p.workers if w.gpus and w.visible_gpus is None}
    out |= {fraction_label((1 - held.get(k, 0.0)) / n) for k, n in spanning.items()}
    out |= {fraction_label(1 - held.get(k, 0.0)) for k in spanning}
    return out - {""}


def check(texts: list[str], p: Plan, inventory: Inventory, est: Estimate, picture: str) -> None:
    text = " ".join(" ".join(texts).split())  # a sentence wrapped over several lines reads as one
    for sentence in sorted(held_sentences(p, est), key=len, reverse=True):  # "strategy x" is inside "env_strategy x"
        text = text.replace(sentence, " ")
    allowed_names, allowed_numbers, allowed_shares = names(p, inventory), numbers(p, inventory, est, picture), shares(p)
    for fraction in re.findall(r"(?<![\w.])\d+/\d+\b", text):
        assert fraction in allowed_shares, f"share {fraction} is not one the plan holds ({sorted(allowed_shares)})"
    text = re.sub(r"(?<![\w.])\d+/\d+\b", " ", text)
    for value, unit in NUMBER.findall(text):
        shown = f"{value} {unit}" if unit else value
        assert shown in allowed_numbers, f"{shown!r} is not a number the plan or the estimate holds"
    for source, target in re.findall(r"\(([\w-]+) -> ([\w-]+)\)", text):
        assert {source.lower(), target.lower()} <= set(p.components), f"{source} -> {target}: not the plan's"
    words = {w.lower() for w in WORD.findall(text)}
    unknown = {w for w in words - VOCABULARY - allowed_names if not _compound(w, allowed_names)}
    assert not unknown, f"words that are neither the views' own nor the plan's: {sorted(unknown)}"


def _compound(word: str, allowed: set[str]) -> bool:
    """`node_groups`-style and `x64` words: a name or a count with the views' punctuation around it."""
    stripped = word.strip(".,:;()'")
    if stripped in VOCABULARY or stripped in allowed:
        return True
    return bool(re.fullmatch(r"x\d+", stripped))


@pytest.fixture(params=CASES, ids=IDS, scope="module")
def built(request):
    return build(request.param)


def test_the_pictures_text_is_the_plans(built):
    p, inventory, est, picture, _ = built
    texts = svg_texts(picture)
    joined = "\n".join(texts)
    for sentence in [*p.warnings, *p.notes]:
        assert sentence in joined, f"missing from the picture: {sentence[:80]}"
    check(texts, p, inventory, est, picture)


def test_every_worker_on_a_gpu_shows_a_share_the_plan_gives_it(built):
    """A chip on a GPU: the whole GPU, or a share of it that the plan's accounting gives (never 0, never 0.00)."""
    p, _, _, picture, _ = built
    allowed = shares(p)
    for g in ET.fromstring(picture).iter(f"{SVG}g"):
        if g.get("class") != "worker" or "GPU" not in (g.get("data-where") or ""):
            continue
        title = g.find(f"{SVG}title").text
        share = re.search(r"GPU share (\S+) each", title)
        assert "whole GPU" in title or (share and share.group(1) in allowed), title


def test_the_pages_text_is_the_plans(built):
    p, inventory, est, picture, page = built
    texts = page_texts(page)
    for sentence in [*p.warnings, *p.notes, estimate_line(p, est)]:
        assert escape(sentence, quote=False) in page, f"missing from the page: {sentence[:80]}"
    check(texts, p, inventory, est, picture)


def test_the_pages_table_is_the_terminals(built):
    p, inventory, _, _, page = built
    for r in rows(node_runs(p, inventory)):
        cells = "".join(f"<td>{escape(c)}</td>" for c in (r.node, r.device, r.workers, r.cpus))
        assert cells.replace("<td>idle</td>", '<td><span class="idle">idle</span></td>') in page


def test_arrows_are_the_estimates_streams(built):
    _, _, est, picture, _ = built
    root = ET.fromstring(picture)
    arrows = [g for g in root.iter(f"{SVG}g") if g.get("class") == "flow"]
    drawn = sum(int(g.get("data-bytes")) for g in arrows)
    assert drawn == sum(f.bytes for f in est.flows if f.bytes), "every byte of the estimate is drawn, once"
    assert all(int(g.get("data-bytes")) > 0 for g in arrows), "no arrow for a stream of 0 bytes"
    if not est.weight_sync_bytes:
        assert not any(g.get("data-kind") == WEIGHTS for g in arrows)
    names = {"rack": "racks", "zone": "zones"}
    for level in set(names) & set(est.levels):  # every byte crossing a rack or zone is on an arrow that says so
        drawn_across = sum(int(x) for g in arrows for lv, x in (a.split(":") for a in _across(g)) if lv == level)
        assert drawn_across == (est.crossing or {}).get(level, 0) + est.crossing_per_step[level]
    for g in arrows:
        label = "".join(t.text or "" for t in g.iter(f"{SVG}text"))
        across = "".join(
            f" · {format_bytes(int(x))} across {names[level]}" for level, x in (a.split(":") for a in _across(g))
        )
        assert label == flow_label(g.get("data-kind"), int(g.get("data-bytes")), est) + across
