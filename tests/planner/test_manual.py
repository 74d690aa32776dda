"""Manual mode (resource_pool): node binding, the spec's constraints table, counted packing."""

from __future__ import annotations

import pytest
from tests.planner.specs import manual, r

from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.planner import export_resource_pool, plan


def where(p, component):
    return [(w.node_rank, w.gpus) for w in p.by_component(component)]


def test_heterogeneous_pool_with_node_ids_and_per_node_gpu_counts():
    spec = manual([{"name": "train_pool", "num_node": 2, "node_ids": [0, 1], "num_gpus": [8, 4], "train": r(0, 11)}])
    p = plan(spec, parse_nodes("1x8,1x4"))
    assert where(p, "train") == [(0, (g,)) for g in range(8)] + [(1, (g,)) for g in range(4)]
    assert where(p, "buffer") == [(0, ()), (1, ())]
    assert export_resource_pool(p) == {
        "resource_pool": [
            {"name": "train_pool", "num_node": 2, "node_ids": [0, 1], "num_gpus": [8, 4], "train": "0-11"}
        ]
    }


def test_node_ids_bind_pools_to_named_nodes_in_any_order():
    spec = manual(
        [
            {"name": "train_pool", "num_node": 1, "node_ids": [2], "num_gpus": [4], "train": r(0, 3)},
            {"name": "rollout_pool", "num_node": 1, "node_ids": [0], "num_gpus": [8], "eval": r(0, 7)},
        ]
    )
    p = plan(spec, parse_nodes("1x8,1x8,1x4"))
    assert {n for n, _ in where(p, "train")} == {2} and {n for n, _ in where(p, "eval")} == {0}


def test_pool_without_node_ids_on_mixed_gpu_counts_is_refused_with_the_fix():
    spec = manual([{"name": "train_pool", "num_node": 2, "num_gpus": 4, "train": r(0, 7)}])
    with pytest.raises(PlanError, match=r"same GPU count; bind them with node_ids: \[0, 1\] and num_gpus: \[8, 4\]"):
        plan(spec, parse_nodes("1x8,1x4"))


def test_pool_wanting_more_gpus_than_its_node_has_names_pool_node_and_counts():
    spec = manual([{"name": "big", "num_node": 1, "node_ids": [1], "num_gpus": [8], "train": r(0, 7)}])
    with pytest.raises(PlanError, match=r"pool big: node 1 .* has 4 GPU\(s\), the pool wants 8"):
        plan(spec, parse_nodes("1x8,1x4"))


def test_pools_needing_more_nodes_than_exist():
    spec = manual(
        [
            {"name": "train_pool", "num_node": 1, "num_gpus": 8, "train": r(0, 7)},
            {"name": "rollout_pool", "num_node": 2, "num_gpus": 8, "eval": r(0, 15)},
        ]
    )
    with pytest.raises(PlanError, match=r"rollout_pool needs 2 node\(s\) .* only 1 is left .*pools took 0\)"):
        plan(spec, parse_nodes("2x8"))


def test_pools_skip_cpu_only_nodes():
    spec = manual([{"name": "global_pool", "num_node": 2, "num_gpus": 8, "train": r(0, 15)}])
    p = plan(spec, parse_nodes("1x0,2x8"))
    assert {n for n, _ in where(p, "train")} == {1, 2}


def test_unknown_node_id_is_a_plan_error():
    spec = manual([{"name": "p", "num_node": 1, "node_ids": ["gpu-17"], "num_gpus": [8], "train": r(0, 7)}])
    with pytest.raises(PlanError, match="node_ids entry 'gpu-17' matches no node"):
        plan(spec, parse_nodes("1x8"))


def test_range_outside_the_pool_is_a_config_error():
    spec = manual([{"name": "global_pool", "num_node": 1, "num_gpus": 8, "train": r(0, 8)}])
    with pytest.raises(
        ConfigError, match="GPU index 8 is outside pool global_pool, whose pool-global GPU indices are 0-7"
    ):
        plan(spec, parse_nodes("1x8"))


def test_more_workers_than_the_range_holds_names_both_numbers():
    spec = manual([{"name": "global_pool", "num_node": 1, "num_gpus": 8, "train": r(0, 3)}], counts={"train": 6})
    with pytest.raises(ConfigError, match=r"6 train worker\(s\) of 1 GPU each need 6 GPU\(s\) .* holds 4") as e:
        plan(spec, parse_nodes("1x8"))
    assert e.value.problems[0].path == "cluster.train_worker_num"


