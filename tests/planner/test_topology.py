"""Topology-aware placement: where racks and NVLink domains come from, the hard rule for model-parallel groups,
the rack-by-rack split of disaggregated plans, the estimate per level, and growth and failover near what they join."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
from tests.planner.specs import auto

from rlplace.config import load
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import Inventory, Node, load_inventory, parse_nodes
from rlplace.model import DEFAULT_TOPOLOGY, ModelParallel
from rlplace.plan import Plan
from rlplace.planner import estimate, grow, plan
from rlplace.planner.topology import nearest, read_topology, spare_order

RLINF = pathlib.Path(__file__).resolve().parents[1] / "data" / "frameworks" / "rlinf" / "config"
GB = 10**9


def blind(spec):
    return dataclasses.replace(spec, topology=())


def tp(spec, size):
    """`spec` with its Megatron components in tensor-parallel groups of `size` consecutive ranks."""
    mp = ModelParallel((("tensor-parallel", size, f"actor.model.tensor_model_parallel_size: {size}"),))
    comps = tuple(dataclasses.replace(c, model_parallel=mp) if c.model_parallel else c for c in spec.components)
    return dataclasses.replace(spec, components=comps)


def placement(p: Plan, component: str) -> list[tuple]:
    return [(w.rank, w.node_rank, w.gpus, w.gpu_fraction) for w in p.by_component(component)]


# -- where the topology comes from --------------------------------------------------------------------------


def test_the_compact_nodes_form_gives_racks_and_domains_without_one_entry_per_node():
    inv = parse_nodes("1026x4:GB200/rack=18/nvlink_domain=rack,2x0")
    assert len(inv) == 1028 and inv.total_gpus == 4104
    assert inv.node(17).labels == {"rack": "rack-0", "nvlink-domain": "nvl-0"}
    assert inv.node(18).labels == {"rack": "rack-1", "nvlink-domain": "nvl-1"}
    assert inv.node(1025).labels["rack"] == "rack-56" and inv.node(1026).labels == {}
    zones = parse_nodes("512x8:H100/rack=16/zone=256")
    assert zones.node(256).labels == {"rack": "rack-16", "ray.io/availability-zone": "zone-1"}


def test_units_count_on_across_terms_and_every_existing_form_still_reads():
    inv = parse_nodes("4x8/rack=2,4x8:A800/rack=4")
    assert [n.labels["rack"] for n in inv.nodes] == ["rack-0"] * 2 + ["rack-1"] * 2 + ["rack-2"] * 4
    old = parse_nodes("8x8:A800,8x8:RTX4090,2x0,2x8:Ascend910B@NPU")
    assert [n.labels for n in old.nodes] == [{}] * 20 and old.node(19).accelerator_resource == "NPU"


@pytest.mark.parametrize(
    ("nodes", "says"),
    [
        ("10x8/rack=3", "10 node(s) do not split into units of 3: the last would hold 1"),
        ("16x8/rack=4/zone=6", "units of 6"),
        ("16x8/rack=4/zone=2", "a zone of 2 nodes does not hold whole rack units of 4"),
        ("4x8/rak=2", "unknown topology level; did you mean 'rack'?"),
        ("4x8/rack=x", "must be a number of nodes per rack"),
        ("4x8/rack", "is not /LEVEL=N"),
    ],
)
def test_a_compact_form_that_cannot_be_read_says_why(nodes, says):
    with pytest.raises(ConfigError, match=None) as e:
        parse_nodes(nodes)
    assert says in str(e.value)


def test_the_inventory_file_takes_the_compact_form_and_checks_label_values_with_their_line(tmp_path):
    good = tmp_path / "nodes.yaml"
    good.write_text("nodes:\n  - {count: 36, gpus: 4, model: GB200, topology: {rack: 18, nvlink_domain: rack}}\n")
    assert load_inventory(str(good)).node(35).labels == {"rack": "rack-1", "nvlink-domain": "nvl-1"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - count: 2\n    gpus: 8\n    labels: {rack: 7}\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(str(bad))
    expected = 'nodes[0].labels.rack: a label value must be text, as Ray\'s node labels are: write rack: "7"'
    assert str(e.value.problems[0]) == f"{bad}:4: {expected}"
    unit = tmp_path / "unit.yaml"
    unit.write_text("nodes:\n  - count: 5\n    topology:\n      rack: 2\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(str(unit))
    assert e.value.problems[0].line == 4 and "5 node(s) do not split into units of 2" in str(e.value)


def test_cluster_topology_names_the_labels_in_both_dialects_and_refuses_unknown_levels():
    pools = load("cluster:\n  train_worker_num: 2\n  topology:\n    rack: my-rack\n    zone: null\n")
    assert [(lv.name, lv.labels, lv.written) for lv in pools.topology] == [
        ("nvlink_domain", ("nvlink-domain", "ray.io/gpu-domain"), False),
        ("rack", ("my-rack",), True),
    ]
    groups = load("cluster:\n  num_nodes: 1\n  component_placement: {actor: all}\n  topology: {nvlink_domain: nvl}\n")
    assert groups.topology[0].labels == ("nvl",) and groups.topology[0].line == 4
    with pytest.raises(ConfigError) as e:
        load("cluster:\n  train_worker_num: 2\n  topology:\n    racks: rack\n    zone: [1]\n")
    text = str(e.value)
    assert "<string>:4: cluster.topology.racks: unknown key 'racks' in the topology; did you mean 'rack'?" in text
    assert "<string>:5: cluster.topology.zone: 1 is not a node label key" in text


def test_bad_labels_are_warnings_or_errors_never_a_traceback():
    spec = load("cluster:\n  train_worker_num: 2\n  topology:\n    rack: my-rack\n")
    p = plan(spec, parse_nodes("2x8"))
    assert any(
        "no node carries the label my-rack of level rack (cluster.topology.rack at <string>:4)" in w for w in p.warnings
    )
    domain = {"nvlink-domain": "nvl-0"}
    mixed = [Node(0, 8, "H100", labels=domain), Node(1, 8, "H200", labels=domain), Node(2, 8, "H100", labels={})]
    mixed += [Node(3, 8, "H100", labels={"rack": "r1"})]
    warnings: list[str] = []
    read_topology(DEFAULT_TOPOLOGY, mixed, warnings)
    assert any("NVLink domain nvl-0 holds nodes of different GPU models (H100, H200)" in w for w in warnings)
    assert any("nodes 0-2 carry no rack label" in w for w in warnings)
    with pytest.raises(PlanError, match=r"node 0: the label rack=7 is not text"):
        read_topology(DEFAULT_TOPOLOGY, [Node(0, 8, labels={"rack": 7})])  # type: ignore[dict-item]


# -- the hard rule --------------------------------------------------------------------------------------------


def test_where_rlplace_places_the_actor_no_group_spans_two_domains_and_the_idle_gpus_are_named():
    spec = tp(dataclasses.replace(load(RLINF / "grpo_dynamic.yaml"), num_nodes=6), 8)
    inv = parse_nodes("6x4/nvlink_domain=3")  # two domains of 12 GPUs: one group of 8 each
    p = plan(spec, inv)
    nodes = [w.node_rank for w in p.by_component("actor")]
    assert nodes == [0] * 4 + [1] * 4 + [3] * 4 + [4] * 4
    assert any("rlplace leaves 4 GPU(s) of each of its 2 NVLink domains idle (8 in all)" in w for w in p.warnings)
    assert not [g for g in p.split_groups if g.component == "actor"]
    assert len(blind_actor(spec, inv)) == 24  # RLinf's AUTO mode: every GPU, a group across the domains


def blind_actor(spec, inv):
    comps = tuple(dataclasses.replace(c, chosen=False) for c in spec.components)
    return plan(dataclasses.replace(blind(spec), components=comps), inv).by_component("actor")


def test_a_group_larger_than_every_domain_spans_the_fewest_domains_with_a_warning():
    spec = tp(dataclasses.replace(load(RLINF / "grpo_dynamic.yaml"), num_nodes=4), 12)
    p = plan(spec, parse_nodes("4x8"))  # every node its own domain of 8 GPUs
    actor = p.by_component("actor")
    assert len(actor) == 24 and [w.node_rank for w in actor[:12]] == [0] * 8 + [1] * 4
    assert any("larger than every NVLink domain" in w and "12 ranks" in w for w in p.warnings)
    assert {len(g.domains) for g in p.split_groups if g.component == "actor"} == {2}


def test_written_ranges_are_kept_exactly_and_the_groups_they_split_are_named():
    spec = tp(dataclasses.replace(load(RLINF / "grpo_collocated.yaml"), num_nodes=6), 8)
    inv = parse_nodes("6x4/nvlink_domain=3")
    p, before = plan(spec, inv), plan(blind(spec), inv)
    for c in ("actor", "rollout", "reward"):
        assert placement(p, c) == placement(before, c)
    (warning,) = [w for w in p.warnings if w.startswith("actor:")]
    assert warning.startswith(
        "actor: 1 of its 3 tensor-parallel groups (8 consecutive ranks each: actor.model.tensor_model_parallel_size: "
        "8) span NVLink domains: group 1 (ranks 8-15) spans nvl-0 (node 2) and nvl-1 (node 3). Kept as written"
    )
    # 3 groups of 8 on two domains of 12 GPUs: no suggestion can hold them all, and the warning says so
    assert warning.endswith(
        "no choice of its node groups' GPUs keeps all 3 groups each in one domain: their NVLink domains hold 2 whole "
        "group(s), on resource ranks 0-7, 12-19"
    )
    split = [(g.component, g.ranks, g.domains) for g in p.split_groups]
    assert split == [("actor", tuple(range(8, 16)), ("nvl-0", "nvl-1"))]


def test_a_split_group_warning_suggests_ranks_that_hold_every_group():
    """Written 2-9 on nodes of 4 GPUs (each its own domain), groups of 4: the suggestion was 4-7, one group's
    ranks for two groups; it is now 0-7, from the node group's other GPUs as well."""
    text = (
        "cluster:\n  num_nodes: 3\n  component_placement:\n    actor: 2-9\n    rollout: 10-11\n"
        "actor:\n  model:\n    tensor_model_parallel_size: 4\nrollout:\n  tensor_parallel_size: 1\n"
    )
    p = plan(load(text), parse_nodes("3x4"))
    (warning,) = [w for w in p.warnings if w.startswith("actor:")]
    assert "2 of its 2 tensor-parallel groups" in warning
    assert warning.endswith("Kept as written; resource ranks that keep every group in one domain: 0-7")


