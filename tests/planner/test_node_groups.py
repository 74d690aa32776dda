"""The node-groups dialect: hardware ranks, the `node` and `cluster` groups, placement-string arithmetic,
env configs and interpreters."""

from __future__ import annotations

import pytest
from tests.planner.specs import groups_spec, hetero, r

from rlplace.config import load
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.model import EnvConfigSpec, NodeGroupSpec
from rlplace.planner import plan


def test_hetero_example_plans_on_its_inventory_with_cpu_only_robot_nodes():
    p = plan(hetero(), parse_nodes("8x8:A800,8x8:RTX4090,2x0"))
    env = p.by_component("env")
    assert [(w.node_rank, w.gpus, w.hardware["robot_ip"], w.hardware["index"]) for w in env] == [
        (16, (), "10.10.10.1", 0),
        (17, (), "10.10.10.2", 1),
    ]
    assert [p.bundles[w.bundle].resources for w in env] == [
        {"rlplace/robot/franka/0": 1.0},
        {"rlplace/robot/franka/1": 1.0},
    ]
    agents = p.by_component("agent")
    assert [w.world_size for w in agents[:1]] == [400]
    assert [w.local_rank for w in agents[98:102]] == [98, 99, 0, 1]
    assert p.settings.strategy == "node_groups" and not p.settings.is_colocated


def test_hetero_example_on_too_few_nodes_names_group_and_ranks():
    with pytest.raises(PlanError, match="num_nodes is 18 but the inventory has 16"):
        plan(hetero(), parse_nodes("16x8"))


def test_resource_rank_beyond_the_group_names_what_it_has():
    spec = groups_spec({"actor": (("a",), [(r(0, 15), None)])}, [NodeGroupSpec("a", (0,))])
    with pytest.raises(PlanError, match=r"resource rank 8 in a, which has ranks 0-7 \(a: 8 GPUs on node 0\)"):
        plan(spec, parse_nodes("1x8"))


def test_a_range_error_names_the_line_of_the_placement_at_fault(tmp_path):
    """RLinf's `num_nodes: 1` then `rollout: 4-11` on one 8-GPU node: the error starts at the placement's line (5),
    as config problems do, and says that num_nodes (line 2) is why the cluster ends at node 0."""
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: 0-3\n    rollout: 4-11\n")
    with pytest.raises(PlanError) as e:
        plan(load(job), parse_nodes("1x8"))
    assert str(e.value) == (
        f"{job}:5: cluster.component_placement.rollout: placement asks for resource rank 8 in cluster, which has "
        f"ranks 0-7 (cluster: 8 GPUs on node 0; num_nodes: 1 at {job}:2 makes the cluster node 0)"
    )


def test_group_naming_missing_nodes():
    spec = groups_spec({"actor": (("a",), [(None, None)])}, [NodeGroupSpec("a", r(0, 3))])
    with pytest.raises(PlanError, match=r"node group a names node ranks 2-3, but the inventory has 2 node"):
        plan(spec, parse_nodes("2x8"))


def test_processes_share_a_gpu_when_they_outnumber_it():
    p = plan(groups_spec({"actor": (("cluster",), [(r(0, 3), r(0, 7))])}), parse_nodes("1x4"))
    assert [(w.rank, w.gpus, w.gpu_fraction) for w in p.by_component("actor")][:3] == [
        (0, (0,), 0.5),
        (1, (0,), 0.5),
        (2, (1,), 0.5),
    ]


def test_a_process_owns_several_gpus_of_one_node():
    p = plan(groups_spec({"actor": (("cluster",), [(r(0, 7), r(0, 1))])}), parse_nodes("2x4"))
    assert [(w.node_rank, w.gpus, w.gpu_fraction) for w in p.by_component("actor")] == [
        (0, (0, 1, 2, 3), 1.0),
        (1, (0, 1, 2, 3), 1.0),
    ]
    assert p.bundles[p.by_component("actor")[0].bundle].gpus == (0, 1, 2, 3)


