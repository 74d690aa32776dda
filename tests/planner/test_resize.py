"""Incremental planning of elastic components (planner/resize.py): growth follows the strategy that placed the
component and never moves a worker, shrinking renumbers, bundles come and go as whole placement groups."""

from __future__ import annotations

import json

import pytest

from rlplace.config import load
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.plan import Plan
from rlplace.planner import free_capacity, grow, grow_back, plan, resize, shrink, shrink_lost_node


def nodes(text: str):
    return parse_nodes(text, num_cpus=64)


def where(p: Plan, component: str) -> list[tuple]:
    return [(w.node_rank, w.gpus, w.gpu_fraction) for w in p.by_component(component)]


def seat(w) -> tuple:
    return (w.node_rank, w.gpus, w.gpu_fraction, w.bundle, w.group, w.num_cpus, w.env_vars, w.python, w.visible_gpus)


def assert_unmoved(before: Plan, after: Plan) -> None:
    """Every worker of `before` still in `after` (by actor name) sits exactly where it sat."""
    now = {(w.component, w.name): w for w in after.workers}
    for w in before.workers:
        if (w.component, w.name) in now:
            assert seat(now[(w.component, w.name)]) == seat(w), w.name


def disaggregate(elastic: str, nodes_text="3x4", **counts) -> tuple:
    counts = {"train": 2, "eval": 2, **counts}
    text = (
        "cluster:\n"
        + "".join(f"  {c}_worker_num: {n}\n" for c, n in counts.items())
        + "  placement: {strategy: disaggregate}\n"
        + f"  elastic: {elastic}\n"
    )
    spec = load(text)
    inv = nodes(nodes_text)
    return spec, inv, plan(spec, inv)


# -- pools, auto ------------------------------------------------------------------------------------------


def test_disaggregate_eval_grows_on_its_pool_then_onto_a_node_no_pool_uses():
    spec, inv, p = disaggregate("{eval: {max: 6}}")
    r = grow(spec, p, inv, "eval", 3)
    assert where(r.plan, "eval") == [(1, (0,), 1.0), (1, (1,), 1.0), (2, (0,), 1.0), (2, (1,), 1.0), (2, (2,), 1.0)]
    assert [w.world_size for w in r.plan.by_component("eval")] == [5] * 5
    (change,) = r.changes
    assert (change.old_size, change.new_size, [w.rank for w in change.added]) == (2, 5, [2, 3, 4])
    assert change.renumbered == {0: 0, 1: 1}
    assert list(r.reserve_by_node()) == [2] and {b.reservation for b in r.reserve} == {1}
    assert all(b.index == w.bundle for b, w in zip(r.reserve, change.added, strict=True))
    rollout = next(g for g in r.plan.groups if g.name == "rollout_pool")
    assert rollout.node_ranks == (1, 2) and rollout.components["eval"] == (0, 1, 4, 5, 6)
    assert_unmoved(p, r.plan)


def test_growth_that_does_not_fit_names_what_is_missing_where_and_changes_nothing():
    spec, inv, p = disaggregate("{eval: {max: 6}}", nodes_text="2x4")
    before = p.to_dict()
    with pytest.raises(PlanError) as e:
        grow(spec, p, inv, "eval", 2)
    assert str(e.value) == (
        "eval: 2 of 2 more worker(s) do not fit (1 GPU and 1 CPU(s) each) in its range 0-1 in pool rollout_pool "
        "(nodes 1), its pool's free GPUs, and nodes no pool uses: node 1: no free GPU (4 held by the job), "
        "60 CPU(s) free"
    )
    assert p.to_dict() == before
    assert grow(spec, p, inv, "eval", 2, partial=True).changes == ()


def test_train_growing_onto_a_new_node_brings_a_buffer_shard_and_shrinking_takes_it_away():
    spec, inv, p = disaggregate("{train: {max: 6}}", train=4)
    r = grow(spec, p, inv, "train", 2)
    assert where(r.plan, "train")[4:] == [(2, (0,), 1.0), (2, (1,), 1.0)]
    assert [c.component for c in r.changes] == ["train", "buffer"]
    assert [w.node_rank for w in r.plan.by_component("buffer")] == [0, 2]
    assert r.plan.settings.buffer_worker_num == 2
    back = shrink(r.plan, "train", to=4)
    assert [c.component for c in back.changes] == ["train", "buffer"]
    assert sorted(b.index for b in back.release) == sorted(b.index for b in r.reserve)
    assert back.plan == p  # the growth undone: same workers, bundles and pools


