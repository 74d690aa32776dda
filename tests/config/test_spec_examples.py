"""Every spec example (the tests' own copies) loads unchanged into the one model, as the planner expects."""

from __future__ import annotations

import pathlib

import pytest

from rlplace.config import load
from rlplace.model import Placement, Segment

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "spec_examples"
ALL = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def test_all_nine_examples_are_present():
    assert len(ALL) == 9


@pytest.mark.parametrize("name", ALL)
def test_example_loads(name):
    spec = load(EXAMPLES / name)
    assert spec.source == str(EXAMPLES / name)
    assert spec.components


def test_auto_disaggregate_keeps_unwritten_values_unset():
    spec = load(EXAMPLES / "auto-disaggregate.yaml")
    assert spec.dialect == "pools"
    assert (spec.settings.mode, spec.settings.strategy, spec.settings.env_strategy) == (
        "auto",
        "disaggregate",
        "default",
    )
    assert spec.settings.buffer_worker_num == "auto"
    assert spec.settings.is_colocated is None and spec.settings.enable_offload is None
    assert [(c.name, c.num_workers, c.placement) for c in spec.components] == [
        ("train", 2, None),
        ("eval", 2, None),
        ("env", None, None),
    ]


def test_offload_colocate_flags():
    s = load(EXAMPLES / "offload-colocate.yaml").settings
    assert (s.is_colocated, s.enable_offload, s.strategy, s.env_strategy) == (True, True, "colocate", "device-colocate")


def test_manual_global_pool_becomes_one_group_with_pool_global_ranges():
    spec = load(EXAMPLES / "manual-global-pool.yaml")
    (pool,) = spec.node_groups
    assert (pool.label, pool.node_ranks, pool.gpus_per_node, pool.node_ids) == (
        "global_pool",
        (0, 1, 2),
        (8, 8, 8),
        None,
    )
    assert spec.component("eval").placement == Placement(("global_pool",), (Segment(tuple(range(8, 16))),))
    assert spec.component("train").num_workers == 1 and spec.component("env").num_workers is None


def test_pools_without_node_ids_take_the_next_free_nodes():
    spec = load(EXAMPLES / "pools-mixed.yaml")
    assert [(g.label, g.node_ranks) for g in spec.node_groups] == [("train_pool", (0,)), ("rollout_pool", (1, 2))]
    assert spec.component("env").placement.segments[0].resources == tuple(range(16))


def test_hetero_example_normalises_groups_env_and_hardware():
    spec = load(EXAMPLES / "hetero-18-nodes.yaml")
    assert spec.dialect == "node_groups" and spec.num_nodes == 18
    assert [g.label for g in spec.node_groups] == ["a800", "4090", "franka"]
    a800 = spec.group("a800")
    (env,) = a800.env_configs
    assert env.node_ranks == tuple(range(8)) and env.env_vars == (("GLOO_SOCKET_IFNAME", "eth0"),)
    assert env.python == "/opt/venv/openpi/bin/python3"
    franka = spec.group("franka")
    assert franka.hardware_type == "Franka"
    assert [(u.node_rank, u.config["robot_ip"], u.config["camera_serials"]) for u in franka.hardware] == [
        (16, "10.10.10.1", ("322142001230", "322142001231")),
        (17, "10.10.10.2", ("322142001232", "322142001233")),
    ]
    assert spec.component("rollout").placement.groups == ("4090",)
    agent = spec.component("agent").placement
    assert agent == Placement(("node",), (Segment((0, 1), tuple(range(200))), Segment((2, 3), tuple(range(200, 400)))))
