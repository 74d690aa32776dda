"""The plan table as `rlplace plan` prints it: a row per run of alike nodes and devices, every device with
--detail, shares that add up per GPU, strides only where they apply, and output that is never wrapped or cut
when stdout is not a terminal."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
from tests.conftest import EXAMPLES, ROOT
from tests.viz.corpus import SPEC

from rlplace.cli import main
from rlplace.config import load
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.viz.collapse import GPU, node_runs, rows

sys.path.insert(0, str(ROOT / "bench"))
from plan_scale import workloads  # the 4,096-node workloads the planner is built for

HETERO = (str(EXAMPLES / "hetero-18-nodes.yaml"), "--nodes", "8x8:A800,8x8:RTX4090,2x0")
RLINF = ROOT / "tests" / "data" / "frameworks" / "rlinf" / "config"


def table_rows(out: str) -> list[list[str]]:
    """The cells of every body row of the printed table (the lines between the header rule and the bottom)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return [[c.strip() for c in line.strip("│").split("│")] for line in lines[start + 1 : end]]


def run(capsys, *argv: str) -> str:
    assert main(["plan", *argv]) == 0
    return capsys.readouterr().out


def test_the_18_node_example_prints_in_at_most_15_rows(capsys):
    body = table_rows(run(capsys, *HETERO))
    assert body == [
        ["nodes 0-3 (8x A800)", "GPU 0-7", "actor 0-31, one per GPU", "108 each"],
        ["", "CPU", "agent 0-399 (sees GPUs 0-7, reserves none, 100 per node)", ""],
        ["nodes 4-7 (8x A800)", "GPU 0-7", "actor 32-63, one per GPU", "8 each"],
        ["nodes 8-15 (8x RTX4090)", "GPU 0-7", "rollout 0-63, one per GPU", "8 each"],
        ["node 16 (CPU only)", "Franka 0 (10.10.10.1)", "env 0", "1"],
        ["node 17 (CPU only)", "Franka 1 (10.10.10.2)", "env 1", "1"],
    ]


def test_detail_prints_every_device_of_every_node(capsys):
    body = table_rows(run(capsys, *HETERO, "--detail"))
    assert body == table_rows(run(capsys, *HETERO, "--format", "table-full"))
    node = ""
    seen = set()
    for cells in body:
        node = cells[0].split(" (")[0] or node
        seen.add((node, cells[1]))
    gpus = {(f"node {n}", f"GPU {g}") for n in range(16) for g in range(8)}
    assert gpus <= seen and {("node 16", "Franka 0 (10.10.10.1)"), ("node 3", "CPU")} <= seen
    assert len(body) == 128 + 4 + 2  # every GPU, the four agent nodes' CPU rows, the two robots
    assert ["node 9 (8x RTX4090)", "GPU 0", "rollout 8", "8"] in body


@pytest.mark.parametrize("name", ["default", "disaggregate", "colocate", "manual", "node_groups"])
def test_a_4096_x_8_plan_prints_in_at_most_40_rows(name):
    inventory = parse_nodes("4096x8")
    runs = node_runs(plan(workloads(4096)[name], inventory), inventory)
    assert 1 <= len(rows(runs)) <= 40
    assert sum(len(r.ranks) for r in runs) == 4096


def test_colocated_4096_nodes_are_one_run_naming_every_rank():
    inventory = parse_nodes("4096x8")
    (run_,) = node_runs(plan(workloads(4096)["colocate"], inventory), inventory)
    assert [r.workers for r in rows((run_,))] == [
        "train 0-32767 (1/3), eval 0-32767 (1/3), env 0-32767 (1/3), one of each per GPU",
        "buffer 0-4095, one per node",
    ]


def test_a_permuted_placement_is_split_not_summarised_wrongly():
    """Ranks that do not follow the devices in order cannot be written `actor 0-7, one per GPU`."""
    from tests.viz.plans import settings, workers

    from rlplace.plan import Plan

    ws = workers("actor", [(0, (g,)) for g in (0, 1, 3, 2)])  # rank 2 on GPU 3, rank 3 on GPU 2
    out = [(r.device, r.workers) for r in rows(node_runs(Plan(tuple(ws), (), settings())))]
    assert out == [("GPU 0-1", "actor 0-1, one per GPU"), ("GPU 2", "actor 3"), ("GPU 3", "actor 2")]


def gpu_shares(text: str) -> list[str]:
    return re.findall(r"\((1/\d+)", text)


