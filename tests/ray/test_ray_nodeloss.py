"""Node loss on the session cluster: what only a real raylet's death shows (a spare takes over with the
training state, the spare of the lost node's rack, NodeLostError and `rlplace status` in time, robots that
cannot move, shutdown during a loss). The rest of failover runs on the simulated cluster, in milliseconds:
tests/sim/test_failover_on_sim.py (docs/ray.md, "The simulation").

The session cluster's four ranked nodes stay as they are: each test adds what it needs (a node of rank
4, spares, which carry no rank) and the `extra` fixture (tests/ray/conftest.py) removes whatever is still alive
at the end and waits until Ray agrees, so the live inventory is the four nodes again for the next test. Nodes are lost
abruptly (`remove_node(allow_graceful=False)`: the raylet and its workers are killed); the session
cluster's health checks notice within about 2-5 s.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
import ray
from ray.util.placement_group import placement_group_table
from ray_plans import Row, pinned_plan
from ray_workers import Stepper
from tests.ray_helpers import DETECT_S, Extra, leftovers, wait_declared

import rlplace
from rlplace.commands.status import render
from rlplace.errors import NodeLostError, PlacementError
from rlplace.ray.status import collect_all

pytestmark = pytest.mark.ray

ROBOT = "rlplace/robot/ur5/0"


def on_node_4(**row: Any) -> Any:
    """train rank 0 on node 0 GPU 1 (stays healthy), train rank 1 on node 4 GPU 0 (the one lost)."""
    return pinned_plan([Row("train", 0, (1,)), Row("train", 4, (0,), **row)])


def events(job: Any) -> list[tuple[str, int]]:
    return [(e.kind, e.node_rank) for e in job.events]


def status(job: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """What `rlplace status` shows of this driver's job: node rows (node -> state) and worker rows by name."""
    me = ray.get_runtime_context().get_job_id()
    nodes, workers = collect_all()
    return {n.node: n.state for n in nodes if n.job in (me, "-")}, {w.name: w for w in workers if w.job == me}


@pytest.mark.slow
def test_a_spare_takes_over_a_lost_node_and_training_state_continues(extra, tmp_path):
    """About 12 s: two raylets start, one is lost, its worker comes back on the spare from its checkpoint."""
    lost = extra.ranked(4)
    spare = extra.spare()
    with rlplace.connect(on_node_4(), export_path=None, timeout_s=20) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        assert train.call("step") == [1, 1] and train.call("step") == [2, 2]
        in_flight = train.call_async("step", 3.0, rank=1)  # running on node 4 when it goes
        gone = extra.lose(lost)
        start = time.monotonic()
        assert train.call("step", rank=0) == 3  # the healthy node's worker is not held up
        assert time.monotonic() - start < 2
        assert train.get([in_flight], "step", ranks=[1]) == [3]  # re-run on the spare, from the checkpoint
        back = time.monotonic() - gone
        assert back < DETECT_S + 5
        state = train.call("state", rank=1)
        assert state["node_id"] == spare.node_id and state["replaced"] == ["spare 4"] and state["steps"] == 3
        p = state["placement"]
        assert (p.rank, p.node_rank, p.gpus, p.planned_gpus, p.mismatch) == (1, 4, (0,), (0,), None)
        assert state["cuda_visible_devices"] == "0"
        assert job.live.node(4).node_id == spare.node_id and job.node(4).address == job.live.node(4).address
        assert train.call("step") == [4, 4]
        nodes, workers = status(job)
        ip = spare.address.split(":")[0]
        assert nodes == {"node 4": "SPARE"}
        moved = workers["rlplace:train:1"]
        assert (moved.node, moved.state, moved.gpus) == (f"node 4 (spare {ip})", "ALIVE", "0") and moved.pid
        assert events(job) == [("lost", 4), ("spare", 4)]
        takeover = job.events[1]
        assert takeover.workers == ("rlplace:train:1",) and 0 < takeover.seconds < 10
        job.verify()
        live_groups = [pg for pg in placement_group_table().values() if pg["state"] != "REMOVED"]
        mine = [pg for pg in live_groups if pg["name"].startswith(f"rlplace:{job.name}:")]
        assert sorted(set(pg["bundles_to_node_id"].values()).pop() for pg in mine) == sorted(
            [job.live.node(0).node_id, spare.node_id]
        ), "the lost node's old group is removed; one on node 0, one on the spare"
    assert leftovers() == ([], [])


