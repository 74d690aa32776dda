"""The node-loss rules on plain data: which spare may take a lost node over, what counts as attached hardware,
spares left out of the rank rules, the raylet probe, the embedded cluster's --spare shapes."""

from __future__ import annotations

import socket

import pytest
from test_ray_inventory import raw

from rlplace.errors import ConfigError
from rlplace.inventory import Node
from rlplace.ray.failover.rules import hardware_of, spare_refusal
from rlplace.ray.local_raylets import simulated_inventory, simulated_spares
from rlplace.ray.nodes import inventory_from_nodes, spare_nodes
from rlplace.ray.ray_port import raylet_refuses

LOST = Node(rank=1, num_gpus=4, gpu_model="A800", num_cpus=8.0, node_id="lost", address="10.0.0.2")
DEMAND = {"GPU": 2.0, "CPU": 6.0}


def spare(gpus=4, model="A800", cpus=8.0, node_id="s1"):
    return Node(
        rank=-1, num_gpus=gpus, gpu_model=model if gpus else None, num_cpus=cpus, node_id=node_id, address="10.0.0.9"
    )


def test_a_spare_of_the_same_shape_may_take_over():
    assert spare_refusal(LOST, DEMAND, spare(), {"GPU": 4.0, "CPU": 8.0}) is None


@pytest.mark.parametrize(
    ("candidate", "free", "why"),
    [
        (spare(gpus=2), None, "spare 10.0.0.9 (id s1) has 2x A800, node 1 had 4x A800"),
        (spare(model="RTX4090"), None, "has 4x RTX4090, node 1 had 4x A800"),
        (spare(gpus=0), None, "has no GPU, node 1 had 4x A800"),
        (spare(cpus=4.0), None, "lacks 2 CPU of the 2 GPU, 6 CPU node 1 reserved"),
        (spare(), {"GPU": 1.0, "CPU": 8.0}, "is busy: 1 GPU of what node 1 reserved is held by others"),
    ],
)
def test_a_spare_that_does_not_match_is_refused_saying_what_it_lacks(candidate, free, why):
    assert why in spare_refusal(LOST, DEMAND, candidate, free)


def test_robots_and_other_attached_hardware_cannot_move():
    assert hardware_of({"GPU": 1.0, "CPU": 1.0, "rlplace/robot/franka/0": 1.0}, LOST) == ["rlplace/robot/franka/0"]
    assert hardware_of(DEMAND, LOST) == []


def test_spares_are_left_out_of_the_rank_rules_and_listed_apart():
    nodes = [raw("a", rank=0, gpus=4, model="A800", head=True), raw("b", rank=1, gpus=4, model="A800")]
    sp = raw("s", ip="10.0.0.9", gpus=4, model="A800")
    sp["Labels"]["rlplace/spare"] = "true"
    dead = raw("s0", ip="10.0.0.8", gpus=4, alive=False)
    dead["Labels"]["rlplace/spare"] = "true"
    assert [n.node_id for n in inventory_from_nodes([*nodes, sp, dead]).nodes] == ["a", "b"]
    assert [(n.node_id, n.rank, n.num_gpus, n.gpu_model) for n in spare_nodes([*nodes, sp, dead])] == [
        ("s", -1, 4, "A800")
    ]


def test_the_raylet_probe_tells_refused_from_listening():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert raylet_refuses("127.0.0.1", port) is False
    assert raylet_refuses("127.0.0.1", port) is True  # nothing listens there any more


def test_embedded_cluster_spares_by_count_or_shape():
    nodes = simulated_inventory("2x4:A800,1x2:RTX4090,1x0")
    assert [(n.num_gpus, n.gpu_model) for n in simulated_spares("2", nodes, like=2)] == [(2, "RTX4090")] * 2
    assert [(n.num_gpus, n.gpu_model) for n in simulated_spares("1", nodes)] == [(4, "A800")]
    assert [(n.num_gpus, n.gpu_model) for n in simulated_spares("1x2:RTX4090,1x0", nodes)] == [
        (2, "RTX4090"),
        (0, None),
    ]
    assert simulated_spares("0", nodes) == () and simulated_spares(None, nodes) == ()
    with pytest.raises(ConfigError, match="--spare: 'two' is neither a count"):
        simulated_spares("two", nodes)


def test_after_a_shrink_a_replacement_a_spare_of_the_lost_shape_or_the_next_rank_may_serve_the_job():
    from rlplace.ray.failover.rules import joiners

    live = inventory_from_nodes([raw("a", rank=0, gpus=4, model="A800", head=True), raw("b", "10.0.0.2", 4, 1, "A800")])
    spare_big = raw("s", "10.0.0.8", gpus=4, model="A800")
    spare_big["Labels"]["rlplace/spare"] = "true"
    spare_small = raw("t", "10.0.0.7", gpus=2, model="A800")
    spare_small["Labels"]["rlplace/spare"] = "true"
    serving = {"a", "b"}
    # rank 1 is gone: a spare of its shape serves it (the smaller one is not taken), and a node labelled 2 joins
    found = joiners([1], live, [raw("a"), spare_small, spare_big, raw("n", "10.0.0.5", 1, 2, "A800")], serving=serving)
    assert {r: (how, n.node_id, n.rank) for r, (how, n) in found.items()} == {
        1: ("spare", "s", 1),
        2: ("new node", "n", 2),
    }
    # a node started again with the lost rank comes first; nothing joins where nothing fits
    again = joiners([1], live, [spare_big, raw("r", "10.0.0.6", 4, 1, "A800")], serving=serving)
    assert {r: how for r, (how, _) in again.items()} == {1: "replacement"}
    assert joiners([1], live, [spare_small], serving=serving) == {}


def test_a_lost_node_tries_the_spares_of_its_rack_first_then_in_ip_order():
    from rlplace.ray.failover.rules import candidates

    lost = Node(rank=1, num_gpus=4, gpu_model="A800", num_cpus=8.0, node_id="lost", labels={"rack": "r1"})
    spares = []
    for node_id, ip, rack in (("other", "10.0.0.7", "r0"), ("mate", "10.0.0.9", "r1")):
        s = raw(node_id, ip, gpus=4, model="A800")
        s["Labels"].update({"rlplace/spare": "true", "rack": rack})
        spares.append(s)
    found = candidates(1, lost, spares, serving=set(), demand=DEMAND, free={}, refusals={})
    assert [n.node_id for _, n in found] == ["mate", "other"]  # IP order alone would take "other" first
    flat = candidates(1, lost, spares, serving=set(), demand=DEMAND, free={}, levels=(), refusals={})
    assert [n.node_id for _, n in flat] == ["other", "mate"]
