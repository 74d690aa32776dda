"""Accelerators other than GPUs on Ray: read from the live node, reserved and requested under their name."""

from __future__ import annotations

import sys

import pytest
import ray
from ray import cloudpickle
from ray_workers import Probe
from tests.ray_helpers import wait_until_dead

from rlplace.model import ComponentSpec, JobSpec, NodeGroupSpec, Placement, PlacementSettings, Segment
from rlplace.plan import Bundle, Worker
from rlplace.planner import plan
from rlplace.ray.labels import NODE_RANK_LABEL
from rlplace.ray.launch import actor_options
from rlplace.ray.nodes import accelerator_of, inventory_from_nodes, live_inventory
from rlplace.ray.reserve import bundle_resources

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # NpuProbe runs in the workers


def _raw(rank: int, resources: dict) -> dict:
    return {
        "Alive": True,
        "NodeID": f"id{rank}",
        "NodeManagerAddress": f"10.0.0.{rank}",
        "Labels": {NODE_RANK_LABEL: str(rank)},
        "Resources": {"CPU": 8.0, "memory": 1.0, **resources},
    }


def test_the_live_inventory_counts_a_nodes_npus_and_names_them():
    inv = inventory_from_nodes(
        [_raw(0, {"GPU": 4.0, "accelerator_type:A800": 1.0}), _raw(1, {"NPU": 8.0, "rlplace/robot/x/0": 1.0})]
    )
    assert [(n.num_gpus, n.accelerator_resource) for n in inv.nodes] == [(4, "GPU"), (8, "NPU")]
    assert inv.node(1).resources == {"rlplace/robot/x/0": 1.0}  # the NPUs are the accelerator, not custom hardware
    assert accelerator_of(inv, 1) == "NPU" and accelerator_of(inv, None) == "GPU"  # mixed: GPU for unpinned
    npu_only = inventory_from_nodes([_raw(0, {"NPU": 8.0}), _raw(1, {})])
    assert accelerator_of(npu_only, None) == "NPU"


def test_bundles_and_actor_options_request_the_accelerator_by_name():
    bundle = Bundle(0, 0, (0, 1), 2.0, {}, "g", "NPU")
    assert bundle_resources(bundle) == {"NPU": 2.0, "CPU": 2.0}
    assert bundle_resources(Bundle(0, 0, (0,), 1.0), "HPU") == {"HPU": 1.0, "CPU": 1.0}  # the live node's name wins
    w = Worker("actor", 0, 1, 0, (0,), 0.5, 1.0, "g", 0)
    opts = actor_options(w, namespace="n", scheduling_strategy=None, accelerator="NPU")
    assert (opts["num_gpus"], opts["resources"]) == (0, {"NPU": 0.5})
    opts = actor_options(w, namespace="n", scheduling_strategy=None, options={"resources": {"x": 1}}, accelerator="NPU")
    assert opts["resources"] == {"x": 1, "NPU": 0.5}
    assert "resources" not in actor_options(w, namespace="n", scheduling_strategy=None)


class NpuProbe:
    def ids(self) -> dict:
        return {k: list(v) for k, v in ray.get_runtime_context().get_accelerator_ids().items() if v}


@pytest.fixture
def npu_node(ray_cluster):
    """A fifth node (rank 4) with 2 NPUs, added for one test and removed after it; the session's nodes stay."""
    node = ray_cluster.cluster.add_node(
        num_cpus=2, resources={"NPU": 2.0}, labels={NODE_RANK_LABEL: "4"}, object_store_memory=100 * 1024 * 1024
    )
    ray_cluster.cluster.wait_for_nodes()
    try:
        yield node
    finally:
        ray_cluster.cluster.remove_node(node)
        assert not wait_until_dead([node.node_id]) and len(live_inventory()) == 4


@pytest.mark.ray
def test_workers_on_npus_get_npus_from_ray(ray_cluster, npu_node):
    """About 5 s: a raylet is started and stopped for it."""
    live = live_inventory()
    assert (live.node(4).num_gpus, live.node(4).accelerator_resource) == (2, "NPU")
    spec = JobSpec(
        "node_groups",
        PlacementSettings(mode="manual"),
        (ComponentSpec("actor", Placement(("npus",), (Segment((0, 1)),))),),
        (NodeGroupSpec("npus", (4,)),),
    )
    p = plan(spec, live)
    assert {(b.node_rank, b.accelerator) for b in p.bundles} == {(4, "NPU")}
    with rlplace_connect(p, "npu") as job:
        group = job.launch("actor", NpuProbe)
        assert sorted(map(tuple, (ids["NPU"] for ids in group.call("ids")))) == [("0",), ("1",)]


def rlplace_connect(p, name: str):
    import rlplace

    return rlplace.connect(p, name=name, export_path=None, timeout_s=20)


@pytest.mark.ray
def test_a_plan_with_spanning_rollout_processes_reserves_each_gpu_once(ray_cluster):
    """Rollout TP 2 beside single-GPU actors on node 0's 4 GPUs: the reservation asks 4 GPUs there, not 6."""
    from rlplace.model import ProcessShape

    every = Placement(("g",), (Segment(None),))
    spec = JobSpec(
        "node_groups",
        PlacementSettings(mode="manual"),
        (
            ComponentSpec("actor", every),
            ComponentSpec("rollout", every, process_shape=ProcessShape(2, 2, "rollout TP 2 under actor TP 4")),
        ),
        (NodeGroupSpec("g", (0,)),),
    )
    p = plan(spec, ray_cluster.inventory)
    assert sum(b.num_gpus for b in p.bundles) == 4
    with rlplace_connect(p, "spanning") as job:
        assert len(job.placement_groups) == 1  # reserved within seconds: no infeasible 6-GPU demand on a 4-GPU node
        rollout = job.launch("rollout", Probe)
        job.verify()  # a spanning process asks Ray for no GPU: it is checked on the devices it sees
        seen = rollout.call("where")
    assert [s["cuda_visible_devices"] for s in seen] == ["0,2", "1,3"]
    assert [s["placement"].mismatch for s in seen] == [None, None]
