"""Properties over random inventories and worker counts: every auto pool plan re-plans identically from
its export, and no plan oversubscribes a GPU or places a worker on a GPU its node lacks."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlplace.config import load
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.planner import export_resource_pool, plan

inventories = st.lists(st.tuples(st.integers(1, 3), st.sampled_from([0, 1, 2, 4, 8])), min_size=1, max_size=3).map(
    lambda groups: ",".join(f"{n}x{g}" for n, g in groups)
)

configs = st.fixed_dictionaries(
    {
        "train_worker_num": st.integers(1, 10),
        "eval_worker_num": st.integers(1, 10),
        "train_each_gpu_num": st.sampled_from([0.5, 1, 2]),
        "eval_each_gpu_num": st.sampled_from([0.5, 1]),
        "env_worker_num": st.integers(1, 10),
        "env_each_gpu_num": st.sampled_from([0, 0.5, 1]),  # 0: CPU-only env workers (their range is the pool's)
        "placement": st.one_of(
            st.just({"mode": "auto", "strategy": "colocate", "env_strategy": "device-colocate"}),
            st.sampled_from(["disaggregate", "colocate"]).flatmap(
                lambda s: st.sampled_from(["default", "node-affinity"]).map(
                    lambda e: {"mode": "auto", "strategy": s, "env_strategy": e}
                )
            ),
        ),
    }
)


def placement(p) -> list[tuple]:
    return [(w.component, w.rank, w.node_rank, w.gpus, w.gpu_fraction, w.bundle) for w in p.workers]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=configs, nodes=inventories)
def test_auto_plans_fit_their_nodes_and_round_trip_through_export(cluster, nodes):
    inventory = parse_nodes(nodes)
    try:
        auto = plan(load({"cluster": cluster}), inventory)
    except PlanError:
        return  # too small an inventory: the error path has its own tests
    except ConfigError as e:  # colocate with unequal multi-GPU workers (tested in test_auto)
        assert "must all ask the same number" in str(e)
        return
    share: dict[tuple[int, int], float] = defaultdict(float)
    for w in auto.workers:
        assert all(g < inventory.node(w.node_rank).num_gpus for g in w.gpus)
        assert w.bundle is not None and auto.bundles[w.bundle].node_rank == w.node_rank
        for g in w.gpus:
            share[(w.node_rank, g)] += w.gpu_fraction
    assert all(total <= 1 + 1e-9 for total in share.values()), "a GPU is oversubscribed"
    manual = {**cluster, "placement": {"mode": "manual"}}
    again = plan(load({"cluster": manual, **export_resource_pool(auto)}), inventory)
    assert placement(again) == placement(auto)
    assert again.bundles == auto.bundles
