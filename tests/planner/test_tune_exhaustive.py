"""`tune`'s answer is the best under the model: on small clusters every placement the config's dialect can write is
planned and predicted (the model's truth: `predict` on the real planner's plan), and none beats tune's.

GPUs of one node are alike, so a placement of two components on a node is told by how many of its GPUs each
uses alone and how many they share; every such choice on every node is enumerated (1,225 on 2 x 4 GPUs), written
with explicit GPU lists. RLinf's reasoning placement takes one contiguous range a component: every range is."""

from __future__ import annotations

import itertools
import math
import textwrap

import pytest

from rlplace.config.loader import load, load_with
from rlplace.config.profile_file import load_profile
from rlplace.config.rlinf_profile import read_whole
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.planner.timing import predict
from rlplace.planner.tune import tune
from rlplace.planner.workload import build_workload


def tuned(tmp_path, config: str, nodes: str, profile: str | None = None):
    path = tmp_path / "job.yaml"
    path.write_text(textwrap.dedent(config))
    spec, whole = load_with(path, read_whole)
    inventory = parse_nodes(nodes)
    written = plan(spec, inventory)
    costs = None
    if profile:
        (tmp_path / "profile.yaml").write_text(textwrap.dedent(profile))
        costs = load_profile(tmp_path / "profile.yaml")
    workload = build_workload(spec, written, inventory, whole.rlinf, costs)
    return tune(spec, whole.document, workload, inventory, written), workload, inventory, whole.document


def truth(document: dict, cluster: dict, workload, inventory) -> float:
    """The model's seconds for the config `document` with cluster section `cluster` (inf: cannot run)."""
    try:
        p = plan(load({**document, "cluster": cluster}), inventory)
    except (ConfigError, PlanError):
        return math.inf
    s = predict(p, workload, inventory).seconds
    return math.inf if s is None else s


def node_splits(gpus: int):
    """(alone_a, alone_b, shared) GPU counts on one node."""
    return [(a, b, s) for a in range(gpus + 1) for b in range(gpus + 1 - a) for s in range(gpus + 1 - a - b)]


def pairs_of_sets(nodes: int, gpus: int):
    """Every placement of two components on `nodes` x `gpus` GPUs up to GPUs of a node being alike: (a's global
    GPU indices, b's)."""
    for split in itertools.product(node_splits(gpus), repeat=nodes):
        a, b = [], []
        for node, (only_a, only_b, shared) in enumerate(split):
            base = node * gpus
            a += [base + i for i in range(shared + only_a)]
            b += [base + i for i in range(shared)] + [base + shared + only_a + i for i in range(only_b)]
        if a and b:
            yield a, b


def ranks(indices: list[int]) -> str:
    return ",".join(str(i) for i in indices)


TWO_STAGES = """
    cluster:
      num_nodes: 2
      model_bytes: 8G
      component_placement:
        actor,rollout: all
"""
TWO_COSTS = """
    measured: {gpus: 8, gpu: A800}
    batches: 8
    components:
      rollout: {seconds: {2: 16, 8: 9}, memory_gb: 30}
      actor: {seconds: {8: 12}, memory_gb: 60}
"""


@pytest.mark.parametrize(
    ("streamed", "nodes"),
    [("streamed", "2x4:A800"), ("sequential", "2x4:A800"), ("streamed", "1x4:RTX4090,1x4:A800")],
)
def test_two_components_on_2x4_no_placement_beats_tunes(tmp_path, streamed, nodes):
    config = TWO_STAGES.replace("model_bytes: 8G", f"model_bytes: 8G\n      disaggregated_stages: {streamed}")
    result, workload, inventory, document = tuned(tmp_path, config, nodes, TWO_COSTS)
    section = document["cluster"]
    best = min(
        truth(
            document, {**section, "component_placement": {"actor": ranks(a), "rollout": ranks(r)}}, workload, inventory
        )
        for a, r in pairs_of_sets(2, 4)
    )
    assert result.best is not None and result.best.seconds == pytest.approx(best, rel=1e-9, abs=1e-9)


RLINF = """
    cluster:
      num_nodes: 2
      component_placement:
        actor,rollout,reward: all
    runner: {task_type: reasoning}
    algorithm: {group_size: 4, n_minibatches: 2, recompute_logprobs: true}
    data: {rollout_batch_size: 16}
    rollout: {max_running_requests: 24, tensor_parallel_size: 1}
    actor: {model: {tensor_model_parallel_size: 2}}
    profile_data: {actor_cost: 50, rollout_cost: 70, inference_cost: 9}
"""


def contiguous(n: int):
    return [(lo, hi) for lo in range(n) for hi in range(lo + 1, n + 1)]


def test_rlinf_reasoning_on_2x4_no_range_placement_beats_tunes(tmp_path):
    result, workload, inventory, document = tuned(tmp_path, RLINF, "2x4", None)
    section = document["cluster"]
    options = []
    for a, r in itertools.product(contiguous(8), repeat=2):
        if a == r:
            options.append({"actor,rollout": f"{a[0]}-{a[1] - 1}"})
        elif a[1] <= r[0] or r[1] <= a[0]:
            options.append({"actor": f"{a[0]}-{a[1] - 1}", "rollout": f"{r[0]}-{r[1] - 1}"})
            free = [i for i in range(8) if not a[0] <= i < a[1] and not r[0] <= i < r[1]]
            for lo, hi in contiguous(8):
                if all(i in free for i in range(lo, hi)):
                    options.append(
                        {"actor": f"{a[0]}-{a[1] - 1}", "rollout": f"{r[0]}-{r[1] - 1}", "inference": f"{lo}-{hi - 1}"}
                    )
    best = min(
        truth(document, {**section, "component_placement": {**o, "reward": "all"}}, workload, inventory)
        for o in options
    )
    assert len(options) > 1000
    assert result.best is not None and result.best.seconds == pytest.approx(best, rel=1e-9)


EMBODIED = """
    cluster:
      num_nodes: 1
      component_placement:
        actor,env,rollout: all
    runner: {task_type: embodied}
    data: {env_num: 12}
    profile_data:
      actor_cost: 20
      env_profile_data: {3: 1.5, 6: 1.6, 12: 2.0}
      rollout_profile_data: {3: 1.0, 6: 1.1, 12: 1.5}
"""


def test_rlinf_embodied_on_1x4_no_placement_beats_tunes(tmp_path):
    result, workload, inventory, document = tuned(tmp_path, EMBODIED, "1x4", None)
    section = document["cluster"]
    subsets = [s for k in range(1, 5) for s in itertools.combinations(range(4), k)]
    best = min(
        truth(
            document,
            {**section, "component_placement": {"actor": "all", "env": ranks(list(e)), "rollout": ranks(list(r))}},
            workload,
            inventory,
        )
        for e, r in itertools.product(subsets, repeat=2)
    )
    assert result.best is not None and result.best.seconds == pytest.approx(best, rel=1e-9)
    assert result.best.mode == "hybrid"  # env and rollout stream beside each other under the actor