def test_a_spanning_process_holds_what_the_others_leave_of_each_gpu(capsys):
    """RLinf's collocated reasoning layout: actor and reward 1/3 each, rollout spans two GPUs and asks Ray for
    none; the GPU row says where the last third went, and per device the shares sum to 1."""
    out = run(capsys, str(RLINF / "grpo_collocated.yaml"), "--nodes", "2x8")
    assert table_rows(out)[:2] == [
        [
            "nodes 0-1 (8 GPUs)",
            "GPU 0-7",
            "actor 0-15 (1/3), reward 0-15 (1/3), one of each per GPU; the other 1/3 of each GPU: rollout "
            "(spans GPUs, its own row)",
            "20 each",
        ],
        [
            "",
            "GPU 0, 2 · 1, 3 · 4, 6 · 5, 7",
            "rollout 0-7 (1/3 of each of its GPUs, asks Ray for none), one per 2 GPUs",
            "",
        ],
    ]
    detail = table_rows(run(capsys, str(RLINF / "grpo_collocated.yaml"), "--nodes", "2x8", "--detail"))
    assert detail[0] == [
        "node 0 (8 GPUs)",
        "GPU 0",
        "actor 0 (1/3), rollout 0 (1/3, spans GPUs 0, 2, asks Ray for none), reward 0 (1/3)",
        "20",
    ]
    for cells in detail:
        assert sum(1 / int(s[2:]) for s in gpu_shares(cells[2])) == pytest.approx(1.0), cells


def test_every_gpu_of_the_spec_examples_is_fully_accounted():
    """Per device: the residents' shares and the labelled remainder sum to the whole GPU."""
    for example, nodes in SPEC:
        inventory = parse_nodes(nodes)
        for run_ in node_runs(plan(load(example), inventory), inventory, detail=True):
            for s in run_.slot_runs:
                if s.kind == GPU:
                    held = sum((r.share or 0.0) * r.per_slot for r in s.residents)
                    assert held + s.rest == pytest.approx(1.0), (example.name, run_.label, s)
                    assert s.rest == 0.0, "spec examples have no spanning process: nothing is left over"


def test_strides_are_printed_only_for_processes_of_several_gpus(capsys):
    out = run(capsys, str(RLINF / "grpo_collocated.yaml"), "--nodes", "2x8")
    assert "rollout: 8 workers, 2 shared GPUs each, stride 2 (from " in out
    one = run(capsys, str(RLINF / "grpo_collocated.yaml"), "actor.model.rollout_tp=1", "--nodes", "2x8")
    assert "stride" not in one and "rollout: 16 workers, 1/3 GPU each, 1 CPU each" in one


def test_the_table_shows_the_cpus_each_node_reserves_of_what_it_has(capsys, tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {count: 2, gpus: 4, cpus: 16}\n")
    out = run(capsys, str(EXAMPLES / "auto-colocate-device.yaml"), "--inventory", str(nodes))
    assert table_rows(out)[0] == [
        "node 0 (4 GPUs)",
        "GPU 0-1",
        "train 0-1 (1/3), eval 0-1 (1/3), env 0-1 (1/3), one of each per GPU",
        "7 of 16",
    ]
    assert ["node 1 (4 GPUs)", "GPU 0-3", "idle", "0 of 16"] in table_rows(out)


def piped(*argv: str, columns: str = "80") -> str:
    """`rlplace ...` with stdout a pipe (not a terminal) and COLUMNS=80, as a script or CI log would see it."""
    env = {"COLUMNS": columns, "PATH": str(pathlib.Path(sys.executable).parent)}
    proc = subprocess.run(
        [sys.executable, "-m", "rlplace.cli", *argv], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_piped_output_is_never_wrapped_mid_value_nor_cut():
    out = piped("plan", str(RLINF / "grpo_collocated.yaml"), "--nodes", "2x8")
    assert "…" not in out
    assert out.splitlines()[0] == (  # the RLinf config's own words: no strategies, no buffer shards it lacks
        "plan node groups (component_placement) · is_colocated true · enable_offload true · placement groups"
    )
    body = [line for line in out.splitlines() if line.startswith("│")]
    assert len(body) == 2 and all(line.endswith("│") for line in body), "one line per table row"
    compared = piped("plan", str(EXAMPLES / "auto-disaggregate.yaml"), "--nodes", "2x4", "--compare")
    assert "…" not in compared
    assert re.search(r"│ disaggregate │ yes +│ 2 +│ 6 +│ 2 +│ 14 GB +│ 256 MB +│", compared)
    assert "│ default      │ yes  │ 2     │ 6         │ 2         │ unknown (Ray schedules) │" in compared
