"""The plan's topology on the live cluster, on plain data: what a bundle's selector carries besides the node's rank,
and the connect check that names a node whose live labels contradict the plan (it moved racks, lost its label)."""

from __future__ import annotations

import dataclasses

import pytest

from rlplace import planner
from rlplace.config import load
from rlplace.errors import PlacementError
from rlplace.inventory import Inventory, Node, parse_nodes
from rlplace.model import DEFAULT_TOPOLOGY, TopologyLevel
from rlplace.ray.local_raylets import node_args, simulated_inventory
from rlplace.ray.topology import check_live, job_levels, mismatches, selector_labels, unplanned

SPEC = load("cluster:\n  train_worker_num: 4\n  eval_worker_num: 4\n  placement: {strategy: disaggregate}\n")


def live(nodes: Inventory, **changed: dict[str, str]) -> Inventory:
    """`nodes` as a live cluster (ids, addresses), node `n<rank>`'s labels replaced by `changed["n<rank>"]`."""
    return Inventory(
        tuple(
            dataclasses.replace(
                n, node_id=f"id{n.rank:06d}", address=f"10.0.0.{n.rank}", labels=changed.get(f"n{n.rank}", n.labels)
            )
            for n in nodes.nodes
        )
    )


def test_a_bundle_selects_the_topology_labels_the_node_carries_one_per_level():
    node = Node(0, 4, "H100", labels={"ray.io/gpu-domain": "nvl-3", "rack": "r1", "rlplace/node-rank": "0"})
    assert selector_labels(DEFAULT_TOPOLOGY, node) == {"ray.io/gpu-domain": "nvl-3", "rack": "r1"}
    both = Node(0, labels={"nvlink-domain": "a", "ray.io/gpu-domain": "b"})  # the first key wins, as when planned
    assert selector_labels(DEFAULT_TOPOLOGY, both) == {"nvlink-domain": "a"}
    assert selector_labels(DEFAULT_TOPOLOGY, Node(0, 4, "H100")) == {}
    renamed = (TopologyLevel("rack", ("topology.kubernetes.io/rack",)),)
    assert selector_labels(renamed, Node(0, labels={"topology.kubernetes.io/rack": "r9", "rack": "x"})) == {
        "topology.kubernetes.io/rack": "r9"
    }


def test_the_levels_come_from_the_config_else_the_plan_else_the_defaults():
    plan = planner.plan(SPEC, parse_nodes("4x4/rack=2"))
    assert job_levels(SPEC, plan) == SPEC.topology
    assert job_levels(None, plan) == (TopologyLevel("rack", ("rack",)),)
    assert job_levels(None, dataclasses.replace(plan, topology=type(plan.topology)())) == DEFAULT_TOPOLOGY


def test_a_live_cluster_labelled_as_planned_passes():
    nodes = parse_nodes("4x4/rack=2")
    plan = planner.plan(SPEC, nodes)
    assert mismatches(plan, live(nodes)) == []
    check_live(plan, live(nodes))


def test_a_node_that_moved_racks_or_lost_its_label_is_named_with_what_to_do():
    nodes = parse_nodes("4x4/rack=2")
    plan = planner.plan(SPEC, nodes)
    with pytest.raises(PlacementError) as err:
        check_live(plan, live(nodes, n1={"rack": "rack-1"}, n2={}))
    message = str(err.value)
    assert "the live cluster's topology contradicts the plan" in message
    moved, lost = message.splitlines()[1:3]
    assert moved.strip() == (
        "node 1 (10.0.0.1, id id000001): the plan has rack rack-0 (label rack=rack-0), "
        "the live node carries rack=rack-1"
    )
    assert lost.strip() == (
        "node 2 (10.0.0.2, id id000002): the plan has rack rack-1 (label rack=rack-1), "
        "the live node carries no rack label (rack)"
    )
    assert "connect without inventory=" in message and "`rlplace start ... --rack ...`" in message


def test_a_node_the_plan_leaves_idle_may_differ_and_a_node_labelled_where_the_plan_had_none_is_named():
    nodes = parse_nodes("4x4/rack=2")
    plan = planner.plan(SPEC, nodes)
    assert 3 not in {w.node_rank for w in plan.workers}
    assert mismatches(plan, live(nodes, n3={"rack": "elsewhere"})) == []
    (m,) = mismatches(plan, live(nodes, n0={}, n1={"rack": "rack-0"}, n2={"rack": "rack-1", "nvlink-domain": "d"}))
    assert str(m).endswith("the plan has rack rack-0 (label rack=rack-0), the live node carries no rack label (rack)")
    blind = planner.plan(SPEC, parse_nodes("4x4"))  # no node carried a rack: nothing to contradict
    assert mismatches(blind, live(nodes)) == []


def test_a_simulated_node_carries_its_declared_racks_and_domains_but_no_zone_ray_keeps_that_key():
    node = simulated_inventory("4x4/nvlink_domain=2/rack=2/zone=4").node(3)
    assert node.labels["ray.io/availability-zone"] == "zone-0"
    labels = node_args(node)["labels"]
    assert labels == {
        "nvlink-domain": "nvl-1",
        "rack": "rack-1",
        "rlplace/node-rank": "3",
        "rlplace/accelerator": "simulated",
        "rlplace/simulated": "true",
    }


def test_a_plan_blind_to_racks_the_live_nodes_carry_is_warned_about():
    blind = planner.plan(SPEC, parse_nodes("4x4"))
    (warning,) = unplanned(blind, live(parse_nodes("4x4/rack=2")), DEFAULT_TOPOLOGY)
    assert warning.startswith("topology: the plan was made without rack labels (rack), but 4 of the live cluster's 4")
    assert "connect without inventory=" in warning
    racked = planner.plan(SPEC, parse_nodes("4x4/rack=2"))
    assert unplanned(racked, live(parse_nodes("4x4/rack=2")), DEFAULT_TOPOLOGY) == []
