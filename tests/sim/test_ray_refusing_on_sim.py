"""What the job does when Ray's client raises or Ray goes away under it, on the simulated cluster with those answers
of the port replaced by errors. The simulated GCS never refuses a request (while it restarts, requests wait, as
measured on Ray 2.60), so the explorer does not make these: each is injected here, the way Ray raises it (a
malformed or refused placement group, a kill or removal of what is already gone, the debugging API failing, a
driver whose Ray was shut down)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.sim.pinned import PINNED, Echo, quiet  # noqa: F401 - quiet: an autouse fixture

from rlplace.errors import PlacementError
from rlplace.ray.labels import NODE_RANK_LABEL
from rlplace.sim.explore import case_of, node_labels, node_resources, simulated_job
from rlplace.sim.memory_port import SimCluster


def refuse(sim: SimCluster, name: str, times: int | None = None) -> list[str]:
    """Make `sim.<name>` raise as Ray's client does (`times` times, None: always); the calls it refused."""
    real: Callable[..., Any] = getattr(sim, name)
    refused: list[str] = []

    def raising(*args: Any, **kwargs: Any) -> Any:
        if times is None or len(refused) < times:
            refused.append(name)
            raise RuntimeError(f"Ray refused {name}")
        return real(*args, **kwargs)

    setattr(sim, name, raising)
    return refused


def test_shutdown_goes_on_when_ray_refuses_to_kill_and_to_remove_groups():
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    job.start()
    job.launch("train", Echo)
    kills, removals = refuse(sim, "kill"), refuse(sim, "remove_group")
    job.shutdown()  # what Ray refuses is logged; nothing raises, nothing waits past the job's bounds
    assert job.state.closed and kills and removals and sim.now() < 30


def test_a_lost_nodes_workers_ray_refuses_to_kill_do_not_stop_the_spare_taking_over():
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    job.start()
    train = job.launch("train", Echo)
    shape = job.live.node(0)
    sim.add_node(node_resources(shape), node_labels(shape, None))  # a hot spare
    kills = refuse(sim, "kill")  # the lost node's workers are dead already: Ray says so
    sim.kill_node(str(job.live.node(0).node_id))
    assert train.call("step", 3, timeout_s=30) == [3, 3] and kills
    job.shutdown()


def test_a_placement_group_ray_refuses_is_a_placement_error_naming_the_node():
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    refuse(sim, "create_group")
    with pytest.raises(PlacementError, match="Ray refused the placement group for node 0: Ray refused create_group"):
        job.start()
    assert job.state.closed and not sim.live_groups()


def test_a_reservation_out_of_time_is_explained_without_the_actor_table():
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    other = sim.driver("02000000")
    other.create_group([{"GPU": 4.0}], "someone else's", [{NODE_RANK_LABEL: "1"}])  # node 1's GPUs are taken
    refuse(sim, "actor_table")  # a debugging API: the explanation does without it
    with pytest.raises(PlacementError, match="still waiting when timeout_s ran out"):
        job.start()


def test_the_watcher_survives_a_look_that_raises_and_ends_the_job_when_ray_goes_away():
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    job.start()
    train = job.launch("train", Echo)
    refuse(sim, "nodes", times=1)
    sim.advance(1.0)  # the look that raised is logged; the next ones see the nodes again
    assert not job.state.closed and train.call("step", 1, timeout_s=5) == [1, 1]
    refuse(sim, "nodes")
    sim.connected = lambda: False  # the user's code shut Ray down under the job
    sim.advance(1.0)
    assert job.state.closed  # calls waiting on the watcher wake up and raise: nothing hangs on it
    job.shutdown()  # nothing left to ask Ray: it returns


@pytest.mark.parametrize("refused", ["run_on", "wait"])  # the no-op sent after the calls there; the look at it
def test_a_drain_whose_calls_cannot_be_awaited_still_moves_the_workers_before_the_deadline(refused):
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    job.start()
    train = job.launch("train", Echo)
    shape = job.live.node(0)
    sim.add_node(node_resources(shape), node_labels(shape, None))
    refusals = refuse(sim, refused, times=1)
    sim.drain_node(str(job.live.node(0).node_id), 10.0)
    sim.advance(5.0)
    assert refusals == [refused]
    assert [e.kind for e in job.events][-1] == "spare" and train.call("step", 2, timeout_s=5) == [2, 2]
    job.shutdown()


def test_a_shutdown_after_ray_was_shut_down_asks_ray_nothing():
    sim, job = simulated_job(case_of(PINNED, "2x4:A800"))
    job.start()
    job.launch("train", Echo)
    sim.connected = lambda: False  # atexit ran ray.shutdown() first, say
    kills = refuse(sim, "kill")
    job.shutdown()
    assert job.state.closed and not kills


ELASTIC = """
cluster:
  num_nodes: 2
  component_placement:
    train: {node_group: a800, placement: "0-1"}
  node_groups:
    - {label: a800, node_ranks: "0,1"}
  elastic: {train: {max: 4}}
"""


def test_a_growth_ray_refuses_to_start_is_a_placement_error_and_leaves_the_job_as_it_was():
    sim, job = simulated_job(case_of(ELASTIC, "2x4:A800"))
    job.start()
    train = job.launch("train", Echo)
    refuse(sim, "start_actor")  # Ray's client raising its own error, not rlplace's
    with pytest.raises(PlacementError, match=r"resizing train failed, nothing changed: Ray refused start_actor"):
        job.resize("train", 4)
    assert len(train.actors) == 2 and len(job.plan.by_component("train")) == 2
    assert train.call("step", 5, timeout_s=30) == [5, 5]
    job.shutdown()


def test_ctrl_c_during_a_growth_undoes_it_and_stays_a_keyboard_interrupt():
    sim, job = simulated_job(case_of(ELASTIC, "2x4:A800"))
    job.start()
    train = job.launch("train", Echo)

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    sim.start_actor = interrupted  # the user's Ctrl-C lands while the new workers start
    with pytest.raises(KeyboardInterrupt):
        job.resize("train", 4)
    assert len(train.actors) == 2 and len(job.plan.by_component("train")) == 2
    job.shutdown()
