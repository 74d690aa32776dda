"""Launching on the simulated cluster: what a launch that fails part-way leaves behind."""

from __future__ import annotations

import pytest

from rlplace.errors import PlacementError
from rlplace.sim.explore import case_of, simulated_job

# critic 0 shares GPUs 2-3 with actor 1: the plan gives it half of each of two GPUs, which Ray cannot grant.
SPANNING = """
cluster:
  num_nodes: 1
  node_groups:
    - {label: g0, node_ranks: "0"}
  component_placement:
    actor: {node_group: g0, placement: "0-3:0-1"}
    critic: {node_group: g0, placement: "6-7:0,2-3:1"}
"""


class Echo:
    pass


def test_a_launch_refused_part_way_leaves_no_worker_running():
    """Found by the explorer's status invariant (run 3, seed 3001487): launching a component started its workers in
    rank order until one was refused, and left the ones before running, in no group, holding their GPUs."""
    sim, job = simulated_job(case_of(SPANNING, "1x8:A800"))
    job.start()
    with pytest.raises(PlacementError, match=r"critic:1 would take 0\.5 of each of GPUs"):
        job.launch("critic", Echo)
    sim.advance(1)
    assert "critic" not in job.groups and [a.name for a in sim.live_actors()] == []
    with pytest.raises(PlacementError, match="critic:1 would take"):  # the same again, not "already launched"
        job.launch("critic", Echo)
    job.shutdown()
