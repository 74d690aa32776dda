"""The live inventory's rank rules and order, and the placement-failure explanations, on plain records."""

from __future__ import annotations

import pytest

from rlplace.errors import PlacementError
from rlplace.inventory import Node
from rlplace.ray import diagnose
from rlplace.ray.nodes import inventory_from_nodes, is_head


def raw(node_id, ip="10.0.0.1", gpus=0, rank=None, model=None, head=False, alive=True, **custom):
    labels = {"ray.io/node-id": node_id}
    if rank is not None:
        labels["rlplace/node-rank"] = str(rank)
    if model:
        labels["rlplace/accelerator"] = model
    resources = {"CPU": 8.0, "memory": 1e9, f"node:{ip}": 1.0, **custom}
    if gpus:
        resources["GPU"] = float(gpus)
    if head:
        resources["node:__internal_head__"] = 1.0
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": ip, "Resources": resources, "Labels": labels}


def test_rank_labels_order_the_nodes_and_fill_the_inventory():
    inv = inventory_from_nodes(
        [
            raw("c", rank=2, **{"rlplace/robot/franka/0": 1.0}),
            raw("a", rank=0, gpus=4, model="A800", head=True),
            raw("b", rank=1, gpus=2, model="RTX4090"),
        ]
    )
    assert [n.node_id for n in inv.nodes] == ["a", "b", "c"]
    assert (inv.node(0).num_gpus, inv.node(0).gpu_model, inv.node(0).num_cpus) == (4, "A800", 8.0)
    assert inv.node(2).resources == {"rlplace/robot/franka/0": 1.0}  # memory, node:ip are Ray's own
    assert inv.node(2).gpu_model is None


def test_dead_nodes_are_left_out():
    inv = inventory_from_nodes([raw("a", rank=0), raw("old", rank=1, alive=False), raw("b", rank=1)])
    assert [n.node_id for n in inv.nodes] == ["a", "b"]


def test_without_ranks_head_first_then_accelerator_then_ip():
    inv = inventory_from_nodes(
        [
            raw("cpu", ip="10.0.0.2"),
            raw("g2", ip="10.0.0.10", gpus=8, model="H100"),
            raw("g1", ip="10.0.0.9", gpus=8, model="H100"),
            raw("a", ip="10.0.0.20", gpus=8, model="A800"),
            raw("head", ip="10.0.0.30", head=True),
        ]
    )
    assert [n.node_id for n in inv.nodes] == ["head", "a", "g1", "g2", "cpu"]


def test_without_ranks_addresses_that_are_no_ip_come_after_the_ips_by_name_and_the_head_is_known():
    nodes = [raw("h2", ip="host-b"), raw("h1", ip="host-a"), raw("ip", ip="10.0.0.99"), raw("head", head=True)]
    assert [n.node_id for n in inventory_from_nodes(nodes).nodes] == ["head", "ip", "h1", "h2"]
    assert [is_head(n) for n in nodes] == [False, False, False, True]  # `rlplace drain` refuses to drain it


def test_some_nodes_without_rank_is_an_error_naming_them():
    with pytest.raises(PlacementError, match=r"1 of 2 nodes.*Without a rank: 10\.0\.0\.7"):
        inventory_from_nodes([raw("a", rank=0), raw("b", ip="10.0.0.7")])


def test_duplicate_rank_is_an_error_naming_both_nodes():
    with pytest.raises(PlacementError, match=r"node rank 0 is given to two nodes: .*id a.*id b"):
        inventory_from_nodes([raw("a", rank=0), raw("b", rank=0)])


def test_ranks_must_be_contiguous():
    with pytest.raises(PlacementError, match=r"contiguous from 0 to 1.*missing \[1\]"):
        inventory_from_nodes([raw("a", rank=0), raw("b", rank=2)])


def test_rank_label_must_be_a_number():
    with pytest.raises(PlacementError, match="'first' is not a node rank"):
        inventory_from_nodes([raw("a", rank="first")])


NODE = Node(rank=2, num_gpus=2, gpu_model="RTX4090", num_cpus=8.0, node_id="n2", address="10.0.0.3")


def test_infeasible_names_node_and_missing_resources():
    why = diagnose.infeasible(NODE, {"GPU": 3.0, "CPU": 1.0, "rlplace/robot/franka/0": 1.0})
    assert why.startswith("node 2 (2x RTX4090, 8 CPU, 10.0.0.3)")
    assert "missing 1 GPU, 1 rlplace/robot/franka/0" in why
    assert "--resources" in why  # how to advertise the missing hardware
    assert diagnose.infeasible(NODE, {"GPU": 2.0, "CPU": 8.0}) is None


def test_starved_names_who_holds_the_node():
    table = {
        "pgother00000002000000": {
            "name": "trainer-of-bob",
            "state": "CREATED",
            "bundles": {0: {"GPU": 1.0}, 1: {"GPU": 1.0, "CPU": 2.0}},
            "bundles_to_node_id": {0: "n2", 1: "n2"},
        },
        "pgelsewhere00000002000000": {
            "name": "",
            "state": "CREATED",
            "bundles": {0: {"GPU": 1.0}},
            "bundles_to_node_id": {0: "n9"},
        },
        "pgremoved0000000002000000": {"state": "REMOVED", "bundles": {}, "bundles_to_node_id": {}},
    }
    actors = [
        {
            "State": "ALIVE",
            "Name": "",
            "ActorClassName": "Sim",
            "Pid": 42,
            "JobID": "03000000",
            "Address": {"NodeID": "n2"},
        },
        {"State": "DEAD", "Name": "gone", "Address": {"NodeID": "n2"}},
    ]
    held = diagnose.holders("n2", table, actors)
    assert held == [
        "placement group 'trainer-of-bob' of job 02000000 holds 2 GPU, 2 CPU",
        "actor 'Sim' (pid 42, job 03000000)",
    ]
    msg = diagnose.starved(NODE, {"GPU": 2.0, "CPU": 1.0}, {"CPU": 6.0, "bundle_group_x": 1000.0}, held, 2.0)
    assert "node 2" in msg and "within 2.0 s" in msg and "missing 2 GPU of 2 GPU, 1 CPU" in msg
    assert "free now: 6 CPU)" in msg and "trainer-of-bob" in msg


@pytest.mark.ray
def test_live_inventory_reads_the_session_cluster_in_rank_order(ray_cluster):
    from rlplace.ray.nodes import live_inventory

    inv = live_inventory()
    assert [(n.rank, n.num_gpus, n.gpu_model) for n in inv.nodes] == [
        (0, 4, "A800"),
        (1, 4, "A800"),
        (2, 2, "RTX4090"),
        (3, 0, None),
    ]
    assert inv.node(3).resources == {"rlplace/robot/franka/0": 1.0, "rlplace/robot/franka/1": 1.0}
    assert all(n.num_cpus == 8.0 and n.node_id for n in inv.nodes)
