"""Robots from the node's environment, as RLinf enumerates them (Node.env), and processes owning several robots.

The scenarios are RLinf's own (its robot auto-config tests: robots made from ROBOT_IP, a single robot keeping the
whole camera list, a listed robot taking its slot, GimArm from CAN_INTERFACE, no robot without the identifying
variable, lists of the wrong length refused), written here against rlplace's planner; each outcome was checked
against RLinf's code on the same config and nodes (the agreement harness, DEVELOPERS.md).
"""

from __future__ import annotations

import pytest

from rlplace.config import load
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import Inventory, Node, load_inventory, parse_nodes, with_node_env
from rlplace.planner import plan
from rlplace.ray.labels import node_env, node_env_labels


def arm(hardware: str, placement: str = "0-1") -> str:
    return (
        "cluster:\n  num_nodes: 2\n  component_placement:\n    actor: 0-7\n"
        f"    env: {{node_group: arm, placement: '{placement}'}}\n"
        f"  node_groups:\n    - {{label: arm, node_ranks: 1, hardware: {hardware}}}\n"
    )


def nodes(**env: str) -> Inventory:
    return Inventory((Node(0, 8, "A100"), Node(1, 0, env=dict(env))))


def robots(config: str, inventory: Inventory) -> list[dict]:
    return [w.hardware for w in plan(load(config), inventory).by_component("env")]


def test_configs_empty_makes_one_robot_per_robot_ip_value_each_with_its_slot():
    got = robots(arm("{type: Franka, configs: []}"), nodes(ROBOT_IP="10.0.0.1,10.0.0.2", CAMERA_SERIALS="a,b"))
    assert [(r["robot_ip"], r["camera_serials"]) for r in got] == [("10.0.0.1", ["a"]), ("10.0.0.2", ["b"])]
    assert got[1]["from"] == {
        "robot_ip": "ROBOT_IP of node 1, value 2 of 2",
        "camera_serials": "CAMERA_SERIALS of node 1, value 2 of 2",
    }


def test_a_single_robot_keeps_the_whole_camera_list():
    (got,) = robots(arm("{type: Franka, configs: []}", "0"), nodes(ROBOT_IP="10.0.0.1", CAMERA_SERIALS="a,b"))
    assert got["robot_ip"] == "10.0.0.1" and got["camera_serials"] == ["a", "b"]


def test_made_robots_take_every_variable_of_their_type():
    env = nodes(ROBOT_IP="10.0.0.1", CAMERA_TYPE="zed", DISABLE_VALIDATE="true", GRIPPER_CONNECTION="/dev/ttyUSB0")
    (got,) = robots(arm("{type: Franka, configs: []}", "0"), env)
    assert (got["camera_type"], got["disable_validate"], got["gripper_connection"]) == ("zed", True, "/dev/ttyUSB0")


def test_a_listed_robot_without_an_ip_takes_its_slot_and_a_written_ip_stays():
    config = arm('{type: Franka, configs: [{node_rank: 1, robot_ip: "10.0.0.9"}, {node_rank: 1, camera_serials: [c]}]}')
    got = robots(config, nodes(ROBOT_IP="10.0.0.1,10.0.0.2", CAMERA_TYPE="zed,zed"))
    assert [r["robot_ip"] for r in got] == ["10.0.0.9", "10.0.0.2"]
    assert "from" not in got[0] and "camera_type" not in got[1]  # a key with a default is not filled for listed


def test_gimarm_from_can_interface_and_hardware_type_alone():
    got = robots(arm("{type: GimArm, configs: []}"), nodes(CAN_INTERFACE="can0,can1"))
    assert [r["can_interface"] for r in got] == ["can0", "can1"]
    alone = arm("{type: Franka, configs: []}").replace("hardware: {type: Franka, configs: []}", "hardware_type: Franka")
    assert [r["robot_ip"] for r in robots(alone, nodes(ROBOT_IP="10.0.0.1,10.0.0.2"))] == ["10.0.0.1", "10.0.0.2"]


def test_no_robot_without_the_identifying_variable_and_a_cluster_without_robots_plans():
    with pytest.raises(PlanError, match=r"has none .*one per comma-separated value of its ROBOT_IP.*--node-env 1:"):
        robots(arm("{type: Franka, configs: []}"), nodes(CAMERA_SERIALS="a,b"))
    unused = arm("{type: Franka, configs: []}").replace("    env: {node_group: arm, placement: '0-1'}\n", "")
    assert len(plan(load(unused), nodes()).workers) == 8


@pytest.mark.parametrize(
    ("hardware", "env", "message"),
    [
        (
            "{type: Franka, configs: [{node_rank: 1, camera_serials: [a]}, {node_rank: 1, camera_serials: [b]}]}",
            {"ROBOT_IP": "10.0.0.1"},
            "node 1's ROBOT_IP='10.0.0.1' holds 1 comma-separated value(s) for its 2 Franka robots (configs[0], "
            "configs[1]); RLinf refuses this at start",
        ),
        (
            "{type: Franka, configs: [{node_rank: 1, robot_ip: 10.0.0.1}, {node_rank: 1, robot_ip: 10.0.0.2}]}",
            {"ROBOT_IP": "10.0.0.1,10.0.0.2,10.0.0.3"},
            "holds 3 comma-separated value(s) for its 2 Franka robots",
        ),
        ("{type: Franka, configs: []}", {"ROBOT_IP": "10.0.0.1,10.0.0.2", "CAMERA_SERIALS": "a,b,c"}, "CAMERA_SERIALS"),
        (
            "{type: DualFranka, configs: []}",
            {"LEFT_ROBOT_IP": "10.0.0.1,10.0.0.2", "RIGHT_ROBOT_IP": "10.0.1.1"},
            "LEFT_ROBOT_IP holds 2, RIGHT_ROBOT_IP holds 1",
        ),
    ],
)
def test_node_env_lists_that_do_not_match_the_robots_are_refused_with_the_groups_line(hardware, env, message):
    with pytest.raises(PlanError) as e:
        robots(arm(hardware), nodes(**env))
    assert message in str(e.value) and "<string>" in str(e.value) and "cluster.node_groups[0].hardware" in str(e.value)