def test_the_groups_come_from_rlinfs_megatron_sizes():
    spec = load(RLINF / "grpo_collocated.yaml")
    actor = spec.component("actor")
    assert actor.model_parallel.groups == (("tensor-parallel", 4, "actor.model.tensor_model_parallel_size: 4"),)
    text = (
        (RLINF / "grpo_disaggregated.yaml")
        .read_text()
        .replace(
            "tensor_model_parallel_size: 2",
            "tensor_model_parallel_size: 2\n    context_parallel_size: 2\n"
            "    expert_model_parallel_size: 4\n    expert_tensor_parallel_size: 1",
        )
    )
    groups = load(text).component("inference").model_parallel  # RLinf's inference takes the actor's sizes
    assert [(k, s) for k, s, _ in groups.groups] == [("tensor/context-parallel", 4), ("expert-parallel", 4)]
    assert groups.size == 4


# -- soft rules ------------------------------------------------------------------------------------------------


def test_a_disaggregated_plan_puts_train_and_rollout_in_every_rack_and_weight_sync_stays_inside():
    spec = auto("disaggregate", "default", train=16, eval=8, env=8)
    inv = parse_nodes("8x4/rack=4")
    p = plan(spec, inv)
    pools = {g.name: g.node_ranks for g in p.groups}
    assert pools == {"train_pool": (0, 1, 4, 5), "rollout_pool": (2, 3, 6, 7)}
    est = estimate(p, 14 * GB, inventory=inv)
    assert est.crossing == {"node": 2 * 14 * GB, "rack": 0}  # eval on nodes 2 and 6, env on 3 and 7
    assert est.crossing_lower_bound["rack"] == 0
    assert {f.src for f in est.flows if f.kind == "weights"} == {0, 4}  # each rack from its own train node
    before = plan(blind(spec), inv)
    assert {g.name: g.node_ranks for g in before.groups} == {"train_pool": (0, 1, 2, 3), "rollout_pool": (4, 5, 6, 7)}
    counted = estimate(dataclasses.replace(before, topology=p.topology), 14 * GB, inventory=inv)
    assert counted.crossing["rack"] == 2 * 14 * GB  # eval on nodes 4-5, in the rack without a train node


