"""Auto mode: strategies default / disaggregate / colocate and the env strategies."""

from __future__ import annotations

import pytest
from tests.planner.specs import auto

from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.model import PlacementSettings
from rlplace.planner import estimate, plan


def where(p, component):
    return [(w.node_rank, w.gpus) for w in p.by_component(component)]


def test_disaggregate_puts_pools_on_disjoint_nodes():
    p = plan(auto("disaggregate", "default", train=2, eval=2), parse_nodes("2x4"))
    assert where(p, "train") == [(0, (0,)), (0, (1,))]
    assert where(p, "eval") == [(1, (0,)), (1, (1,))]
    assert where(p, "env") == [(1, (2,)), (1, (3,))]
    assert where(p, "buffer") == [(0, ())]
    assert [g.name for g in p.groups] == ["train_pool", "rollout_pool"]
    assert p.settings.buffer_worker_num == 1 and not p.settings.is_colocated and not p.warnings


def test_disaggregate_shares_a_node_with_a_warning_when_it_must():
    p = plan(auto("disaggregate", train=2, eval=2), parse_nodes("1x8"))
    assert [g.name for g in p.groups] == ["global_pool"]
    assert where(p, "train") == [(0, (0,)), (0, (1,))]
    assert where(p, "eval") == [(0, (2,)), (0, (3,))]
    assert where(p, "env") == [(0, (4,)), (0, (5,))]
    assert len(p.warnings) == 1 and "cannot hold train_pool (2 GPUs) and rollout_pool (4 GPUs)" in p.warnings[0]


def test_disaggregate_too_small_names_demand_and_supply():
    with pytest.raises(PlanError, match=r"needs 6 GPU.*train_pool 2.*rollout_pool 4.*has 4"):
        plan(auto("disaggregate", train=2, eval=2), parse_nodes("2x2"))


def test_default_pins_only_buffer_shards():
    p = plan(auto("default", train=2, eval=2), parse_nodes("2x4"))
    assert not p.uses_placement_groups and p.bundles == ()
    for c in ("train", "eval", "env"):
        assert [(w.node_rank, w.gpus, w.gpu_fraction, w.bundle) for w in p.by_component(c)] == [
            (None, (), 1.0, None)
        ] * 2
    assert where(p, "buffer") == [(0, ()), (1, ())]
    assert p.settings.strategy == "default" and p.settings.buffer_worker_num == 2


def test_default_buffer_shards_at_most_one_per_train_worker_and_skip_cpu_nodes():
    p = plan(auto("default", train=1), parse_nodes("1x0,3x2"))
    assert where(p, "buffer") == [(1, ())]
    p = plan(auto("default", buffer=3, train=1), parse_nodes("1x0,2x2"))
    assert where(p, "buffer") == [(1, ()), (2, ()), (1, ())]


def test_default_demand_beyond_inventory_is_a_plan_error():
    with pytest.raises(PlanError, match=r"ask for 6 GPU.*inventory has 4"):
        plan(auto("default", train=2, eval=2), parse_nodes("1x4"))


def test_colocate_device_colocate_shares_each_gpu_three_ways():
    p = plan(auto("colocate", "device-colocate", train=2, eval=2), parse_nodes("2x4"))
    for c in ("train", "eval", "env"):
        assert where(p, c) == [(0, (0,)), (0, (1,))]
        assert all(abs(w.gpu_fraction - 1 / 3) < 1e-9 for w in p.by_component(c))
    assert where(p, "buffer") == [(0, ())]
    assert p.settings.is_colocated and p.settings.enable_offload
    bundle = p.bundles[p.by_component("train")[0].bundle]
    assert bundle.gpus == (0,) and bundle.num_cpus == 3.0


def test_colocate_env_default_gives_env_its_own_gpus_and_train_shares_eval():
    p = plan(auto("colocate", train=2, eval=2), parse_nodes("1x4"))
    assert where(p, "eval") == where(p, "train") == [(0, (0,)), (0, (1,))]
    assert where(p, "env") == [(0, (2,)), (0, (3,))]
    assert [w.gpu_fraction for w in p.by_component("env")] == [1.0, 1.0]
    assert [w.gpu_fraction for w in p.by_component("train")] == [0.5, 0.5]