def test_colocate_shrink_keeps_the_seat_and_regrowth_takes_it_again():
    text = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  placement: {strategy: colocate}\n"
    spec = load(text + "  elastic: {eval: {}}\n")
    inv = nodes("1x4")
    p = plan(spec, inv)
    small = shrink(p, "eval", to=1)
    assert small.release == ()  # train 1 still holds GPU 1's bundle: Ray cannot shrink a placement group
    assert where(small.plan, "train") == where(p, "train") == [(0, (0,), 0.5), (0, (1,), 0.5)]
    again = grow(spec, small.plan, inv, "eval", 1)
    assert again.reserve == ()  # the free seat, no new reservation
    assert again.plan == p


def test_colocate_eval_grows_onto_gpus_train_does_not_share_then_new_nodes():
    text = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  env_worker_num: 1\n"
    spec = load(text + "  placement: {strategy: colocate}\n  elastic: {eval: {max: 5}}\n")
    inv = nodes("2x4")
    p = plan(spec, inv)
    r = grow(spec, p, inv, "eval", 3)
    # GPU 2 is env's; GPU 3 is free in the pool; then node 1, which no pool used, joins global_pool
    assert where(r.plan, "eval")[2:] == [(0, (3,), 1.0), (1, (0,), 1.0), (1, (1,), 1.0)]
    assert r.plan.groups[0].node_ranks == (0, 1)
    assert_unmoved(p, r.plan)


def test_device_colocated_env_follows_eval_both_ways():
    text = "cluster:\n  train_worker_num: 1\n  eval_worker_num: 2\n"
    spec = load(text + "  placement: {strategy: disaggregate, env_strategy: device-colocate}\n  elastic: {eval: {}}\n")
    inv = nodes("2x4")
    p = plan(spec, inv)
    assert where(p, "env") == where(p, "eval") == [(1, (0,), 0.5), (1, (1,), 0.5)]
    small = shrink(p, "eval", ranks=[0])
    assert [(c.component, c.renumbered) for c in small.changes] == [("eval", {1: 0}), ("env", {1: 0})]
    again = grow(spec, small.plan, inv, "eval", 1)
    assert [(c.component, [w.bundle for w in c.added]) for c in again.changes] == [("eval", [1]), ("env", [1])]
    assert where(again.plan, "env") == where(again.plan, "eval") == [(1, (1,), 0.5), (1, (0,), 0.5)]
    with pytest.raises(PlanError, match=r"env is not elastic .*; it follows eval, resize that"):
        grow(spec, p, inv, "env", 1)


def test_device_colocated_eval_on_a_fresh_gpu_brings_its_env_at_half_a_gpu_each():
    text = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n"
    spec = load(
        text + "  placement: {strategy: colocate, env_strategy: device-colocate}\n  elastic: {eval: {max: 3}}\n"
    )
    inv = nodes("1x4")
    p = plan(spec, inv)
    assert where(p, "eval")[0] == (0, (0,), pytest.approx(1 / 3))  # train, eval and env share each GPU
    r = grow(spec, p, inv, "eval", 1)
    assert where(r.plan, "eval")[2] == where(r.plan, "env")[2] == (0, (2,), 0.5)
    assert [(b.gpus, b.seats, b.num_cpus) for b in r.reserve] == [((2,), 2, 2.0)]


def test_node_affinity_growth_splits_a_new_node_between_eval_and_env():
    text = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n"
    spec = load(
        text + "  placement: {strategy: disaggregate, env_strategy: node-affinity}\n"
        "  elastic: {eval: {max: 4}, env: {max: 4}}\n"
    )
    inv = nodes("3x4")
    p = plan(spec, inv)
    assert where(p, "eval") == [(1, (0,), 1.0), (1, (1,), 1.0)] and where(p, "env") == [(1, (2,), 1.0), (1, (3,), 1.0)]
    r = grow(spec, p, inv, "eval", 2)
    assert where(r.plan, "eval")[2:] == [(2, (0,), 1.0), (2, (1,), 1.0)]  # the lower half: room for env beside
    r = grow(spec, r.plan, inv, "env", 2)
    assert where(r.plan, "env")[2:] == [(2, (2,), 1.0), (2, (3,), 1.0)]