def test_an_inventory_without_labels_plans_as_before():
    for spec in (auto("disaggregate", "node-affinity", train=4, eval=4, env=4), auto("colocate", train=8, eval=8)):
        inv = parse_nodes("4x4")
        assert plan(spec, inv).workers == plan(blind(spec), inv).workers
        assert estimate(plan(spec, inv)).flows == estimate(plan(blind(spec), inv)).flows


def test_the_lower_bound_counts_what_no_placement_can_avoid():
    # 1 train node, 6 rollout nodes in racks of 2: at most one rack holds a trainer, so 5 receivers cross
    p = plan(auto("disaggregate", "default", train=2, eval=12, env=0), parse_nodes("8x2/rack=2"))
    est = estimate(p, GB, inventory=parse_nodes("8x2/rack=2"))
    assert est.crossing_lower_bound == {"node": 6 * GB, "rack": 5 * GB}
    assert est.crossing["rack"] >= est.crossing_lower_bound["rack"]


def test_env_and_rollout_on_different_nodes_are_counted_whatever_the_names():
    spec = load(pathlib.Path(__file__).resolve().parents[1] / "data" / "spec_examples" / "hetero-18-nodes.yaml")
    est = estimate(plan(spec, parse_nodes("8x8:A800,8x8:RTX4090,2x0")), batch_bytes=256 * 10**6)
    assert est.roles["interaction"] == ("env", "rollout")
    assert est.interaction_bytes == 256 * 10**6  # both robots' env workers step with rollout workers elsewhere
    assert est.to_dict()["crossing_per_step"] == {"node": 256 * 10**6}