def test_a_lost_node_takes_the_spare_of_its_own_rack(extra, tmp_path):
    """About 9 s: node 4 (rack rA) is lost with spares in racks rB and rA; its worker moves to the rA one."""
    lost = extra.ranked(4, labels={"rack": "rA"})
    extra.spare(labels={"rack": "rB"})
    same_rack = extra.spare(labels={"rack": "rA"})
    with rlplace.connect(on_node_4(), export_path=None, timeout_s=20) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        assert train.call("step", rank=1) == 1
        extra.lose(lost)
        wait_declared(job)
        assert train.call("step", rank=1) == 2
        assert events(job) == [("lost", 4), ("spare", 4)]
        assert train.call("state", rank=1)["node_id"] == same_rack.node_id
        assert job.live.node(4).labels["rack"] == "rA"
    assert leftovers() == ([], [])


def test_without_spare_or_replacement_calls_fail_with_node_lost_error_within_the_window(extra, tmp_path):
    lost = extra.ranked(4)
    with rlplace.connect(on_node_4(), export_path=None, timeout_s=20, replace_within_s=1) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        train.call("step")
        gone = extra.lose(lost)
        wait_declared(job)
        with pytest.raises(NodeLostError) as err:
            train.call("step", rank=1)
        assert time.monotonic() - gone < DETECT_S + 1 + 2
        e = err.value
        assert isinstance(e, PlacementError) and e.node_rank == 4 and e.workers == ("rlplace:train:1",)
        message = str(e)
        assert "node 4 (1x A800" in message and "rlplace:train:1" in message
        assert "a hot spare with 1x A800 or a replacement node with rank 4 for 1 s" in message
        assert "rlplace start --spare" in message and "--node-rank 4" in message
        assert events(job) == [("lost", 4), ("failed", 4)] and 1 <= job.events[1].seconds < 3
        with pytest.raises(NodeLostError):  # and every later call, at once
            train.call("step")
        assert train.call("step", rank=0) == 3  # the other node's worker goes on
        nodes, workers = status(job)
        assert nodes == {"node 4": "FAILED"}
        gone_worker = workers["rlplace:train:1"]
        assert (gone_worker.node, gone_worker.state, gone_worker.pid) == ("node 4", "DEAD", None)
        groups, actors = leftovers()
        assert actors == ["rlplace:train:0 (ALIVE)"] and len(groups) == 1, "the lost node's group is removed"
    assert leftovers() == ([], [])


def lost_call(extra: Extra, lost: Any, plan: Any, tmp_path: Any) -> tuple[NodeLostError, list[tuple[str, int]]]:
    """Start the plan (replace_within_s=1), lose `lost`, return the NodeLostError of a call there and the events."""
    with rlplace.connect(plan, export_path=None, timeout_s=20, replace_within_s=1) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        train.call("step")
        extra.lose(lost)
        wait_declared(job)
        with pytest.raises(NodeLostError) as err:
            train.call("step", rank=1)
        return err.value, events(job)


def test_a_robot_node_is_not_moved_to_a_spare_hardware_cannot_move(extra, tmp_path):
    lost = extra.ranked(4, **{ROBOT: 1.0})
    extra.spare()  # same GPUs, but the robot is attached to node 4
    plan = on_node_4(resources={ROBOT: 1.0}, hardware={"type": "UR5", "robot_ip": "10.0.0.9"})
    error, happened = lost_call(extra, lost, plan, tmp_path)
    assert f"it holds {ROBOT}: attached hardware cannot move to a spare" in str(error)
    assert "a replacement node with rank 4 for 1 s" in str(error)
    assert happened == [("lost", 4), ("failed", 4)]
    assert leftovers() == ([], [])


def test_shutdown_during_a_loss_is_prompt_wakes_waiting_calls_and_leaves_nothing(extra, tmp_path):
    lost = extra.ranked(4)
    job = rlplace.connect(on_node_4(), export_path=None, timeout_s=20, replace_within_s=60)
    train = job.launch("train", Stepper, str(tmp_path))
    train.call("step")
    outcome: list[BaseException] = []

    def waiting_call() -> None:
        try:
            train.call("step", 2.0, rank=1)
        except BaseException as e:
            outcome.append(e)

    caller = threading.Thread(target=waiting_call, daemon=True)
    caller.start()
    extra.lose(lost)
    nodes, workers = status(job)  # before Ray declares the node dead: its raylet refuses connections
    assert workers["rlplace:train:1"].state in ("LOST", "DEAD") and workers["rlplace:train:1"].pid is None
    assert nodes == {"node 4": "LOST"}
    wait_declared(job)
    nodes, workers = status(job)
    assert nodes == {"node 4": "LOST"} and workers["rlplace:train:1"].node == "node 4"
    shown = render(list(workers.values()), collect_all()[0])
    assert re.search(r"node 4  LOST .* waiting for a hot spare or a replacement node \((59|60) s left\)", shown)
    start = time.monotonic()
    job.shutdown()
    caller.join(timeout=5)
    assert time.monotonic() - start < 5 and not caller.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], PlacementError)
    assert "shut down while node 4 was lost" in str(outcome[0])
    assert leftovers() == ([], [])
