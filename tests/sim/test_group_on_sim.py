"""A WorkerGroup's user-facing edges on the simulated cluster: what the explorer's moves never do because only a
user's code does it (a rank out of range, a function run on every worker, a ref made outside the group, a kill
without restart that Ray does not carry out, a node group's env_configs overriding a rendezvous variable, a job
started from a Plan without its config)."""

from __future__ import annotations

import pytest
from tests.sim.pinned import PINNED, Echo, quiet  # noqa: F401 - quiet: an autouse fixture

from rlplace.errors import NodeLostError, PlacementError
from rlplace.lifecycle import EventKind
from rlplace.ray.job import Job
from rlplace.ray.nodes import inventory_from_nodes
from rlplace.sim.explore import case_of, node_labels, node_resources, simulated_job


def started(text: str = PINNED):
    sim, job = simulated_job(case_of(text, "2x4:A800"))
    return sim, job.start()


def test_a_group_names_itself_and_refuses_a_rank_it_does_not_have():
    _, job = started()
    train = job.launch("train", Echo)
    assert repr(train) == "WorkerGroup('train', 2 workers)"
    with pytest.raises(IndexError, match="train has ranks 0-1, not 2"):
        train.call("step", 1, rank=2)
    job.shutdown()


def test_a_function_runs_on_every_worker_through_ray_call():
    _, job = started()
    train = job.launch("train", Echo)
    assert train.call("__ray_call__", lambda worker, x: worker.step(x) + 1, 4, timeout_s=5) == [5, 5]
    job.shutdown()


def test_a_kill_ray_does_not_carry_out_in_time_is_a_placement_error():
    sim, job = started()
    train = job.launch("train", Echo)
    sim.advance(0.1)
    sim.weather.kill_s = 5.0  # the worker is stuck where a kill cannot reach it yet
    with pytest.raises(PlacementError, match=r"rlplace:train:0 was killed but is not dead after 1 s"):
        train.kill(0, timeout_s=1.0)
    job.shutdown()


def test_a_call_made_outside_the_group_is_not_re_run_after_a_takeover():
    sim, job = started()
    train = job.launch("train", Echo)
    shape = job.live.node(0)
    sim.add_node(node_resources(shape), node_labels(shape, None))  # a hot spare
    sim.behaviour.hang_method = "step"  # in flight when the node goes
    ref = sim.call(train.actors[0], "step", 7)  # the user's own call, not the group's
    sim.behaviour.hang_method = None
    sim.kill_node(str(job.live.node(1).node_id))  # train rank 0 runs on node 1
    with pytest.raises(NodeLostError, match="was not made through this WorkerGroup, so it cannot be re-run"):
        train.get([ref], "step", timeout_s=10)
    job.shutdown()


def test_an_env_config_that_sets_a_rendezvous_variable_loses_to_rlplace_and_says_so_once():
    text = PINNED.replace(
        '{label: a800, node_ranks: "0,1"}',
        '{label: a800, node_ranks: "0,1", env_configs: [{node_ranks: "0-1", env_vars: [{MASTER_PORT: "1234"}]}]}',
    )
    _, job = started(text)
    job.launch("train", Echo)
    said = [w for w in job.warnings if "sets MASTER_PORT=1234 in env_configs" in w]
    assert len(said) == 1 and "its value wins" in said[0]
    job.shutdown()


def test_a_job_started_from_a_plan_without_its_config_does_not_grow_back():
    case = case_of(PINNED + "  elastic: {train: {min: 1}}\n", "2x4:A800")
    sim, _ = simulated_job(case)
    job = Job(case.plan, inventory_from_nodes(sim.nodes()), name="sim", cluster=sim, timeout_s=5.0, replace_within_s=0)
    job.start()
    train = job.launch("train", Echo)
    lost = job.live.node(1)
    sim.kill_node(str(lost.node_id))
    sim.advance(3.0)  # no spare: train shrinks off node 1
    assert len(train) == 1
    sim.add_node(node_resources(lost), node_labels(lost, 1))  # node 1 back
    sim.advance(3.0)
    grown = [e for e in job.events if e.kind == EventKind.GROWN]
    assert grown and "nothing to grow back" in grown[-1].detail and len(train) == 1
    job.shutdown()


def test_a_shutdown_from_another_thread_while_a_growth_waits_for_gpus_ends_it_with_a_placement_error():
    """The user's other thread shuts the job down while a growth waits for GPUs another job holds: its placement
    group is removed under the wait, which says so (a PlacementError, not a wait to the timeout), and nothing of the
    job is left."""
    from rlplace.ray.labels import NODE_RANK_LABEL

    elastic = PINNED.replace('placement: "4,1"', 'placement: "0-1"') + "  elastic: {train: {max: 4}}\n"
    sim, job = simulated_job(case_of(elastic, "2x4:A800"))
    job.start()
    job.launch("train", Echo)
    held = sim.create_group([{"GPU": 2.0}], "another job's", [{NODE_RANK_LABEL: "0"}])  # node 0's GPUs 2 and 3
    sim._fault(sim.now() + 1.0, job.shutdown)
    with pytest.raises(PlacementError, match="the placement group for node 0 was removed while waiting"):
        job.resize("train", 4)
    assert job.state.closed and sim.now() < 1.0 + 5.0
    sim.remove_group(held)
    assert [g for g in sim.live_groups() if g is not held] == []
