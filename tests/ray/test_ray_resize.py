"""`job.resize` on the session cluster: an elastic component grows onto free GPUs (new placement groups) and
shrinks (they are removed), every worker learns its new rank, world size and rendezvous in `on_resized`, calls
made before a resize finish first, and growth that does not fit leaves the job as it was."""

from __future__ import annotations

from typing import Any

import pytest
import ray
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from ray_workers import Elastic

import rlplace
from rlplace.errors import ConfigError, PlacementError, PlanError
from rlplace.ray import _compat
from rlplace.ray.labels import NODE_RANK_LABEL
from rlplace.ray.status import sizes

pytestmark = pytest.mark.ray

# train on node 0; eval starts with 2 workers on GPUs 0-1 of node 1, its range holds 4.
CONFIG = """
cluster:
  train_worker_num: 1
  eval_worker_num: 2
  placement: {mode: manual}
  elastic: {eval: {min: 1, max: 4}}
resource_pool:
  - {name: train_pool, node_ids: [0], num_gpus: [4], train: "0"}
  - {name: rollout_pool, node_ids: [1], num_gpus: [4], eval: "0-3"}
"""


def groups_of(job: Any) -> dict[str, str]:
    """The job's live placement groups: name -> state."""
    table = placement_group_table()
    return {table[pg.id.hex()]["name"]: table[pg.id.hex()]["state"] for pg in job.placement_groups}


def test_eval_grows_from_2_to_4_on_free_gpus_and_shrinks_to_1(ray_cluster):
    with rlplace.connect(CONFIG, export_path=None, name="resize-a") as job:
        evals = job.launch("eval", Elastic)
        old_port = evals.call("where", rank=0)["env"]["MASTER_PORT"]
        busy = evals.call_async("sleep", 0.5)  # made before the resize: finishes first, at the old size

        up = job.resize("eval", 4)
        assert evals.get(busy, "sleep") == [0, 1]
        assert (up.component, up.old_size, up.new_size, up.cause) == ("eval", 2, 4, "resize")
        assert [(r.rank, r.name, r.node_rank, r.gpus) for r in up.added] == [
            (2, "rlplace:eval:2", 1, (2,)),
            (3, "rlplace:eval:3", 1, (3,)),
        ]
        assert up.removed == () and up.renumbered == {0: 0, 1: 1} and 0 < up.seconds < 30
        where = evals.call("where")
        assert [(w["rank"], w["world"], w["node"], w["gpus"], w["mismatch"]) for w in where] == [
            (i, 4, 1, (i,), None) for i in range(4)
        ]
        assert [(w["env"]["RANK"], w["env"]["WORLD_SIZE"], w["env"]["LOCAL_RANK"]) for w in where] == [
            (str(i), "4", str(i)) for i in range(4)
        ]
        ports = {w["env"]["MASTER_PORT"] for w in where}
        assert len(ports) == 1 and ports != {old_port}, "a fresh master port, the same for every rank"
        assert [w["resized"] for w in where] == [[("resize", 2, 4, i, 4)] for i in range(4)]  # new ones too
        assert groups_of(job) == {
            f"rlplace:{job.name}:node0": "CREATED",
            f"rlplace:{job.name}:node1": "CREATED",
            f"rlplace:{job.name}:node1.1": "CREATED",  # the step's own group: placement groups cannot grow
        }
        assert [(s.component, s.workers, s.min, s.max, s.start) for s in sizes() if s.job == _ray_job()] == [
            ("eval", 4, 1, 4, 4)
        ]

        removed = [_compat.actor_id(a) for a in evals.actors[1:]]
        down = job.resize("eval", 1)
        assert [(r.rank, r.name, r.gpus) for r in down.removed] == [(1, "rlplace:eval:1", (1,))] + [
            (i, f"rlplace:eval:{i}", (i,)) for i in (2, 3)
        ]
        assert down.added == () and down.renumbered == {0: 0}
        assert [(w["rank"], w["world"], w["resized"][-1]) for w in evals.call("where")] == [
            (0, 1, ("resize", 4, 1, 0, 1))
        ]
        assert len(evals) == 1 and [w.rank for w in job.plan.by_component("eval")] == [0]
        table = _compat.actor_table()
        assert {table[i]["State"] for i in removed} == {"DEAD"}
        assert groups_of(job) == {f"rlplace:{job.name}:node0": "CREATED", f"rlplace:{job.name}:node1": "CREATED"}
        assert [e.new_size for e in job.resizes] == [4, 1]