def test_growth_takes_a_node_in_the_rack_of_the_workers_it_joins_first():
    spec = load(
        "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  env_worker_num: 1\n  env_each_gpu_num: 0\n"
        "  placement: {strategy: disaggregate}\n  elastic: {eval: {max: 4}}\n"
    )
    racks = ["r0", "r1", "r9", "r1"]  # node 3 joins the rack of the eval workers (node 1), node 2 another one
    live = Inventory(tuple(Node(i, 2, num_cpus=16.0, labels={"rack": r}) for i, r in enumerate(racks)))
    p = plan(spec, Inventory(live.nodes[:2]))
    assert {w.node_rank for w in p.by_component("eval")} == {1}
    step = grow(spec, p, live, "eval", 2)
    assert {w.node_rank for w in step.change("eval").added} == {3}
    assert step.plan.topology.units["rack"] == tuple(racks)  # the grown plan knows the nodes it joined
    assert estimate(step.plan, GB).crossing["rack"] == 2 * GB  # nodes 1 and 3 (r1) pull from node 0 (r0)
    assert grow(blind(spec), p, live, "eval", 2).change("eval").added[0].node_rank == 2  # blind: rank order
    assert nearest(read_topology(spec.topology, live), {1}, [0, 2, 3]) == [3, 0, 2]


def test_a_lost_node_takes_a_spare_of_its_rack_and_a_rack_keeps_its_only_spare():
    lost = Node(3, 8, "H100", labels={"rack": "r0", "ray.io/availability-zone": "z0"})

    def spare(name, rack, zone="z0"):
        return Node(-1, 8, "H100", node_id=name, labels={"rack": rack, "ray.io/availability-zone": zone})

    spares = [
        spare("far", "r9", "z1"),
        spare("zone-mate", "r2"),
        spare("alone", "r1"),
        spare("crowd", "r3"),
        spare("crowd2", "r3"),
        spare("rack-mate", "r0"),
    ]
    order = [s.node_id for s in spare_order(lost, spares)]
    assert order[0] == "rack-mate"
    assert order.index("crowd") < order.index("alone") and order[-1] == "far"  # r1's only spare stays for r1