def test_colocate_spans_nodes_and_buffer_follows_train_nodes_overriding_the_written_count():
    p = plan(auto("colocate", "device-colocate", buffer=5, train=8, eval=8), parse_nodes("3x4"))
    assert sorted({n for n, _ in where(p, "train")}) == [0, 1]
    assert where(p, "buffer") == [(0, ()), (1, ())]
    assert any("buffer_worker_num: 5 overridden to 2" in w for w in p.warnings)


def test_colocate_too_small_is_a_plan_error():
    with pytest.raises(PlanError, match=r"global_pool needs 6 GPU.*eval \+ env.*has 4"):
        plan(auto("colocate", train=2, eval=3), parse_nodes("1x4"))


def rows(p, *components):
    """The expected-plan form: (component, rank, node, GPUs, share, group) of every worker, in plan order."""
    return [
        (w.component, w.rank, w.node_rank, w.gpus, round(w.gpu_fraction, 3), w.group)
        for w in p.workers
        if not components or w.component in components
    ]


def test_disaggregate_device_colocate_expected_plan():
    """As RLightning plans it: train_pool isolated, env i on eval i's GPU in rollout_pool, 1/2 each."""
    p = plan(auto("disaggregate", "device-colocate", train=4, eval=4), parse_nodes("2x4"))
    assert rows(p) == [
        *[("train", i, 0, (i,), 1.0, "train_pool") for i in range(4)],
        *[("eval", i, 1, (i,), 0.5, "rollout_pool") for i in range(4)],
        *[("env", i, 1, (i,), 0.5, "rollout_pool") for i in range(4)],
        ("buffer", 0, 0, (), 0.0, "train_pool"),
    ]
    assert p.settings.strategy == "disaggregate" and p.settings.env_strategy == "device-colocate"
    assert not p.settings.is_colocated and not p.warnings
    assert [(g.name, g.node_ranks) for g in p.groups] == [("train_pool", (0,)), ("rollout_pool", (1,))]


def test_disaggregate_device_colocate_demand_is_train_plus_max_of_eval_and_env():
    # 4 + max(4, 6) = 10 GPUs fit 3x4; eval + env (4 + 6) would need 14
    p = plan(auto("disaggregate", "device-colocate", train=4, eval=4, env=6), parse_nodes("3x4"))
    assert where(p, "eval") == [(1, (0,)), (1, (1,)), (1, (2,)), (1, (3,))]
    assert where(p, "env") == [(1, (0,)), (1, (1,)), (1, (2,)), (1, (3,)), (2, (0,)), (2, (1,))]
    assert [round(w.gpu_fraction, 3) for w in p.by_component("env")] == [0.5] * 4 + [1.0] * 2
    with pytest.raises(PlanError, match=r"needs 11 GPU.*rollout_pool 7 = max\(eval, env\): device-colocate"):
        plan(auto("disaggregate", "device-colocate", train=4, eval=4, env=7), parse_nodes("2x5"))


def test_disaggregate_device_colocate_on_one_node_keeps_train_apart_and_pairs_eval_with_env():
    p = plan(auto("disaggregate", "device-colocate", train=4, eval=4), parse_nodes("1x8"))
    assert [g.name for g in p.groups] == ["global_pool"] and any("disjoint nodes" in w for w in p.warnings)
    assert where(p, "train") == [(0, (g,)) for g in range(4)]
    assert where(p, "eval") == where(p, "env") == [(0, (g,)) for g in range(4, 8)]


def test_device_colocate_under_strategy_default_pins_nothing():
    """The loader warns that env_strategy has no effect under strategy default; the planner leaves workers to Ray."""
    p = plan(auto("default", "device-colocate"), parse_nodes("2x4"))
    assert not p.uses_placement_groups and all(w.node_rank is None for w in p.workers if w.component != "buffer")


def test_is_colocated_contradicting_strategy_is_a_config_error():
    spec = auto("disaggregate")
    spec = spec.__class__(spec.dialect, PlacementSettings(strategy="disaggregate", is_colocated=True), spec.components)
    with pytest.raises(ConfigError, match=r"contradicts placement\.strategy: disaggregate"):
        plan(spec, parse_nodes("2x4"))


def test_is_colocated_alone_selects_colocate_and_offload_follows():
    spec = auto()
    spec = spec.__class__(spec.dialect, PlacementSettings(is_colocated=True), spec.components)
    p = plan(spec, parse_nodes("1x8"))
    assert p.settings.strategy == "colocate" and p.settings.enable_offload


