"""The cost estimate: GPUs used/idle and bytes crossing nodes per iteration."""

from __future__ import annotations

from tests.planner.specs import auto

from rlplace.inventory import parse_nodes
from rlplace.planner import estimate, plan

GB, MB = 10**9, 10**6


def test_disaggregate_pays_one_model_copy_per_eval_node_and_all_experience():
    inv = parse_nodes("3x4")
    p = plan(auto("disaggregate", train=4, eval=4), inv)  # train node 0, eval node 1, env node 2
    e = estimate(p, 14 * GB, 256 * MB, inv)
    assert (e.gpus_used, e.gpus_idle) == (12, 0)
    assert e.weight_sync_bytes == 14 * GB
    assert e.experience_bytes == 256 * MB
    spread = plan(auto("disaggregate", "node-affinity", train=4, eval=4), inv)  # eval on nodes 1 and 2
    assert estimate(spread, 14 * GB, 256 * MB, inv).weight_sync_bytes == 2 * 14 * GB


def test_colocate_keeps_weight_sync_and_experience_on_the_node():
    inv = parse_nodes("2x4")
    e = estimate(plan(auto("colocate", "device-colocate", train=8, eval=8), inv), 14 * GB, 256 * MB, inv)
    assert (e.gpus_used, e.gpus_idle, e.weight_sync_bytes, e.experience_bytes) == (8, 0, 0, 0)


def test_default_strategy_traffic_is_unknown():
    inv = parse_nodes("2x4")
    e = estimate(plan(auto("default", train=2, eval=2), inv), GB, MB, inv)
    assert (e.gpus_used, e.gpus_idle, e.weight_sync_bytes, e.experience_bytes) == (6, 2, None, None)