def test_strategy_default_grows_workers_ray_places_within_the_gpus_of_the_live_nodes():
    spec = load("cluster:\n  env_worker_num: 1\n  elastic: {eval: {max: 4}, buffer: {max: 3}}\n")
    inv = nodes("2x2")
    p = plan(spec, inv)
    r = grow(spec, p, inv, "eval", 1)
    assert [(w.node_rank, w.gpu_fraction, w.bundle) for w in r.changes[0].added] == [(None, 1.0, None)]
    assert r.plan.bundles == () and r.reserve == ()
    with pytest.raises(
        PlanError,
        match=r"eval: 2 more worker\(s\) of 1 GPU each do not fit: the job's workers ask "
        r"for 3 of the 4 GPU\(s\) of the live nodes",
    ):
        grow(spec, p, inv, "eval", 2)
    again = grow(spec, shrink(r.plan, "eval", ranks=[0]).plan, inv, "eval", 1).plan.by_component("eval")
    assert [w.name for w in again] == ["rlplace:eval:1", "rlplace:eval:1.1"]  # names stay unique without nodes too
    shards = grow(spec, p, inv, "buffer", 2).plan.by_component("buffer")
    assert [w.node_rank for w in shards] == [0, 1, 0]  # round-robin over the GPU nodes, pinned by node affinity


def test_a_component_in_the_driver_resizes_in_the_driver():
    spec = load("cluster:\n  eval_worker_num: 2\n  remote_eval: false\n  elastic: {eval: {max: 4}}\n")
    inv = nodes("1x4")
    p = plan(spec, inv)
    r = grow(spec, p, inv, "eval", 2)
    assert [(w.rank, w.in_driver, w.node_rank) for w in r.plan.by_component("eval")] == [
        (i, True, None) for i in range(4)
    ]
    assert r.reserve == ()


# -- pools, manual ----------------------------------------------------------------------------------------

MANUAL = """\
cluster:
  train_worker_num: 1
  eval_worker_num: {eval}
  placement: {{mode: manual}}
  resource_pool:
    - {{name: p, num_node: 1, num_gpus: 8, train: 0, eval: 4-7{env}}}
  elastic: {{eval: {{max: 4}}}}
"""


def test_manual_growth_stays_inside_the_range_as_the_full_planner_packs_it():
    spec, inv = load(MANUAL.format(eval=2, env="")), nodes("1x8")
    r = grow(spec, plan(spec, inv), inv, "eval", 2)
    full = plan(load(MANUAL.format(eval=4, env="")), inv)
    strip = [(w.rank, w.world_size, w.node_rank, w.gpus, w.gpu_fraction, w.group, w.env_vars) for w in r.plan.workers]
    assert strip == [
        (w.rank, w.world_size, w.node_rank, w.gpus, w.gpu_fraction, w.group, w.env_vars) for w in full.workers
    ]
    with pytest.raises(PlanError, match=r"eval: 5 worker\(s\) asked for, but its elastic range is 1-4"):
        grow(spec, r.plan, inv, "eval", 1)


def test_manual_growth_does_not_take_gpus_of_its_range_another_component_holds():
    spec, inv = (
        load(
            MANUAL.format(eval=2, env=", env: 6-7").replace("eval_worker_num", "env_worker_num: 2\n  eval_worker_num")
        ),
        nodes("1x8"),
    )
    p = plan(spec, inv)
    assert where(p, "env") == [(0, (6,), 1.0), (0, (7,), 1.0)]
    r = grow(spec, p, inv, "eval", 2, partial=True)
    assert where(r.plan, "eval") == [(0, (4,), 1.0), (0, (5,), 1.0)]  # 6 and 7 are env's alone: no seat for eval
    with pytest.raises(PlanError, match="in its range 4-7 in pool p"):
        grow(spec, p, inv, "eval", 1)
    assert any("elastic eval: max 4, but this inventory holds at most 2" in w for w in p.warnings)


# -- node groups --------------------------------------------------------------------------------------------

