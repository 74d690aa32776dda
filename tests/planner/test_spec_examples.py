"""Every row of tests/data/spec_examples/README.md, asserted on `rlplace plan --format json`, and the
round trip: an auto plan exported, re-planned in manual mode, gives the same placement."""

from __future__ import annotations

import collections
import json

import pytest
import yaml
from tests.conftest import EXAMPLES

from rlplace.cli import main
from rlplace.config import load
from rlplace.inventory import parse_nodes
from rlplace.planner import export_resource_pool, plan


def plan_json(capsys, name: str, nodes: str) -> dict:
    assert main(["plan", str(EXAMPLES / name), "--nodes", nodes, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def by(p: dict, component: str) -> list[dict]:
    return sorted((w for w in p["workers"] if w["component"] == component), key=lambda w: w["rank"])


def at(ws: list[dict]) -> list[tuple]:
    return [(w["node_rank"], w["gpus"]) for w in ws]


def nodes_of(ws: list[dict]) -> list:
    return sorted({w["node_rank"] for w in ws})


def slots(ws: list[dict]) -> collections.Counter:
    return collections.Counter((w["node_rank"], tuple(w["gpus"])) for w in ws)


def test_json_contract_fields(capsys):
    p = plan_json(capsys, "auto-disaggregate.yaml", "2x4")
    assert set(p) >= {"workers", "warnings", "settings"}
    assert set(p["settings"]) >= {"strategy", "env_strategy", "is_colocated", "enable_offload", "buffer_worker_num"}
    need = {"component", "rank", "node_rank", "gpus", "gpu_fraction", "group", "env_vars", "python", "hardware"}
    assert all(need <= set(w) for w in p["workers"])


def test_auto_disaggregate(capsys):
    p = plan_json(capsys, "auto-disaggregate.yaml", "2x4")
    train, ev, env, buf = by(p, "train"), by(p, "eval"), by(p, "env"), by(p, "buffer")
    assert (len(train), len(ev), len(env)) == (2, 2, 2)
    assert nodes_of(train) == [0] and nodes_of(ev + env) == [1]
    assert at(buf) == [(0, [])]
    assert {w["group"] for w in train} == {"train_pool"} and {w["group"] for w in ev + env} == {"rollout_pool"}


def test_auto_default(capsys):
    p = plan_json(capsys, "auto-default.yaml", "2x4")
    assert p["uses_placement_groups"] is False and p["bundles"] == []
    assert all(w["node_rank"] is None and w["gpus"] == [] for c in ("train", "eval", "env") for w in by(p, c))
    assert at(by(p, "buffer")) == [(0, []), (1, [])]


def test_auto_colocate_device(capsys):
    p = plan_json(capsys, "auto-colocate-device.yaml", "2x4")
    train, ev, env = by(p, "train"), by(p, "eval"), by(p, "env")
    assert at(train) == at(ev) == at(env) == [(0, [0]), (0, [1])]
    assert all(abs(w["gpu_fraction"] - 1 / 3) < 1e-9 for w in train + ev + env)
    assert at(by(p, "buffer")) == [(0, [])]


def test_manual_global_pool(capsys):
    p = plan_json(capsys, "manual-global-pool.yaml", "3x8")
    assert at(by(p, "train")) == [(0, [0])]
    assert at(by(p, "eval")) == [(1, [0])]
    assert at(by(p, "env")) == [(2, [0])]
    assert at(by(p, "buffer")) == [(0, [])]
    assert len(p["warnings"]) == 3
    assert any("node 0 GPUs 1-7" in w and "train_worker_num: 8" in w and '"0"' in w for w in p["warnings"])
    assert any("node 2 GPUs 1-7" in w and "env_worker_num: 8" in w for w in p["warnings"])


def test_pools_all_colocated(capsys):
    p = plan_json(capsys, "pools-all-colocated.yaml", "3x8")
    for c in ("train", "eval", "env"):
        ws = by(p, c)
        assert len(ws) == 24 and len(slots(ws)) == 24
        assert all(abs(w["gpu_fraction"] - 1 / 3) < 1e-9 for w in ws)
    assert at(by(p, "buffer")) == [(0, []), (1, []), (2, [])]
    assert p["settings"]["is_colocated"] is True and p["settings"]["enable_offload"] is True


def test_pools_fully_disaggregated(capsys):
    p = plan_json(capsys, "pools-fully-disaggregated.yaml", "3x8")
    assert [(c, nodes_of(by(p, c)), len(by(p, c))) for c in ("train", "eval", "env")] == [
        ("train", [0], 8),
        ("eval", [1], 8),
        ("env", [2], 8),
    ]
    assert at(by(p, "buffer")) == [(0, [])]
    assert p["warnings"] == []


def test_pools_mixed(capsys):
    p = plan_json(capsys, "pools-mixed.yaml", "3x8")
    ev, env = by(p, "eval"), by(p, "env")
    assert nodes_of(by(p, "train")) == [0] and len(by(p, "train")) == 8
    assert len(ev) == len(env) == 16 and nodes_of(ev) == nodes_of(env) == [1, 2]
    assert slots(ev) == slots(env) and len(slots(ev)) == 16
    assert all(w["gpu_fraction"] == 0.5 for w in ev + env)
    assert at(by(p, "buffer")) == [(0, [])]


def test_offload_colocate(capsys):
    p = plan_json(capsys, "offload-colocate.yaml", "1x8")
    ws = by(p, "train") + by(p, "eval") + by(p, "env")
    assert at(ws) == [(0, [0])] * 3 and all(abs(w["gpu_fraction"] - 1 / 3) < 1e-9 for w in ws)
    assert p["settings"]["enable_offload"] is True and p["settings"]["is_colocated"] is True


def test_hetero_18_nodes(capsys):
    p = plan_json(capsys, "hetero-18-nodes.yaml", "8x8:A800,8x8:RTX4090,2x0")
    actor, rollout, env, agent = by(p, "actor"), by(p, "rollout"), by(p, "env"), by(p, "agent")
    assert (len(actor), len(rollout), len(env), len(agent)) == (64, 64, 2, 400)
    for w in actor:
        assert (w["node_rank"], w["gpus"]) == (w["rank"] // 8, [w["rank"] % 8])
        assert w["env_vars"] == {"GLOO_SOCKET_IFNAME": "eth0"} and w["python"] == "/opt/venv/openpi/bin/python3"
    for w in rollout:
        assert (w["node_rank"], w["gpus"]) == (8 + w["rank"] // 8, [w["rank"] % 8])
        assert w["env_vars"] == {"GLOO_SOCKET_IFNAME": "eth1"} and w["python"] is None
    assert [w["node_rank"] for w in env] == [16, 17]
    assert env[0]["hardware"]["robot_ip"] == "10.10.10.1"
    assert env[0]["hardware"]["camera_serials"] == ["322142001230", "322142001231"]
    assert env[1]["hardware"]["robot_ip"] == "10.10.10.2" and env[1]["hardware"]["node_rank"] == 17
    assert p["bundles"][env[0]["bundle"]]["resources"] == {"rlplace/robot/franka/0": 1.0}
    assert all(w["node_rank"] == w["rank"] // 100 and w["gpus"] == [] for w in agent)
    # agents are placed through `node`: no group's env (as RLinf), and they see their node's GPUs unreserved
    assert all(w["env_vars"] == {} and w["python"] is None for w in agent)
    assert all(w["sees_node_gpus"] and w["visible_gpus"] == list(range(8)) for w in agent)
    assert all(w["sees_node_gpus"] is False and w["visible_gpus"] is None for w in actor + rollout)
    # the robots' nodes have no GPU: env workers see none
    assert all(w["sees_node_gpus"] is False and w["visible_gpus"] is None for w in env)


AUTO = [
    ("auto-disaggregate.yaml", "2x4"),
    ("auto-colocate-device.yaml", "2x4"),
    ("offload-colocate.yaml", "1x8"),
    ("auto-disaggregate.yaml", "1x8"),  # no disjoint nodes: one pool, separate GPUs
    ("auto-colocate-device.yaml", "1x2,1x4"),  # nodes of different GPU counts: node_ids + num_gpus list
]


def placement(p) -> list[tuple]:
    return [(w.component, w.rank, w.node_rank, w.gpus, w.gpu_fraction, w.group, w.bundle) for w in p.workers]


@pytest.mark.parametrize(("name", "nodes"), AUTO)
def test_export_then_manual_replan_gives_the_same_placement(name, nodes, tmp_path):
    inventory = parse_nodes(nodes)
    auto_plan = plan(load(EXAMPLES / name), inventory)
    out = tmp_path / "resource_pool_auto.yaml"
    assert main(["plan", str(EXAMPLES / name), "--nodes", nodes, "--export", str(out), "--format", "json"]) == 0
    exported = yaml.safe_load(out.read_text())
    assert exported == export_resource_pool(auto_plan)
    config = yaml.safe_load((EXAMPLES / name).read_text())
    config["cluster"]["placement"] = {"mode": "manual"}
    config["resource_pool"] = exported["resource_pool"]
    manual_plan = plan(load(config), inventory)
    assert placement(manual_plan) == placement(auto_plan)
    assert manual_plan.bundles == auto_plan.bundles
    assert manual_plan.settings.buffer_worker_num == auto_plan.settings.buffer_worker_num
    assert manual_plan.settings.is_colocated == auto_plan.settings.is_colocated