def test_a_saved_plan_keeps_its_topology_and_split_groups():
    spec = tp(dataclasses.replace(load(RLINF / "grpo_collocated.yaml"), num_nodes=6), 8)
    p = plan(spec, parse_nodes("6x4/nvlink_domain=3"))
    doc = p.to_dict()
    assert doc["topology"]["levels"] == [{"name": "nvlink_domain", "labels": ["nvlink-domain", "ray.io/gpu-domain"]}]
    assert doc["topology"]["nodes"]["nvlink_domain"] == ["nvl-0"] * 3 + ["nvl-1"] * 3
    assert Plan.from_dict(doc) == p and Plan.from_dict(doc).split_groups == p.split_groups
    est = estimate(p).to_dict()
    assert {"crossing", "crossing_lower_bound", "crossing_per_step", "interaction_bytes", "sampling_bytes"} <= set(est)


@pytest.mark.parametrize(
    "rest",
    ["", "env:\n  train: {total_num_envs: 4}\n", "rollout: [not, a, section]\n"],
    ids=["actor-only", "embodied", "rollout-not-a-mapping"],
)
def test_model_parallel_groups_are_checked_in_every_node_groups_config(rest):
    """Only configs with a top-level `rollout:` mapping had their `actor.model` groups read before."""
    text = (
        "cluster:\n  num_nodes: 3\n  component_placement:\n    actor: 2-9\n"
        "actor:\n  model:\n    tensor_model_parallel_size: 4\n" + rest
    )
    p = plan(load(text), parse_nodes("3x4"))
    assert any(w.startswith("actor: 2 of its 2 tensor-parallel groups") for w in p.warnings), p.warnings
    assert [g.ranks for g in p.split_groups] == [(0, 1, 2, 3), (4, 5, 6, 7)]


CROSSING = """\
cluster:
  train_worker_num: 8
  eval_worker_num: 8
  env_worker_num: 8
  env_each_gpu_num: 0
  placement: {mode: manual}
  resource_pool:
"""


def test_manual_ranges_whose_weight_sync_crosses_racks_get_ranges_that_would_not():
    """Train on nodes 0-1 (rack 0), eval on nodes 2-3 (rack 1): both eval nodes pull across racks. The hint's
    pools, pasted in, keep it inside the racks, and then no hint is given."""
    inv = parse_nodes("4x4/rack=2")
    text = CROSSING + (
        "    - {name: train_pool, num_node: 2, num_gpus: 4, train: 0-7}\n"
        "    - {name: rollout_pool, num_node: 2, num_gpus: 4, eval: 0-7, env: 0-7}\n"
    )
    p = plan(load(text), inv)
    assert estimate(p, GB, inventory=inv).crossing["rack"] == 2 * GB
    (hint,) = [w for w in p.warnings if w.startswith("weight sync:")]
    assert hint.startswith("weight sync: 2 node(s) of eval workers pull the weights from a train node in another rack")
    pasted = hint[hint.index("`resource_pool: [") + 1 : hint.index("]` (or") + 1]
    suggested = plan(load(CROSSING.replace("  resource_pool:\n", f"  {pasted}\n")), inv)
    assert estimate(suggested, GB, inventory=inv).crossing["rack"] == 0
    assert not [w for w in suggested.warnings if w.startswith("weight sync:")]
    assert [w.node_rank for w in suggested.workers] != [w.node_rank for w in p.workers]


def test_manual_ranges_inside_racks_or_without_racks_get_no_rack_hint():
    text = CROSSING + (
        "    - {name: train_pool, node_ids: [0, 2], num_gpus: [4, 4], train: 0-7}\n"
        "    - {name: rollout_pool, node_ids: [1, 3], num_gpus: [4, 4], eval: 0-7, env: 0-7}\n"
    )
    for nodes in ("4x4/rack=2", "4x4"):
        assert not [w for w in plan(load(text), parse_nodes(nodes)).warnings if w.startswith("weight sync:")]
