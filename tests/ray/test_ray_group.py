"""WorkerGroup: calls on all ranks or one, sharded arguments, and a dead worker named in the error."""

from __future__ import annotations

import pytest
from ray_plans import Row, pinned_plan
from ray_workers import Probe

import rlplace
from rlplace.errors import PlacementError

pytestmark = pytest.mark.ray


def test_calls_sharding_and_a_killed_worker(ray_cluster):
    plan = pinned_plan([Row("agent", 3), Row("agent", 3), Row("agent", 0)])
    with rlplace.connect(plan, timeout_s=20, export_path=None) as job:
        agents = job.launch("agent", Probe, tag="a")
        assert len(agents) == 3 and [w.rank for w in agents.workers] == [0, 1, 2]
        assert agents.call("echo", 7) == [7, 7, 7]
        assert agents.call("echo", "one", rank=2) == "one"
        assert agents.call_sharded("echo", ["r0", "r1", "r2"]) == ["r0", "r1", "r2"]
        assert [p.rank for p in agents.placements()] == [0, 1, 2]
        with pytest.raises(ValueError, match="2 shards for 3 agent workers"):
            agents.call_sharded("echo", [1, 2])
        agents.kill(1)
        with pytest.raises(PlacementError, match=r"worker rlplace:agent:1 on node 3 died during echo\(\)"):
            agents.call("echo", 1)
        assert agents.call("echo", 5, rank=2) == 5  # the others live on