def test_a_node_in_no_robot_group_is_checked_too_as_rlinf_enumerates_every_node():
    config = "cluster:\n  num_nodes: 1\n  component_placement: {actor: 0-7}\n"
    with pytest.raises(PlanError, match="node 0's CAMERA_SERIALS='x,y,z' holds 3"):
        plan(load(config), Inventory((Node(0, 8, env={"ROBOT_IP": "10.0.0.1,10.0.0.2", "CAMERA_SERIALS": "x,y,z"}),)))


def test_equal_robot_configs_are_refused():
    with pytest.raises(ConfigError, match=r"the same as configs\[0\] \(RLinf refuses equal configs\)"):
        load(arm("{type: Franka, configs: [{node_rank: 1}, {node_rank: 1}]}"))


def test_one_process_owns_both_robots_and_reserves_both_in_its_bundle():
    result = plan(load(arm("{type: Franka, configs: []}", "0-1:0")), nodes(ROBOT_IP="10.0.0.1,10.0.0.2"))
    (w,) = result.by_component("env")
    assert [u["robot_ip"] for u in w.hardware_units] == ["10.0.0.1", "10.0.0.2"]
    assert w.hardware["type"] == "Franka" and w.hardware["node_rank"] == 1
    assert set(result.bundles[w.bundle].resources) == {"rlplace/robot/franka/0", "rlplace/robot/franka/1"}


def test_a_robot_already_held_stays_in_its_bundle_and_each_robot_is_reserved_once():
    config = arm("{type: Franka, configs: []}", "0-1").replace(
        "  node_groups:", "    ctl: {node_group: arm, placement: '0-1:0'}\n  node_groups:"
    )
    result = plan(load(config), nodes(ROBOT_IP="10.0.0.1,10.0.0.2"))
    reserved = [name for b in result.bundles for name in b.resources]
    assert sorted(reserved) == ["rlplace/robot/franka/0", "rlplace/robot/franka/1"]
    (ctl,) = result.by_component("ctl")
    assert len(ctl.hardware_units) == 2


def test_robots_of_two_nodes_in_one_process_are_refused():
    config = (
        "cluster:\n  num_nodes: 3\n  component_placement:\n    env: {node_group: arm, placement: '0-1:0'}\n"
        "  node_groups:\n    - {label: arm, node_ranks: 1-2, hardware: {type: Franka, configs: []}}\n"
    )
    inventory = Inventory(
        (Node(0, 8), Node(1, 0, env={"ROBOT_IP": "10.0.0.1"}), Node(2, 0, env={"ROBOT_IP": "10.0.0.2"}))
    )
    with pytest.raises(ConfigError, match="robots of one type on one node, as RLinf requires"):
        plan(load(config), inventory)


def test_node_env_flag_and_inventory_file(tmp_path):
    inventory = with_node_env(parse_nodes("1x8,2x0"), ["1-2:ROBOT_IP=10.0.0.1,10.0.0.2", "2:ROBOT_IP=10.0.0.3"])
    assert [n.env for n in inventory.nodes] == [{}, {"ROBOT_IP": "10.0.0.1,10.0.0.2"}, {"ROBOT_IP": "10.0.0.3"}]
    for bad in ("ROBOT_IP=1", "1:ROBOT_IP", "5:ROBOT_IP=1", "2-1:A=1", "1:1A=x"):
        with pytest.raises(ConfigError, match="--node-env"):
            with_node_env(parse_nodes("1x8,2x0"), [bad])
    path = tmp_path / "nodes.yaml"
    path.write_text("nodes:\n  - {gpus: 8}\n  - {count: 2, env: {ROBOT_IP: '10.0.0.1', SO101_PORT: 3}}\n")
    assert [n.env for n in load_inventory(str(path)).nodes] == [{}, *[{"ROBOT_IP": "10.0.0.1", "SO101_PORT": "3"}] * 2]
    path.write_text("nodes:\n  - {env: {ROBOT_IP: [a]}}\n")
    with pytest.raises(ConfigError, match="must be text"):
        load_inventory(str(path))


def test_the_labels_rlplace_start_publishes_read_back_as_the_nodes_env():
    environ = {"ROBOT_IP": ",".join(f"10.0.0.{i}" for i in range(12)), "CAN_INTERFACE": "can0", "HOME": "/root"}
    labels = node_env_labels(environ, ("ROBOT_IP", "CAN_INTERFACE", "CAMERA_SERIALS"))
    assert all(len(v) <= 63 and v.isalnum() for v in labels.values()) and len(labels) > 2
    assert node_env({**labels, "rlplace/node-rank": "1"}) == {k: environ[k] for k in ("ROBOT_IP", "CAN_INTERFACE")}
