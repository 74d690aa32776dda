"""What `SimCluster` does as Ray does where rlplace's control plane never asks it to (rlplace.sim.coverage lists
these parts as not simulated by the explorer and names this file): an actor created in a group not placed yet, a
group removed twice, a bad bundle, an actor pinned to a dead node, a result passed to a call failing, actor code
raising, waits without a bound on what never comes, named actors looked up, calls cancelled, ports run out."""

from __future__ import annotations

import threading

import pytest

from rlplace.errors import PlacementError
from rlplace.ray.port import WorkerDied
from rlplace.sim.memory_port import FOREVER_S, SimCluster, SimHang, _ports_on_a_simulated_node

GPU_NODE = {"CPU": 8.0, "GPU": 2.0}


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def step(self, *passed: object) -> int:
        self.calls += 1
        return self.calls

    def boom(self) -> None:
        raise KeyError("the user's method raised")


def started(sim: SimCluster, *args: object, **options: object):
    actor = sim.start_actor(Counter, options, *args)
    sim.advance(0.1)
    return actor


def test_an_actor_created_in_a_group_not_placed_yet_starts_once_a_node_can_hold_the_group():
    sim = SimCluster()
    group = sim.create_group([{"GPU": 2.0}], "g", [{"rank": "0", "rack": "r1"}])
    actor = sim.start_actor(Counter, {"scheduling_strategy": sim.in_group(group, 0)})  # unnamed, as Ray allows
    sim.advance(1.0)
    assert actor.state == "PENDING_CREATION" and group.node_id is None
    sim.add_node(GPU_NODE, {"rank": "0", "rack": "r2"})  # the rank's label in another rack: not selected
    sim.add_node(GPU_NODE, {"rank": "1", "rack": "r1"})
    sim.add_node(GPU_NODE, {"rank": "2", "rack": "r1"})
    sim.advance(1.0)
    assert actor.state == "PENDING_CREATION"
    node = sim.add_node(GPU_NODE, {"rank": "0", "rack": "r1"})
    sim.advance(1.0)
    assert (group.node_id, actor.state, actor.node_id) == (node.node_id, "ALIVE", node.node_id)
    assert sim.get(sim.call(actor, "step")) == 1
    assert hasattr(actor, "step") and not hasattr(actor, "on_replaced")  # what the user's class has, as a handle


def test_a_group_removed_twice_frees_what_it_held_once():
    sim = SimCluster()
    node = sim.add_node(GPU_NODE, {})
    group = sim.create_group([{"GPU": 1.0}], "g", [])
    assert sim.free_resources()[node.node_id]["GPU"] == 1.0
    sim.remove_group(group)
    sim.remove_group(group)  # a no-op, as Ray's
    assert sim.free_resources()[node.node_id]["GPU"] == 2.0 and not sim.live_groups()


def test_ray_refuses_a_bundle_with_a_negative_or_no_resource():
    sim = SimCluster()
    for bundle in ({"GPU": -1.0}, {}):
        with pytest.raises(ValueError, match="invalid bundle"):
            sim.create_group([bundle], "g", [])


def test_an_actor_pinned_to_a_dead_node_or_in_a_removed_group_dies_and_its_calls_fail():
    sim = SimCluster()
    node = sim.add_node(GPU_NODE, {})
    sim.kill_node(node.node_id)
    pinned = sim.start_actor(Counter, {"scheduling_strategy": sim.on_node(node.node_id)})
    other = sim.add_node(GPU_NODE, {})
    group = sim.create_group([{"GPU": 1.0}], "g", [])
    assert group.node_id == other.node_id
    sim.remove_group(group)
    in_removed = sim.start_actor(Counter, {"scheduling_strategy": sim.in_group(group, 0)})
    for actor in (pinned, in_removed):
        assert actor.state == "DEAD"
        with pytest.raises(WorkerDied):
            sim.get(sim.call(actor, "step"))


def test_a_call_passed_a_result_waits_for_it_and_fails_with_it():
    sim = SimCluster()
    sim.add_node(GPU_NODE, {})
    first, second = started(sim), started(sim)
    slow = sim.call(first, "step")
    assert sim.get(sim.call(second, "step", slow)) == 1  # ran once the result passed to it was in
    failed = sim.call(first, "boom")
    with pytest.raises(KeyError, match="the user's method raised"):
        sim.get(sim.call(second, "step", failed))
    assert second.instance.calls == 1  # the failed call's body never ran
    sim.kill(first)
    sim.advance(0.1)
    dead = sim.call(first, "step")  # fails at once: its actor is dead
    with pytest.raises(WorkerDied):
        sim.get(sim.call(second, "step", dead))


def test_a_call_waiting_for_a_result_passed_to_it_does_not_run_when_its_process_dies_meanwhile():
    sim = SimCluster()
    node = sim.add_node(GPU_NODE, {})
    other = sim.add_node(GPU_NODE, {})
    waiting = started(sim, scheduling_strategy=sim.on_node(node.node_id))
    runner = started(sim, scheduling_strategy=sim.on_node(other.node_id))
    sim.behaviour.hang_method = "step"
    never = sim.call(runner, "step")  # hangs: the call passed it waits
    sim.behaviour.hang_method = None
    after = sim.call(waiting, "step", never)
    sim.advance(0.2)
    sim.kill_node(node.node_id)
    sim.advance(1.0)
    assert waiting.process.instance.calls == 0
    with pytest.raises(WorkerDied):
        sim.get(after, timeout_s=1.0)


def test_waits_without_a_bound_on_what_never_comes_are_hangs():
    sim = SimCluster()
    with pytest.raises(SimHang, match="nothing left to happen"):
        sim.wait_on(threading.Condition(), None)
    sim.add_node(GPU_NODE, {})
    actor = started(sim)
    sim.behaviour.hang_method = "step"
    with pytest.raises(SimHang, match="never finishes"):
        sim.get(sim.call(actor, "step"))
    sim.every(1000.0, lambda: True, "a watcher")  # something always comes due: the get waits on, for a day
    with pytest.raises(SimHang, match=f"waited {FOREVER_S:g} s"):
        sim.get(sim.call(actor, "step"))


def test_a_stopped_ticker_woken_runs_no_more_ticks():
    sim = SimCluster()
    ticks: list[float] = []
    ticker = sim.every(1.0, lambda: ticks.append(sim.now()) is None, "a watcher")
    sim.advance(0.5)
    ticker.stop(0.0)
    ticker.wake()
    sim.advance(5.0)
    assert ticks == [0.0]


def test_a_named_actor_is_found_by_name_and_a_cancelled_call_fails():
    sim = SimCluster()
    sim.add_node(GPU_NODE, {})
    actor = started(sim, name="rlplace:train:0", namespace="ns")
    assert sim.get_actor("rlplace:train:0", "ns") is actor
    with pytest.raises(ValueError, match="no actor"):
        sim.get_actor("rlplace:train:0", "another")
    sim.behaviour.hang_method = "step"
    ref = sim.call(actor, "step")
    sim.cancel(ref)
    with pytest.raises(WorkerDied, match="cancelled"):
        sim.get(ref)


def test_master_ports_wrap_around_the_range_on_a_simulated_node_and_run_out():
    assert _ports_on_a_simulated_node(1, [29501], 29500, 29501, first=29501) == [29500]
    with pytest.raises(PlacementError, match="no 2 free ports in 29500-29501"):
        _ports_on_a_simulated_node(2, [29500], 29500, 29501)
