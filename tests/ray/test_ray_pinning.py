"""How workers are pinned when the cluster has no rank labels, and what happens when others hold GPUs."""

from __future__ import annotations

import dataclasses

import pytest
from ray.util.placement_group import placement_group, remove_placement_group
from ray_plans import Row, pinned_plan
from ray_workers import Probe

from rlplace.errors import PlacementError
from rlplace.inventory import Inventory
from rlplace.ray.job import Job
from rlplace.ray.labels import NODE_RANK_LABEL

pytestmark = pytest.mark.ray


def test_nodes_without_rank_labels_are_pinned_by_ray_node_id(ray_cluster):
    unlabelled = Inventory(
        tuple(
            dataclasses.replace(n, labels={k: v for k, v in n.labels.items() if k != NODE_RANK_LABEL})
            for n in ray_cluster.inventory.nodes
        )
    )
    with Job(pinned_plan([Row("train", 2, (1,)), Row("agent", 3)]), unlabelled, timeout_s=20).start() as job:
        job.launch("train", Probe)
        job.launch("agent", Probe)
        placed = {p.component: (p.node_id, p.gpus) for p in job.verify()}
    assert placed == {
        "train": (ray_cluster.inventory.node(2).node_id, (1,)),
        "agent": (ray_cluster.inventory.node(3).node_id, ()),
    }


def test_gpus_held_by_another_job_shift_the_index_and_verify_says_so(ray_cluster):
    other = placement_group([{"GPU": 1.0}], name="holds-gpu-0", bundle_label_selector=[{NODE_RANK_LABEL: "2"}])
    try:
        assert other.wait(10)
        with Job(pinned_plan([Row("train", 2, (0,))]), ray_cluster.inventory, timeout_s=20).start() as job:
            job.launch("train", Probe)
            with pytest.raises(PlacementError, match=r"rlplace:train:0: got GPUs \[1\], planned \[0\]"):
                job.verify()
            assert job.groups["train"].placements()[0].mismatch  # the worker knows it too
    finally:
        remove_placement_group(other)


def test_a_hole_held_by_another_job_is_a_warning_not_a_hang(ray_cluster):
    """The plan wants GPU 1 of node 2 only; GPU 0 (the hole) is busy, so the filler cannot hold it."""
    other = placement_group([{"GPU": 1.0}], name="holds-the-hole", bundle_label_selector=[{NODE_RANK_LABEL: "2"}])
    try:
        assert other.wait(10)
        with Job(pinned_plan([Row("train", 2, (1,))]), ray_cluster.inventory, timeout_s=20).start() as job:
            assert any("node 2: only 1 GPUs are free" in w and "GPUs [0] aside" in w for w in job.warnings), (
                job.warnings
            )
            job.launch("train", Probe)
            assert job.verify()[0].gpus == (1,)  # GPU 0 was taken, so Ray's lowest free GPU is the planned one
    finally:
        remove_placement_group(other)


def test_a_gpu_less_worker_that_could_see_every_gpu_is_reported(ray_cluster):
    """As on a node started by plain `ray start`: Ray leaves CUDA_VISIBLE_DEVICES unset for it."""
    plain_ray_start = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
    plan = pinned_plan([Row("buffer", 1, env_vars=plain_ray_start), Row("agent", 1)])
    with Job(plan, ray_cluster.inventory, timeout_s=20).start() as job:
        job.launch("buffer", Probe)
        job.launch("agent", Probe)
        with pytest.raises(PlacementError, match=r"rlplace:buffer:0: got no GPU but sees every GPU of its node"):
            job.verify()
        assert job.groups["agent"].placements()[0].sees_all_gpus is False  # started as `rlplace start` does