def test_growth_that_does_not_fit_fails_naming_the_node_and_leaves_the_job_as_it_was(ray_cluster):
    with rlplace.connect(CONFIG, export_path=None, name="resize-b", timeout_s=2) as job:
        evals = job.launch("eval", Elastic)
        plan, groups = job.plan, groups_of(job)
        with pytest.raises(PlanError, match=r"eval: 5 worker\(s\) asked for, but its elastic range is 1-4"):
            job.resize("eval", 5)
        with pytest.raises(PlanError, match=r"train is not elastic \(elastic components: eval\)"):
            job.resize("train", 2)
        with pytest.raises(ConfigError, match=r"'critic' is not in the plan; planned: \['train', 'eval', 'buffer'\]"):
            job.resize("critic", 2)
        with pytest.raises(ConfigError, match=r"n: the new size must be a whole number >= 0"):
            job.resize("eval", -1)
        holder = placement_group(
            [{"GPU": 1.0}] * 2, name="someone-else", bundle_label_selector=[{NODE_RANK_LABEL: "1"}] * 2
        )
        try:
            ray.get(holder.ready(), timeout=30)
            with pytest.raises(PlacementError) as err:
                # The plan sees GPUs 2-3 free; another job holds them. 4 s, not the job's 2: the calls in flight are
                # waited for first, and on a loaded 2-core machine that alone has taken 2 s.
                job.resize("eval", 4, timeout_s=4)
            message = str(err.value)
            assert "placement groups still waiting when timeout_s ran out" in message and "node 1" in message
            assert "someone-else" in message
        finally:
            remove_placement_group(holder)
        assert job.plan is plan and groups_of(job) == groups and job.resizes == []
        assert [(w["rank"], w["world"], w["resized"]) for w in evals.call("where")] == [(0, 2, []), (1, 2, [])]
        names = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "resize-b"}
        assert names == {"rlplace:eval:0", "rlplace:eval:1"}
    with pytest.raises(PlacementError, match="job resize-b is shut down; connect again to resize 'eval'"):
        job.resize("eval", 3)


def _ray_job() -> str:
    return ray.get_runtime_context().get_job_id()


def test_a_component_ray_places_itself_resizes_and_its_workers_agree_on_the_new_rendezvous(ray_cluster):
    config = {"cluster": {"train_worker_num": 1, "eval_worker_num": 2, "elastic": {"eval": {"max": 3}}}}
    with rlplace.connect(config, export_path=None, name="resize-c") as job:
        assert not job.plan.uses_placement_groups  # strategy default: Ray places train and eval
        evals = job.launch("eval", Elastic)
        before = evals.call("where")
        event = job.resize("eval", 3)
        assert [(r.rank, r.node_rank) for r in event.added] == [(2, None)]
        where = evals.call("where")
        assert [(w["rank"], w["world"], w["env"]["RANK"], w["env"]["WORLD_SIZE"]) for w in where] == [
            (i, 3, str(i), "3") for i in range(3)
        ]
        masters = {(w["env"]["MASTER_ADDR"], w["env"]["MASTER_PORT"]) for w in where}
        assert len(masters) == 1 and masters != {(before[0]["env"]["MASTER_ADDR"], before[0]["env"]["MASTER_PORT"])}
        job.resize("eval", 1)
        assert [(w["rank"], w["world"]) for w in evals.call("where")] == [(0, 1)]