def test_fewer_workers_than_the_range_warns_with_both_fixes():
    spec = manual([{"name": "global_pool", "num_node": 2, "num_gpus": 4, "train": r(0, 7)}], counts={"train": 3})
    p = plan(spec, parse_nodes("2x4"))
    assert where(p, "train") == [(0, (0,)), (0, (1,)), (0, (2,))]
    (w,) = p.warnings
    assert "idle: node 0 GPU 3; node 1 GPUs 0-3" in w and "train_worker_num: 8" in w and '"0-2"' in w


def test_buffer_worker_num_is_overridden_with_a_warning_naming_both_numbers():
    spec = manual(
        [{"name": "global_pool", "num_node": 3, "num_gpus": 8, "train": r(0, 23), "eval": r(0, 23)}], buffer=1
    )
    p = plan(spec, parse_nodes("3x8"))
    assert where(p, "buffer") == [(0, ()), (1, ()), (2, ())] and p.settings.buffer_worker_num == 3
    assert any("buffer_worker_num: 1 overridden to 3" in w for w in p.warnings)


def test_buffer_range_away_from_train_nodes_is_warned_and_shards_follow_train():
    spec = manual(
        [
            {"name": "train_pool", "num_node": 1, "num_gpus": 8, "train": r(0, 7)},
            {"name": "rollout_pool", "num_node": 1, "num_gpus": 8, "eval": r(0, 7), "buffer": r(0, 7)},
        ]
    )
    p = plan(spec, parse_nodes("2x8"))
    assert where(p, "buffer") == [(0, ())]
    assert any("buffer range in rollout_pool covers nodes [1]" in w for w in p.warnings)


def test_env_takes_the_written_eval_count():
    spec = manual([{"name": "g", "num_node": 1, "num_gpus": 8, "eval": r(0, 7), "env": r(0, 7)}], counts={"eval": 2})
    p = plan(spec, parse_nodes("1x8"))
    assert len(p.by_component("env")) == 2


def test_multi_gpu_workers_cannot_straddle_nodes():
    spec = manual([{"name": "g", "num_node": 2, "num_gpus": 3, "train": r(0, 5)}], counts={"train": 3, "train_gpus": 2})
    with pytest.raises(PlanError, match="train worker 1 needs 2 GPUs on one node"):
        plan(spec, parse_nodes("2x3"))


def test_multi_gpu_worker_shares_only_with_the_same_gpus():
    pools = [{"name": "g", "num_node": 1, "num_gpus": 4, "train": r(0, 3), "eval": r(1, 3)}]
    with pytest.raises(ConfigError, match="owns several GPUs"):
        plan(manual(pools, counts={"train": 2, "train_gpus": 2}), parse_nodes("1x4"))
    same = [{"name": "g", "num_node": 1, "num_gpus": 4, "train": r(0, 3), "eval": r(0, 3)}]
    p = plan(manual(same, counts={"train": 2, "train_gpus": 2, "eval": 2, "eval_gpus": 2}), parse_nodes("1x4"))
    assert [(w.gpus, w.gpu_fraction) for w in p.by_component("eval")] == [((0, 1), 0.5), ((2, 3), 0.5)]


def test_count_without_a_range_is_a_config_error():
    spec = manual([{"name": "g", "num_node": 1, "num_gpus": 8, "train": r(0, 7)}], counts={"eval": 2})
    spec = spec.__class__(
        spec.dialect,
        spec.settings,
        (*spec.components, spec.components[0].__class__("eval", num_workers=2)),
        spec.node_groups,
    )
    with pytest.raises(ConfigError, match="2 eval worker"):
        plan(spec, parse_nodes("1x8"))


def test_bundles_hold_the_residents_cpus_and_workers_request_their_share():
    spec = manual([{"name": "g", "num_node": 1, "num_gpus": 2, "train": r(0, 1), "eval": r(0, 1), "env": r(0, 1)}])
    p = plan(spec, parse_nodes("1x2"))
    gpu_bundles = [b for b in p.bundles if b.gpus]
    assert [(b.node_rank, b.gpus, b.num_cpus) for b in gpu_bundles] == [(0, (0,), 3.0), (0, (1,), 3.0)]
    for b in gpu_bundles:
        residents = [w for w in p.workers if w.bundle == b.index]
        assert abs(sum(w.num_gpus for w in residents) - 1.0) < 1e-9


def test_idle_env_gpus_of_a_whole_rlightning_config_point_at_the_env_groups():
    """Env workers of a whole RLightning config come from its `env:` groups: the advice names them."""
    import dataclasses

    spec = manual([{"name": "g", "num_node": 1, "num_gpus": 4, "train": r(0, 3), "env": r(0, 3)}], counts={"env": 2})
    comps = tuple(dataclasses.replace(c, path="env[0]") if c.name == "env" else c for c in spec.components)
    p = plan(dataclasses.replace(spec, components=comps), parse_nodes("1x4"))
    assert any("Give the env groups 4 workers in all (num_workers) to use them" in w for w in p.warnings)
