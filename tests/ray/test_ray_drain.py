"""Preemption notices on the session cluster: Ray drains a node with a deadline (as `ray drain-node`, the autoscaler or
`rlplace drain` do) and the job acts while the node is still up. A hot spare takes its workers over before the
deadline with no call lost; without one, an elastic component shrinks off it before the deadline; with neither, the
workers keep running and the job says what the deadline will take. `rlplace status` shows the node DRAINING.

Each test adds node 4 (one A800) to the session cluster (`extra`, tests/ray/conftest.py) and drains it. A draining
node stays alive while anything runs on it (until the deadline's preemption removes it: the cloud's part, which
`extra` plays at the end); Ray stops its raylet as soon as nothing does.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import ray
from ray_plans import Row, pinned_plan
from ray_workers import Elastic, Stepper
from tests.ray_helpers import leftovers, wait_until_dead

import rlplace
from rlplace.cli import main
from rlplace.commands.status import render
from rlplace.ray import _compat
from rlplace.ray.status import collect_all

pytestmark = pytest.mark.ray

#: The drain's deadline, from the notice: the job must have acted well before it.
DEADLINE_S = 20.0

# train 0 on node 4 GPU 0 (the node drained), train 1 on node 0 GPU 1; eval on node 0 GPU 2.
ELASTIC_JOB = """
cluster:
  num_nodes: 5
  component_placement:
    train: {node_group: a800, placement: "4,1"}
    eval: {node_group: a800, placement: "2"}
  node_groups:
    - {label: a800, node_ranks: "0,4"}
  elastic: {train: {min: 1}}
"""


def drain(ray_cluster: Any, node: Any, within_s: float = DEADLINE_S) -> float:
    """Drain `node` with a deadline `within_s` from now; returns the deadline (wall clock)."""
    deadline = time.time() + within_s
    _compat.drain_node(ray_cluster.address, node.node_id, int(deadline * 1000), "preemption", "a test")
    return deadline


def wait_event(job: Any, kind: str, within_s: float) -> Any:
    """The job's first `kind` event, polled for up to `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = [e for e in job.events if e.kind == kind]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {kind} event within {within_s} s: {[str(e) for e in job.events]}")


def draining_rows(job: Any) -> dict[str, Any]:
    """`rlplace status`'s DRAINING rows of this driver's job, by node."""
    me = ray.get_runtime_context().get_job_id()
    return {n.node: n for n in collect_all()[0] if n.state == "DRAINING" and n.job == me}


def test_a_drained_node_with_a_spare_moves_its_workers_there_before_the_deadline_and_no_call_is_lost(
    extra, ray_cluster, tmp_path
):
    node = extra.ranked(4)
    spare = extra.spare()
    plan = pinned_plan([Row("train", 0, (1,)), Row("train", 4, (0,))])
    with rlplace.connect(plan, export_path=None, timeout_s=20) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        assert train.call("step") == [1, 1]
        in_flight = train.call_async("step", 1.5, rank=1)  # running on node 4 when the notice comes
        deadline = drain(ray_cluster, node)
        assert train.call("step", rank=0) == 2  # the other node's worker is not held up
        assert train.get([in_flight], "step", ranks=[1]) == [2]  # finished on the draining node, not lost
        moved = wait_event(job, "spare", DEADLINE_S)
        assert time.time() < deadline - DEADLINE_S / 2, f"moved {moved.seconds:.1f} s after the notice"
        state = train.call("state", rank=1)
        assert state["node_id"] == spare.node_id and state["steps"] == 2 and state["replaced"] == ["spare 4"]
        assert [(e.kind, e.node_rank) for e in job.events] == [("draining", 4), ("spare", 4)]
        notice = job.events[0]
        assert notice.deadline == pytest.approx(deadline, abs=0.01) and "spare" in notice.detail
        assert 0 < moved.seconds < DEADLINE_S / 2
        assert not wait_until_dead([node.node_id], 10), "Ray lets a drained node go once nothing runs there"
        assert train.call("step") == [3, 3]
        assert [e.kind for e in job.events] == ["draining", "spare"]
    assert leftovers() == ([], [])


