"""A lost node without a spare, under elastic components: the job shrinks them instead of stopping, a call in
flight on a removed worker raises RanksRemovedError with the survivors' results, and a node that joins later
gets them back to their size. A component that is not elastic on the lost node still raises NodeLostError.

Each test adds node 4 (one A800) to the session cluster and loses it abruptly (`extra`, tests/ray/conftest.py).
"""

from __future__ import annotations

import time

import pytest
import ray
from ray_workers import Elastic
from tests.ray_helpers import DETECT_S, leftovers, wait_until_dead

import rlplace
from rlplace.errors import RanksRemovedError
from rlplace.ray.status import collect_all, sizes

pytestmark = pytest.mark.ray

# train 0 on node 4 GPU 0 (the node lost), train 1 on node 0 GPU 1; eval on node 0 GPU 2.
JOB = """
cluster:
  num_nodes: 5
  component_placement:
    train: {node_group: a800, placement: "4,1"}
    eval: {node_group: a800, placement: "2"}
  node_groups:
    - {label: a800, node_ranks: "0,4"}
  elastic: {train: {min: 1}}
"""


def answered_at_new_size(group, size: int, deadline_s: float) -> float:
    """Call `where` until it answers at `size` workers (calls made before the shrink may raise
    RanksRemovedError); returns when it did (monotonic)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            where = group.call("where", timeout_s=deadline_s)
        except RanksRemovedError:
            where = []
        if len(where) == size:
            return time.monotonic()
        assert time.monotonic() < deadline, f"{group.component} did not answer at {size} workers in {deadline_s} s"


@pytest.mark.slow
def test_a_lost_node_without_a_spare_shrinks_its_elastic_component_and_a_returning_node_grows_it_back(extra):
    """About 9-12 s: node 4 added, lost (the shrink), and a node of rank 4 added again (the growth back)."""
    lost = extra.ranked(4)
    with rlplace.connect(JOB, export_path=None, timeout_s=20, replace_within_s=60, name="elastic-a") as job:
        train = job.launch("train", Elastic)
        train.call("where")
        in_flight = train.call_async("sleep", 3.0)  # running on both ranks when node 4 goes
        extra.lose(lost)
        with pytest.raises(RanksRemovedError) as err:
            train.get(in_flight, "sleep")
        e = err.value
        assert (e.component, e.removed, e.results) == ("train", ("rlplace:train:0",), [1])  # rank 1 ran it
        assert "rlplace:train:0 left the component before sleep() finished there" in str(e)
        assert wait_until_dead([lost.node_id], DETECT_S) == set()
        declared = ray.nodes()  # Ray's verdict is in: from now on the job must answer within 5 s
        assert not next(n for n in declared if n["NodeID"] == lost.node_id)["Alive"]
        since = time.monotonic()
        assert answered_at_new_size(train, 1, 5.0) - since < 5.0
        assert [(e.kind, e.node_rank) for e in job.events] == [("lost", 4), ("shrunk", 4)]
        shrunk = job.events[1]
        assert "no spare or replacement: train 2 -> 1 (elastic components shrank)" in shrunk.detail
        (resize,) = job.resizes
        assert (resize.cause, resize.node_rank, resize.old_size, resize.new_size) == ("node lost", 4, 2, 1)
        assert [(r.name, r.node_rank) for r in resize.removed] == [("rlplace:train:0", 4)]
        assert resize.renumbered == {1: 0}
        (survivor,) = train.call("where")
        assert (survivor["name"], survivor["rank"], survivor["world"]) == ("rlplace:train:1", 0, 1)
        assert survivor["resized"] == [("node lost", 2, 1, 0, 1)]
        assert survivor["env"]["MASTER_ADDR"] == job.live.node(0).address  # rank 0 moved: so did the master
        assert job.state.down == {4}
        me = ray.get_runtime_context().get_job_id()
        nodes, workers = collect_all()
        assert [(n.node, n.state) for n in nodes if n.job == me] == [("node 4", "SHRUNK")]
        alive = [(w.name, w.rank, w.node) for w in workers if w.job == me and w.state == "ALIVE"]
        assert alive == [("rlplace:train:1", 0, "node 0")]  # listed by the name it kept, with its rank now
        assert [(s.component, s.workers, s.min, s.max, s.start) for s in sizes() if s.job == me] == [
            ("train", 1, 1, 2, 2)
        ]

        back = extra.ranked(4)  # a node started again with rank 4: train grows back onto it
        answered_at_new_size(train, 2, DETECT_S)
        assert [e.kind for e in job.events] == ["lost", "shrunk", "grown"]
        assert "replacement" in job.events[2].detail and "train 1 -> 2" in job.events[2].detail
        assert [e.cause for e in job.resizes] == ["node lost", "grow back"]
        where = train.call("where")
        assert [(w["name"], w["rank"], w["world"], w["node"], w["gpus"], w["mismatch"]) for w in where] == [
            ("rlplace:train:1", 0, 2, 0, (1,), None),
            ("rlplace:train:1.1", 1, 2, 4, (0,), None),  # rank 1's name is the survivor's: the new one gets .1
        ]
        assert job.live.node(4).node_id == back.node_id and job.state.down == frozenset()
        _, workers = collect_all()
        alive = [(w.name, w.rank) for w in workers if w.job == me and w.state == "ALIVE"]
        assert alive == [("rlplace:train:1", 0), ("rlplace:train:1.1", 1)]
    assert leftovers() == ([], [])
