"""Properties of incremental planning over random configs, inventories and sequences of resize steps: no worker
that stays ever moves, a plan's reservations never exceed the inventory, ranks stay 0..n-1, and a growth
followed by shrinking back to the old size gives the plan it started from."""

from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlplace.config import load
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import Inventory, parse_nodes
from rlplace.plan import Plan
from rlplace.planner import free_capacity, grow, plan, shrink
from rlplace.planner.resize import Resize

CPUS = 32

inventories = st.lists(st.tuples(st.integers(1, 3), st.sampled_from([0, 1, 2, 4, 8])), min_size=1, max_size=3).map(
    lambda groups: parse_nodes(",".join(f"{n}x{g}" for n, g in groups), num_cpus=CPUS)
)
placements = st.sampled_from(
    [
        {"strategy": s, "env_strategy": e}
        for s in ("disaggregate", "colocate")
        for e in ("default", "node-affinity", "device-colocate")
    ]
    + [{"strategy": "default"}]
)
pool_configs = st.fixed_dictionaries(
    {
        "train_worker_num": st.integers(1, 4),
        "eval_worker_num": st.integers(1, 4),
        "train_each_gpu_num": st.sampled_from([0.5, 1, 2]),
        "eval_each_gpu_num": st.sampled_from([0.5, 1]),
        "placement": placements,
    }
)
#: A node-groups config: actor and rollout on group `g` (every GPU node), an agent process per node.
GROUPS = """\
cluster:
  component_placement:
    actor: {{node_group: cluster, placement: "{actor}"}}
    rollout: {{node_group: cluster, placement: "{rollout}"}}
    agent: {{node_group: node, placement: 0}}
  elastic: {{actor: {{max: 12}}, rollout: {{max: 12}}, agent: {{max: 4}}}}
"""
group_configs = st.sampled_from(
    [
        {"actor": "0-1", "rollout": "2-3"},
        {"actor": "0", "rollout": "1:0-1"},
        {"actor": "0-1:0", "rollout": "2"},
        {"actor": "0-1", "rollout": "0-1"},
    ]
)
steps = st.lists(
    st.tuples(st.sampled_from(["grow", "shrink", "drop"]), st.integers(0, 7), st.integers(1, 4)), max_size=6
)


def check(before: Plan, step: Resize, inventory: Inventory) -> None:
    after = step.plan
    # no worker that stays moves (actors keep their names across renumbering)
    now = {(w.component, w.name): w for w in after.workers}
    for w in before.workers:
        kept = now.get((w.component, w.name))
        if kept is not None:
            assert (kept.node_rank, kept.gpus, kept.gpu_fraction, kept.bundle, kept.group) == (
                w.node_rank,
                w.gpus,
                w.gpu_fraction,
                w.bundle,
                w.group,
            ), w.name
    # ranks 0..n-1, world size n, one name per worker
    for c in after.components:
        ws = after.by_component(c)
        assert [w.rank for w in ws] == list(range(len(ws))) and {w.world_size for w in ws} == {len(ws)}
        assert len({w.name for w in ws}) == len(ws)
    # reservations within the inventory: each GPU in at most one bundle, on a node that has it; new bundles fit
    # what the old plan left free
    held = Counter((b.node_rank, g) for b in after.bundles for g in b.gpus)
    assert all(n == 1 for n in held.values())
    assert all(g < inventory.node(node).num_gpus for node, g in held)
    free = free_capacity(before, inventory)
    for node, bundles in step.reserve_by_node().items():
        assert sum(b.num_cpus for b in bundles) <= free[node].cpus + 1e-9
        assert {g for b in bundles for g in b.gpus} <= set(free[node].gpus)
    assert len({b.reservation for b in step.reserve}) <= 1
    # seats and shares: no bundle holds more workers than seats, no GPU more than all of it
    by_bundle = defaultdict(list)
    for w in after.workers:
        if w.bundle is not None:
            by_bundle[w.bundle].append(w)
    bundles = {b.index: b for b in after.bundles}
    for index, ws in by_bundle.items():
        b = bundles[index]
        assert len(ws) <= b.seats and all(w.node_rank == b.node_rank for w in ws)
        if b.gpus:
            assert sum(w.gpu_fraction for w in ws) <= 1 + 1e-9
    # released bundles left; reserved ones arrived
    assert not {b.index for b in step.release} & set(bundles)
    assert {b.index for b in step.reserve} <= set(bundles)


def run(spec, inventory: Inventory, ops) -> None:
    try:
        p = plan(spec, inventory)
    except (PlanError, ConfigError):
        return  # too small an inventory, or a config the planner refuses: tested elsewhere
    for op, pick, n in ops:
        names = list(p.elastic)
        if not names:
            return
        c = names[pick % len(names)]
        size, r = len(p.by_component(c)), p.elastic[c]
        if op == "grow" and size < r.max:
            step = grow(spec, p, inventory, c, min(n, r.max - size), partial=True)
            back = shrink(step.plan, c, to=size) if step.change(c) else None
            if back is not None:  # a growth undone gives the plan before it
                assert back.plan == p
        elif op == "shrink" and size > r.min:
            step = shrink(p, c, to=max(r.min, size - n))
        elif op == "drop" and size > r.min:
            step = shrink(p, c, ranks=[p.by_component(c)[n % size].rank])
        else:
            continue
        check(p, step, inventory)
        p = step.plan


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=pool_configs, inventory=inventories, ops=steps)
def test_pool_strategies_resize_without_moving_a_worker_or_exceeding_the_inventory(cluster, inventory, ops):
    t, e = cluster["train_worker_num"], cluster["eval_worker_num"]
    elastic = {"train": {"max": t + 4}, "eval": {"max": e + 4}}
    run(load({"cluster": {**cluster, "elastic": elastic}}), inventory, ops)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed=group_configs, inventory=inventories, ops=steps)
def test_node_groups_resize_without_moving_a_worker_or_exceeding_the_inventory(placed, inventory, ops):
    run(load(GROUPS.format(**placed)), inventory, ops)