GROUPS = """\
cluster:
  num_nodes: 2
  node_groups:
    - label: a800
      node_ranks: 0-1
      env_configs:
        - node_ranks: 1
          env_vars: [{{NCCL_SOCKET_IFNAME: ib0}}]
          python_interpreter_path: /opt/venv/bin/python
  component_placement:
    actor: {{node_group: a800, placement: 0-7}}
    rollout: {{node_group: a800, placement: {rollout}}}
    agent: {{node_group: node, placement: 0}}
  elastic: {{rollout: {{max: 8}}, agent: {{max: 2}}}}
"""


def test_node_group_growth_takes_the_groups_free_resources_as_the_full_planner_places_them():
    inv = nodes("2x8")
    spec = load(GROUPS.format(rollout="8-9"))
    r = grow(spec, plan(spec, inv), inv, "rollout", 4)
    full = plan(load(GROUPS.format(rollout="8-13").replace("{rollout: {max: 8}, ", "{")), inv)
    assert [seat(w)[:3] + seat(w)[4:] for w in r.plan.by_component("rollout")] == [
        seat(w)[:3] + seat(w)[4:] for w in full.by_component("rollout")
    ]
    added = r.change("rollout").added
    assert [(w.node_rank, w.gpus, w.env_vars, w.python) for w in added] == [
        (1, (g,), {"NCCL_SOCKET_IFNAME": "ib0"}, "/opt/venv/bin/python") for g in (2, 3, 4, 5)
    ]


def test_a_component_on_the_node_group_grows_onto_further_nodes_seeing_their_gpus():
    inv = nodes("2x8")
    spec = load(GROUPS.format(rollout="8-9"))
    r = grow(spec, plan(spec, inv), inv, "agent", 1)
    (w,) = r.change("agent").added
    assert (w.node_rank, w.gpus, w.sees_node_gpus, w.visible_gpus, w.env_vars) == (1, (), True, tuple(range(8)), {})
    assert [(b.node_rank, b.gpus, b.num_cpus) for b in r.reserve] == [(1, (), 1.0)]


def test_processes_sharing_a_gpu_grow_two_to_a_new_gpu():
    inv = nodes("2x8")
    spec = load(GROUPS.format(rollout="8-9:0-3"))
    p = plan(spec, inv)
    assert where(p, "rollout") == [(1, (0,), 0.5), (1, (0,), 0.5), (1, (1,), 0.5), (1, (1,), 0.5)]
    r = grow(spec, p, inv, "rollout", 3)
    assert where(r.plan, "rollout")[4:] == [(1, (2,), 0.5), (1, (2,), 0.5), (1, (3,), 0.5)]
    assert [b.seats for b in r.reserve] == [2, 2]  # GPU 3 keeps a seat for the next process


# -- shrinking, names, lost nodes ---------------------------------------------------------------------------


def test_shrinking_named_ranks_renumbers_the_survivors_and_they_keep_their_actor_names():
    spec, inv, p = disaggregate("{eval: {max: 4}}", eval=4, nodes_text="3x4")
    small = shrink(p, "eval", ranks=[1])
    (change,) = small.changes
    assert change.renumbered == {0: 0, 2: 1, 3: 2} and [w.rank for w in change.removed] == [1]
    assert [(w.rank, w.name, w.world_size) for w in small.plan.by_component("eval")] == [
        (0, "rlplace:eval:0", 3),
        (1, "rlplace:eval:2", 3),
        (2, "rlplace:eval:3", 3),
    ]
    assert small.release == ()  # the node's placement group still holds eval 0, 2 and 3
    again = grow(spec, small.plan, inv, "eval", 1)
    (w,) = again.change("eval").added
    assert (w.rank, w.name, w.gpus) == (3, "rlplace:eval:3.1", (1,))  # eval 1's free seat; rank 3's name is taken
    assert_unmoved(small.plan, again.plan)
    with pytest.raises(PlanError, match=r"no rank\(s\) 7 to remove"):
        shrink(p, "eval", ranks=[7])


def node_affinity(elastic: str = "{eval: {}, env: {}}"):
    text = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 4\n  env_worker_num: 4\n"
    spec = load(text + f"  placement: {{strategy: disaggregate, env_strategy: node-affinity}}\n  elastic: {elastic}\n")
    inv = nodes("3x4")
    return spec, inv, plan(spec, inv)