def test_process_count_neither_multiple_nor_divisor_names_both_numbers():
    with pytest.raises(ConfigError, match="3 processes on 2 resources"):
        plan(groups_spec({"actor": (("cluster",), [(r(0, 1), r(0, 2))])}), parse_nodes("1x4"))


def test_process_ranks_must_be_numbered_once_each():
    spec = groups_spec({"agent": (("node",), [(r(0, 0), r(0, 1)), (r(1, 1), r(1, 2))])})
    with pytest.raises(ConfigError, match="process rank 1 appears twice"):
        plan(spec, parse_nodes("2x0"))


def test_segments_number_processes_on():
    p = plan(groups_spec({"actor": (("cluster",), [(r(0, 1), None), (r(4, 5), None)])}), parse_nodes("1x8"))
    assert [(w.rank, w.gpus) for w in p.by_component("actor")] == [(0, (0,)), (1, (1,)), (2, (4,)), (3, (5,))]


def test_colocated_components_share_gpus_and_set_is_colocated():
    spec = groups_spec({"actor": (("cluster",), [(None, None)]), "rollout": (("cluster",), [(None, None)])})
    p = plan(spec, parse_nodes("1x2"))
    assert all(w.gpu_fraction == 0.5 for w in p.workers)
    assert p.settings.is_colocated and p.settings.enable_offload


def test_groups_without_accelerators_count_nodes_and_a_list_of_groups_counts_across():
    groups = [NodeGroupSpec("cpu", (2, 3)), NodeGroupSpec("gpu", (0, 1))]
    p = plan(groups_spec({"agent": (("gpu", "cpu"), [(r(7, 9), None)])}, groups), parse_nodes("2x4,2x0"))
    assert [(w.node_rank, w.gpus, w.group) for w in p.by_component("agent")] == [
        (1, (3,), "gpu"),
        (2, (), "cpu"),
        (3, (), "cpu"),
    ]


def test_ignore_hardware_makes_a_gpu_group_count_nodes():
    groups = [NodeGroupSpec("g", (0, 1), ignore_hardware=True)]
    p = plan(groups_spec({"agent": (("g",), [(r(0, 1), None)])}, groups), parse_nodes("2x8"))
    assert [(w.node_rank, w.gpus) for w in p.by_component("agent")] == [(0, ()), (1, ())]


def test_workers_placed_through_node_or_cluster_get_no_group_env():
    """As RLinf: env_configs belong to their group; `node` and `cluster` have none, whatever groups hold the node."""
    groups = [
        NodeGroupSpec("a", (0,), env_configs=(EnvConfigSpec((0,), (("K", "1"),), "/py/a"),)),
        NodeGroupSpec("b", (1,), env_configs=(EnvConfigSpec((1,), (("K", "2"),)),)),
    ]
    comps = {"agent": (("node",), [(r(0, 1), None)]), "actor": (("cluster",), [(r(0, 15), None)])}
    p = plan(groups_spec(comps, groups), parse_nodes("2x8"))
    assert {(w.component, str(w.env_vars), w.python) for w in p.workers} == {
        ("agent", "{}", None),
        ("actor", "{}", None),
    }


def test_a_worker_gets_only_the_env_of_the_group_it_was_placed_through():
    """Two groups on one node may set the same variable differently: each worker gets its own group's value."""
    groups = [
        NodeGroupSpec("a", (0,), env_configs=(EnvConfigSpec((0,), (("K", "1"),), "/py/a"),)),
        NodeGroupSpec("b", (0,), ignore_hardware=True, env_configs=(EnvConfigSpec((0,), (("K", "2"),)),)),
    ]
    comps = {"actor": (("a",), [(r(0, 1), None)]), "agent": (("b",), [((0,), r(0, 1))])}
    p = plan(groups_spec(comps, groups), parse_nodes("1x2"))
    assert [(w.component, w.env_vars, w.python) for w in p.workers] == [
        ("actor", {"K": "1"}, "/py/a"),
        ("actor", {"K": "1"}, "/py/a"),
        ("agent", {"K": "2"}, None),
        ("agent", {"K": "2"}, None),
    ]
