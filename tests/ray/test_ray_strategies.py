"""Every strategy of the spec, started on the session's simulated cluster: workers land where planned.

The auto-mode examples run verbatim from tests/data/spec_examples; the manual resource pools are the
spec's topologies scaled down to the session cluster (2 x 4 A800, 1 x 2 RTX4090, 1 CPU-only robot node).
Each worker reports what Ray really gave it (node rank label, `ray.get_gpu_ids()`, CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import collections

import pytest
from ray_workers import Probe
from tests.ray_helpers import assert_gone, footprint

import rlplace

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SCALED_POOLS = {
    "pools-all-colocated (1 node x 2 GPUs)": """
cluster:
  placement: {mode: manual}
resource_pool:
  - {name: global_pool, num_node: 1, num_gpus: 2, node_ids: [2], train: "0-1", eval: "0-1", env: "0-1"}
""",
    "pools-fully-disaggregated (3 pools x 1 GPU)": """
cluster:
  placement: {mode: manual}
resource_pool:
  - {name: train_pool, num_node: 1, num_gpus: 1, train: "0"}
  - {name: eval_pool, num_node: 1, num_gpus: 1, eval: "0"}
  - {name: env_pool, num_node: 1, num_gpus: 1, env: "0"}
""",
    "pools-mixed (train on GPUs 2-3; eval+env share GPUs across unequal nodes)": """
cluster:
  placement: {mode: manual}
resource_pool:
  - {name: train_pool, num_node: 1, num_gpus: 4, train: "2-3"}
  - {name: rollout_pool, num_node: 2, node_ids: [1, 2], num_gpus: [4, 2], eval: "0, 5", env: "0, 5"}
""",
}
SPEC_FILES = ["auto-disaggregate.yaml", "auto-colocate-device.yaml", "offload-colocate.yaml", "auto-default.yaml"]


def _start_all(job):
    for component in job.plan.components:
        job.launch(component, Probe, component)
    return {(p.component, p.rank): p for p in job.verify()}


def _where(job):
    return {(g.component, r): out for g in job.groups.values() for r, out in enumerate(g.call("where"))}


def _assert_as_planned(job):
    placements = _start_all(job)  # verify() already raises on any node or GPU mismatch
    where = _where(job)
    assert len(placements) == len(job.plan.workers)
    by_device = collections.defaultdict(set)
    for w in job.plan.workers:
        p, seen = placements[(w.component, w.rank)], where[(w.component, w.rank)]
        if w.node_rank is None:
            continue  # strategy default: Ray places it
        assert p.node_rank == w.node_rank, f"{w.name} on node {p.node_rank}, planned {w.node_rank}"
        assert p.gpus == w.gpus, f"{w.name} got GPUs {p.gpus}, planned {w.gpus}"
        expected_mask = ",".join(map(str, w.gpus))  # "" for GPU-less workers: they see no GPU
        assert seen["cuda_visible_devices"] == expected_mask, f"{w.name}: {seen['cuda_visible_devices']!r}"
        if w.gpus:
            by_device[(w.node_rank, w.gpus)].add(seen["cuda_visible_devices"])
    for device, masks in by_device.items():
        assert len(masks) == 1, f"workers sharing {device} saw different devices {masks}"
    return placements


@pytest.mark.parametrize("name", SPEC_FILES)
def test_auto_mode_spec_example_starts_as_planned(ray_cluster, spec_examples, tmp_path, name):
    export = tmp_path / "resource_pool_auto.yaml"
    with rlplace.connect(spec_examples / name, timeout_s=20, export_path=export) as job:
        placements = _assert_as_planned(job)
        taken = footprint(job)
        if name == "auto-default.yaml":
            assert not taken.groups  # no placement groups: Ray schedules the workers freely
            assert sorted(p.node_rank for p in placements.values() if p.component == "buffer") == [0, 1]
        else:
            assert "resource_pool:" in export.read_text(), "auto mode writes resource_pool_auto.yaml after a start"
    assert_gone(taken)


@pytest.mark.parametrize("name", list(SCALED_POOLS))
def test_manual_pools_start_as_planned(ray_cluster, name):
    with rlplace.connect(SCALED_POOLS[name], timeout_s=20, export_path=None) as job:
        _assert_as_planned(job)
        if name.startswith("pools-mixed"):
            # the plan leaves GPUs 0-1 of node 0 idle, yet train still gets GPUs 2 and 3 exactly
            assert [w.gpus for w in job.plan.by_component("train")] == [(2,), (3,)]
