"""The plan's topology on the session cluster: actors land on nodes whose rack labels match the plan, a node whose
live rack contradicts the plan is named at `connect`, and an elastic component grows in the rack of its workers.
(A lost node's spare in its own rack: tests/ray/test_ray_nodeloss.py.)

The module adds three ranked nodes of one A800 each, racks rA, rB, rA (ranks 4, 5, 6), to the session cluster once
and removes them at its end; the node group `racked` holds them in that order, so a topology-blind growth from
node 4 would take node 5 (rack rB), the next in group order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray_workers import Elastic
from tests.ray_helpers import Extra, leftovers

import rlplace
from rlplace.errors import PlacementError
from rlplace.inventory import Inventory
from rlplace.ray.nodes import live_inventory

pytestmark = pytest.mark.ray

RACKS = {4: "rA", 5: "rB", 6: "rA"}

JOB = """
cluster:
  num_nodes: 7
  component_placement:
    train: {{node_group: racked, placement: "{train}"}}
  node_groups:
    - {{label: racked, node_ranks: "4-6"}}
  elastic: {{train: {{min: 1, max: 3}}}}
"""


@pytest.fixture(scope="module")
def racks(ray_cluster: Any) -> Iterator[dict[int, str]]:
    """Nodes 4-6 in racks rA, rB, rA, for every test of the module; the session's four nodes again at its end."""
    nodes = Extra(ray_cluster.cluster)
    try:
        for rank, rack in RACKS.items():
            nodes.ranked(rank, labels={"rack": rack})
        yield RACKS
    finally:
        nodes.remove_all()
        assert len(live_inventory()) == 4, "the session cluster must be its four ranked nodes again"


def rack_of(node_id: str) -> str | None:
    return next(n["Labels"].get("rack") for n in ray.nodes() if n["NodeID"] == node_id)


def test_actors_land_on_nodes_whose_rack_is_the_planned_one(racks):
    with rlplace.connect(JOB.format(train="0-2"), export_path=None, name="topo-a") as job:
        assert [job.plan.topology.unit("rack", r) for r in (4, 5, 6)] == ["rA", "rB", "rA"]
        where = job.launch("train", Elastic).call("where")
        assert [(w["node"], rack_of(w["node_id"])) for w in where] == [(4, "rA"), (5, "rB"), (6, "rA")]
        assert [w["node_id"] for w in where] == [job.live.node(r).node_id for r in (4, 5, 6)]
    assert leftovers() == ([], [])


def test_a_node_whose_live_rack_contradicts_the_plan_is_named_at_connect(racks):
    live = live_inventory()
    moved = dataclasses.replace(live.node(5), labels={**live.node(5).labels, "rack": "rA"})
    planned_on = Inventory((*live.nodes[:5], moved, *live.nodes[6:]))  # the plan's inventory: node 5 in rack rA
    with pytest.raises(PlacementError) as err:
        rlplace.connect(JOB.format(train="0-1"), inventory=planned_on, export_path=None, name="topo-b")
    message = str(err.value)
    assert "the live cluster's topology contradicts the plan" in message
    assert (
        f"node 5 ({live.node(5).address}, id {live.node(5).node_id[:8]}): the plan has rack rA (label rack=rA), "
        in (message)
    )
    assert "the live node carries rack=rB" in message and "node 4" not in message
    assert "connect without inventory=" in message and "--rack" in message
    assert leftovers() == ([], [])


def test_an_elastic_component_grows_in_the_rack_of_its_workers(racks):
    with rlplace.connect(JOB.format(train="0"), export_path=None, name="topo-d") as job:
        train = job.launch("train", Elastic)
        up = job.resize("train", 2)
        assert [(r.rank, r.node_rank) for r in up.added] == [(1, 6)], "node 6 shares rack rA with node 4; 5 does not"
        assert [rack_of(w["node_id"]) for w in train.call("where")] == ["rA", "rA"]
    assert leftovers() == ([], [])
