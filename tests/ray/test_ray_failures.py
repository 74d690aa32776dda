"""Never hang, leave nothing behind: infeasible, starved, bad interpreter, half-way failures, re-runs."""

from __future__ import annotations

import dataclasses
import time

import pytest
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray_plans import Row, pinned_plan
from ray_workers import Probe
from tests.ray_helpers import assert_gone, footprint, leftovers

import rlplace
from rlplace.errors import ConfigError, PlacementError, PlanError
from rlplace.inventory import Inventory
from rlplace.ray.job import Job

pytestmark = pytest.mark.ray


def assert_nothing_left():
    """No live placement group and no live actor of this driver's job (Job.shutdown waits for Ray)."""
    assert leftovers() == ([], [])


def test_plan_wanting_more_gpus_than_a_node_has_fails_at_once_naming_it(ray_cluster):
    plan = pinned_plan([Row("train", 0, (0,)), Row("rollout", 2, (0, 1, 2))])
    start = time.monotonic()
    with pytest.raises(PlacementError, match=r"node 2 \(2x RTX4090.*missing 1 GPU"):
        rlplace.connect(plan, timeout_s=30, export_path=None)
    assert time.monotonic() - start < 10
    assert_nothing_left()


def test_ray_infeasible_group_is_reported_within_seconds(ray_cluster):
    """The inventory the plan was checked against is stale (it claims 8 GPUs on node 2): Ray's verdict
    INFEASIBLE is caught at once and explained with the node as it really is."""
    live = ray_cluster.inventory
    stale = Inventory(tuple(dataclasses.replace(n, num_gpus=8) if n.rank == 2 else n for n in live.nodes))
    plan = pinned_plan([Row("train", 0, (0,)), Row("rollout", 2, (0, 1, 2, 3))])
    start = time.monotonic()
    with pytest.raises(PlacementError, match=r"node 2 .* missing 2 GPU"):
        Job(plan, stale, timeout_s=30).start()
    assert time.monotonic() - start < 10
    assert_nothing_left()


def test_config_too_big_for_the_cluster_is_a_plan_error(ray_cluster):
    config = {"cluster": {"train_worker_num": 9, "placement": {"mode": "auto", "strategy": "disaggregate"}}}
    start = time.monotonic()
    with pytest.raises(PlanError):
        rlplace.connect(config, timeout_s=30, export_path=None)
    assert time.monotonic() - start < 10
    assert_nothing_left()


def test_starved_group_fails_after_the_timeout_naming_who_holds_the_node(ray_cluster):
    other = placement_group(
        [{"GPU": 1.0}, {"GPU": 1.0}],
        name="someone-elses-rollout",
        bundle_label_selector=[{"rlplace/node-rank": "2"}] * 2,
    )
    try:
        assert other.wait(10)
        plan = pinned_plan([Row("train", 0, (0,)), Row("rollout", 2, (0,))])
        start = time.monotonic()
        with pytest.raises(PlacementError) as err:
            rlplace.connect(plan, timeout_s=2, export_path=None)
        assert 2 <= time.monotonic() - start < 10
        message = str(err.value)
        assert "node 2" in message and "missing 1 GPU" in message
        assert "placement group 'someone-elses-rollout'" in message and "holds 2 GPU" in message
        assert_nothing_left_but(other)
    finally:
        remove_placement_group(other)


def assert_nothing_left_but(other):
    groups, actors = leftovers()
    assert groups == ["someone-elses-rollout (CREATED)"] and actors == []


def test_missing_interpreter_fails_before_any_worker_starts(ray_cluster):
    plan = pinned_plan(
        [Row("train", 0, (0,)), Row("actor", 1, (0,), python="/opt/venv/openpi/bin/python3", env_vars={"A": "1"})]
    )
    with rlplace.connect(plan, timeout_s=20, export_path=None) as job:
        train = job.launch("train", Probe)
        start = time.monotonic()
        with pytest.raises(PlacementError, match=r"node 1 .*'/opt/venv/openpi/bin/python3' does not exist"):
            job.launch("actor", Probe)
        assert time.monotonic() - start < 10
        assert "actor" not in job.groups and len(train.call("pid")) == 1
    assert_nothing_left()  # the half-started job is gone too


def test_rerunning_the_same_config_gives_the_same_rank_to_node_map(ray_cluster, spec_examples):
    maps = []
    for _ in range(2):
        with rlplace.connect(spec_examples / "auto-disaggregate.yaml", timeout_s=20, export_path=None) as job:
            job.launch("train", Probe)
            job.launch("eval", Probe)
            maps.append(sorted((p.component, p.rank, p.node_id, p.gpus) for p in job.verify()))
    assert maps[0] == maps[1]
    assert_nothing_left()


def test_unknown_component_or_rank_is_a_config_error_naming_the_plan(ray_cluster):
    with rlplace.connect(pinned_plan([Row("train", 0, (0,))]), timeout_s=20, export_path=None) as job:
        with pytest.raises(ConfigError, match=r"'trian'.*not in the plan; planned: \['train'\]"):
            job.launch("trian", Probe)
        with pytest.raises(ConfigError, match=r"planned ranks: \[0\]"):
            job.worker("train", 3)
    assert_nothing_left()


def test_shutdown_is_idempotent_and_removes_the_groups(ray_cluster):
    job = rlplace.connect(pinned_plan([Row("train", 1, (1,)), Row("buffer", 1)]), timeout_s=20, export_path=None)
    job.launch("buffer", Probe)
    taken = footprint(job)
    job.shutdown()
    job.shutdown()
    assert taken.groups and taken.actors
    assert_gone(taken)
    with pytest.raises(PlacementError, match="shut down"):
        job.launch("train", Probe)
    assert_nothing_left()
    assert ray.is_initialized()  # the driver's connection is the caller's, not the job's


def test_two_jobs_with_the_same_components_need_their_own_namespaces(ray_cluster):
    plan = pinned_plan([Row("agent", 3)])
    with rlplace.connect(plan, timeout_s=20, export_path=None) as first:
        first.launch("agent", Probe)
        clash = pytest.raises(PlacementError, match=r"rlplace:agent:0 already run in Ray namespace .*name=")
        with rlplace.connect(plan, timeout_s=20, export_path=None) as second, clash:
            second.launch("agent", Probe)
        with rlplace.connect(plan, timeout_s=20, export_path=None, name="second-job") as named:
            assert named.launch("agent", Probe).placements()[0].actor_name == "rlplace:agent:0"
        assert first.groups["agent"].call("echo", 1) == [1]  # the first job's worker is untouched
    assert_nothing_left()