@pytest.mark.slow
def test_a_call_too_long_for_the_deadline_is_re_run_on_the_spare(extra, ray_cluster, tmp_path):
    """About 10 s: a 6 s deadline gives the call in flight 3 s to finish on the drained node; it needs 4, so it is
    stopped there and run again on the spare, from the checkpoint."""
    node = extra.ranked(4)
    spare = extra.spare()
    plan = pinned_plan([Row("train", 0, (1,)), Row("train", 4, (0,))])
    with rlplace.connect(plan, export_path=None, timeout_s=20) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        assert train.call("step", rank=1) == 1
        in_flight = train.call_async("step", 4.0, rank=1)
        drain(ray_cluster, node, within_s=6)
        assert train.get([in_flight], "step", ranks=[1]) == [2]  # once, on the spare
        state = train.call("state", rank=1)
        assert state["node_id"] == spare.node_id and state["steps"] == 2 and state["replaced"] == ["spare 4"]
        assert [e.kind for e in job.events] == ["draining", "spare"]
    assert leftovers() == ([], [])


def test_a_drained_node_without_a_spare_shrinks_its_elastic_component_before_the_deadline(extra, ray_cluster):
    node = extra.ranked(4)
    with rlplace.connect(ELASTIC_JOB, export_path=None, timeout_s=20, name="drain-elastic") as job:
        train = job.launch("train", Elastic)
        assert len(train.call("where")) == 2
        in_flight = train.call_async("sleep", 1.0)  # on both ranks when the notice comes
        deadline = drain(ray_cluster, node)
        assert train.get(in_flight, "sleep") == [0, 1]  # both finished, the drained node's too
        shrunk = wait_event(job, "shrunk", DEADLINE_S)
        assert time.time() < deadline - DEADLINE_S / 2
        where = train.call("where")
        assert [(w["rank"], w["world"], w["node"]) for w in where] == [(0, 1, 0)]
        assert [(e.kind, e.node_rank) for e in job.events] == [("draining", 4), ("shrunk", 4)]
        assert "train 2 -> 1" in shrunk.detail and "shrink" in job.events[0].detail
        assert [(r.component, r.old_size, r.new_size, r.cause) for r in job.resizes] == [("train", 2, 1, "node lost")]
    assert leftovers() == ([], [])


def test_a_drained_node_nothing_can_take_over_keeps_running_and_the_job_says_what_the_deadline_takes(
    extra, ray_cluster, tmp_path
):
    node = extra.ranked(4)
    plan = pinned_plan([Row("train", 0, (1,)), Row("train", 4, (0,))])
    with rlplace.connect(plan, export_path=None, timeout_s=20) as job:
        train = job.launch("train", Stepper, str(tmp_path))
        train.call("step")
        deadline = drain(ray_cluster, node)
        notice = wait_event(job, "draining", 5)
        assert "rlplace:train:1" in notice.detail and "will be lost at the deadline" in notice.detail
        assert "no hot spare" in notice.detail and "cannot shrink" in notice.detail
        assert notice.deadline == pytest.approx(deadline, abs=0.01)
        assert str(notice) in job.warnings
        assert job.state.health(4) == "ok" and train.call("step") == [2, 2]  # it runs until the node goes
        rows = draining_rows(job)
        assert list(rows) == [f"node 4 ({node.address.split(':')[0]})"]
        row = rows[f"node 4 ({node.address.split(':')[0]})"]
        assert row.deadline == pytest.approx(deadline, abs=0.01) and "will be lost at the deadline" in row.detail
        assert re.match(r"deadline \d\d:\d\d:\d\d \(in \d+ s\); nothing takes it over", row.detail), row.detail
        assert "DRAINING" in render([], list(rows.values()))
    assert leftovers() == ([], [])


def test_rlplace_drain_drains_the_node_of_a_rank_and_refuses_an_unknown_rank(extra, ray_cluster, capsys):
    node = extra.ranked(4)
    assert main(["drain", "--node-rank", "7", "--deadline", "30"]) == 2
    assert "argument --node-rank: no live node has rank 7; live ranks: 0, 1, 2, 3, 4" in capsys.readouterr().err
    assert main(["drain", "--node-rank", "0", "--deadline", "30"]) == 2
    assert "argument --node-rank: node 0 is the head node" in capsys.readouterr().err
    before = time.time()
    assert main(["drain", "--node-rank", "4", "--deadline", "30", "--reason", "preemption"]) == 0
    out = capsys.readouterr().out
    assert f"node 4 ({node.address.split(':')[0]}, id {node.node_id[:8]}) drains by" in out and "preemption" in out
    # Nothing runs there: Ray lets it go at once, with the drain's reason as its death's.
    assert not wait_until_dead([node.node_id], 10)
    dead = next(n for n in ray.nodes() if n["NodeID"] == node.node_id)
    assert dead["DeathReasonMessage"] == "preemption: rlplace drain", dead
    assert time.time() - before < 10