def test_a_lost_node_shrinks_its_components_and_they_grow_back_when_it_returns():
    spec, inv, p = node_affinity()
    assert [w.node_rank for w in p.by_component("eval")] == [1, 1, 2, 2]
    lost = shrink_lost_node(p, 2)
    assert [(c.component, c.new_size, c.renumbered) for c in lost.changes] == [
        ("eval", 2, {0: 0, 1: 1}),
        ("env", 2, {0: 0, 1: 1}),
    ]
    assert {b.node_rank for b in lost.release} == {2} and all(b.node_rank != 2 for b in lost.plan.bundles)
    assert grow_back(spec, lost.plan, inv, down={2}).changes == ()  # node 2 still down: nothing fits
    back = grow_back(spec, lost.plan, inv)
    assert [(c.component, c.new_size) for c in back.changes] == [("eval", 4), ("env", 4)]
    assert where(back.plan, "eval") == where(p, "eval") and where(back.plan, "env") == where(p, "env")
    assert {b.reservation for b in back.reserve} == {1}


def test_a_lost_node_with_a_component_that_is_not_elastic_or_would_go_below_min_cannot_shrink():
    p = node_affinity("{eval: {}}")[2]
    with pytest.raises(PlanError, match=r"node 2 holds workers of components that are not elastic \(env 2-3\)"):
        shrink_lost_node(p, 2)
    p = node_affinity("{eval: {min: 3}, env: {}}")[2]
    with pytest.raises(PlanError, match=r"below the elastic minimum: eval would keep 2 \(min 3\)"):
        shrink_lost_node(p, 2)


def test_resize_dispatches_and_refuses_what_is_not_elastic():
    spec, inv, p = disaggregate("{eval: {max: 4}}")
    assert resize(spec, p, inv, "eval", 2).changes == ()
    assert resize(spec, p, inv, "eval", 3).change("eval").new_size == 3
    assert resize(spec, p, inv, "eval", 1).change("eval").new_size == 1
    with pytest.raises(PlanError, match=r"train is not elastic \(elastic components: eval\); list it under"):
        resize(spec, p, inv, "train", 3)
    with pytest.raises(PlanError, match=r"eval: 5 worker\(s\) asked for, but its elastic range is 1-4"):
        resize(spec, p, inv, "eval", 5)
    with pytest.raises(PlanError, match=r"cannot shrink below the elastic minimum: eval would keep 0 \(min 1\)"):
        resize(spec, p, inv, "eval", 0)


# -- the plan carries it ----------------------------------------------------------------------------------------


def test_a_resized_plan_round_trips_through_json():
    spec, inv, p = disaggregate("{eval: {max: 4}}", eval=3)
    r = grow(spec, shrink(p, "eval", ranks=[0]).plan, inv, "eval", 2)
    doc = json.loads(json.dumps(r.plan.to_dict()))
    assert doc["elastic"] == {"eval": {"min": 1, "max": 4, "start": 3}}
    assert [w["actor_name"] for w in doc["workers"] if w["component"] == "eval"] == [
        "rlplace:eval:1",
        "rlplace:eval:2",
        "rlplace:eval:2.1",
        None,
    ]
    assert Plan.from_dict(doc) == r.plan


def test_ranges_the_planner_derives_are_checked_where_they_are_written():
    text = MANUAL.format(eval=2, env="").replace("  eval_worker_num: 2\n", "").replace("{max: 4}", "{max: 3}")
    with pytest.raises(ConfigError) as e:
        plan(load(text, filename="job.yaml"), nodes("1x8"))
    assert str(e.value.problems[0]) == (
        "job.yaml:6: cluster.elastic.eval: eval starts with 4 worker(s) (as planned), above its elastic max 3; "
        "raise max to 4 or lower the count (the count is the starting size)"
    )


def test_free_capacity_is_the_live_nodes_minus_what_the_plan_reserves():
    _, inv, p = disaggregate("{eval: {}}")
    free = free_capacity(p, inv, down={2})
    assert sorted(free) == [0, 1]
    assert (free[0].gpus, free[0].cpus) == ((2, 3), 64 - 3)  # 2 train workers and the buffer shard
    assert (free[1].gpus, free[1].cpus) == ((), 64 - 4)