def test_explicit_offload_false_beside_colocation_is_kept_with_a_warning():
    spec = auto()
    s = PlacementSettings(strategy="colocate", env_strategy="device-colocate", enable_offload=False)
    p = plan(spec.__class__(spec.dialect, s, spec.components), parse_nodes("1x8"))
    assert p.settings.is_colocated and p.settings.enable_offload is False
    assert any("enable_offload: false" in w for w in p.warnings)


def test_unwritten_counts_default_to_one_each():
    p = plan(auto("colocate", "device-colocate"), parse_nodes("1x8"))
    assert {c: len(p.by_component(c)) for c in ("train", "eval", "env", "buffer")} == dict.fromkeys(
        ("train", "eval", "env", "buffer"), 1
    )
    assert where(p, "train") == where(p, "eval") == where(p, "env") == [(0, (0,))]


def test_node_affinity_puts_env_on_the_node_of_its_eval():
    p = plan(auto("disaggregate", "node-affinity", train=4, eval=4), parse_nodes("3x4"))
    ev, env = p.by_component("eval"), p.by_component("env")
    assert [w.node_rank for w in ev] == [w.node_rank for w in env] == [1, 1, 2, 2]
    assert not {(w.node_rank, w.gpus) for w in ev} & {(w.node_rank, w.gpus) for w in env}, "env has its own GPUs"


def test_fractional_gpus_pack_two_workers_per_gpu():
    p = plan(auto("disaggregate", train=1, eval=4, gpus={"eval": 0.5, "env": 0.5}), parse_nodes("2x4"))
    assert where(p, "eval") == [(1, (0,)), (1, (0,)), (1, (1,)), (1, (1,))]
    assert where(p, "env") == [(1, (2,)), (1, (2,)), (1, (3,)), (1, (3,))]
    assert all(w.gpu_fraction == 0.5 for w in p.by_component("eval"))


def test_multi_gpu_workers_get_whole_gpus_on_one_node():
    p = plan(auto("disaggregate", train=2, eval=1, gpus={"train": 2}), parse_nodes("2x4"))
    train = p.by_component("train")
    assert [(w.node_rank, w.gpus, w.gpu_fraction, w.num_gpus) for w in train] == [
        (0, (0, 1), 1.0, 2.0),
        (0, (2, 3), 1.0, 2.0),
    ]
    assert p.bundles[train[0].bundle].gpus == (0, 1)


def test_local_rank_counts_per_node():
    p = plan(auto("colocate", "device-colocate", train=6, eval=6), parse_nodes("2x4"))
    assert [(w.node_rank, w.local_rank) for w in p.by_component("train")] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 0),
        (1, 1),
    ]


def test_planning_is_deterministic():
    spec, inv = auto("disaggregate", train=3, eval=5), parse_nodes("4x4")
    assert plan(spec, inv) == plan(spec, inv)


def test_colocate_refuses_multi_gpu_workers_beside_other_sizes():
    with pytest.raises(ConfigError, match=r"train_each_gpu_num: 2, eval_each_gpu_num: 1"):
        plan(auto("colocate", train=2, eval=2, gpus={"train": 2}), parse_nodes("1x8"))
    p = plan(
        auto("colocate", "device-colocate", train=2, eval=2, gpus={"train": 2, "eval": 2, "env": 2}), parse_nodes("1x4")
    )
    assert [(w.gpus, round(w.gpu_fraction, 3)) for w in p.by_component("env")] == [((0, 1), 0.333), ((2, 3), 0.333)]


@pytest.mark.parametrize(("strategy", "nodes"), [("disaggregate", "4x2/rack=2"), ("colocate", "3x2/rack=1")])
def test_cpu_only_env_worker_i_lands_on_the_node_of_the_eval_worker_it_steps_with(strategy, nodes):
    """The estimate pairs env i with eval i * eval / env; the planner puts them on one node, so no step's
    observations cross a node or a rack (round-robin interleaved them: 128 MB per step across nodes here)."""
    inventory = parse_nodes(nodes)
    p = plan(auto(strategy, train=2, eval=6, env=12, gpus={"env": 0.0}), inventory)
    evals = [w.node_rank for w in p.by_component("eval")]
    assert [w.node_rank for w in p.by_component("env")] == [evals[i * 6 // 12] for i in range(12)]
    est = estimate(p, 10**9, 256 * 10**6, inventory)
    assert est.interaction_bytes == 0 and set(evals) != {evals[0]}
