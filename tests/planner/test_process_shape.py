"""Processes of several devices (RLinf's rollout tensor parallelism): ComponentSpec.process_shape."""

from __future__ import annotations

import dataclasses

import pytest
from tests.planner.specs import groups_spec, r

from rlplace.errors import ConfigError
from rlplace.inventory import parse_nodes
from rlplace.model import ProcessShape
from rlplace.planner import plan

ORIGIN = "rollout.tensor_parallel_size: 2 under actor.model.tensor_model_parallel_size: 4 (collocated: stride 2)"


def shaped(spec, component: str, shape: ProcessShape):
    comps = tuple(dataclasses.replace(c, process_shape=shape) if c.name == component else c for c in spec.components)
    return dataclasses.replace(spec, components=comps)


def grpo_7b(devices: int, stride: int, nodes: int = 16):
    """A 7B GRPO reasoning config: actor, rollout and reward on all GPUs (RLinf's `actor,rollout,reward: all`)."""
    every = {name: (("cluster",), [(None, None)]) for name in ("actor", "rollout", "reward")}
    return shaped(groups_spec(every, num_nodes=nodes), "rollout", ProcessShape(devices, stride, ORIGIN))


def test_strided_rollout_under_a_larger_actor_tp_expected_plan():
    """RLinf's collocated placement: rollout TP 2 under actor TP 4 -> 64 processes, rank 0 on GPUs [0, 2]."""
    p = plan(grpo_7b(2, 2), parse_nodes("16x8"))
    rollout = p.by_component("rollout")
    assert len(rollout) == 64 and len(p.by_component("actor")) == 128
    assert [(w.rank, w.node_rank, w.gpus) for w in rollout[:6]] == [
        (0, 0, (0, 2)),
        (1, 0, (1, 3)),
        (2, 0, (4, 6)),
        (3, 0, (5, 7)),
        (4, 1, (0, 2)),
        (5, 1, (1, 3)),
    ]
    assert [w.local_rank for w in rollout[:6]] == [0, 1, 2, 3, 0, 1]
    assert p.process_shapes["rollout"] == ProcessShape(2, 2, ORIGIN)
    assert p.to_dict()["process_shapes"]["rollout"]["origin"] == ORIGIN
    assert p.settings.is_colocated


def test_a_process_spanning_shared_gpus_reserves_each_gpu_once_and_sees_its_own():
    """Ray cannot give one actor shares of two GPUs: the rollout process asks for none, every GPU stays
    reserved once (in its own bundle), and the process is told which GPUs to see."""
    p = plan(grpo_7b(2, 2, nodes=1), parse_nodes("1x8"))
    reserved = [g for b in p.bundles for g in b.gpus]
    assert sorted(reserved) == list(range(8))  # each GPU exactly once
    r0 = p.by_component("rollout")[0]
    assert (r0.gpus, r0.gpu_fraction, r0.num_gpus, r0.visible_gpus) == ((0, 2), 0.0, 0.0, (0, 2))
    assert p.bundles[r0.bundle].gpus == () and p.bundles[r0.bundle].node_rank == 0
    actor0 = p.by_component("actor")[0]
    assert actor0.gpus == (0,) and actor0.visible_gpus is None
    assert actor0.gpu_fraction == pytest.approx(1 / 3)  # GPU 0: actor 0, reward 0 and rollout 0
    assert sum(w.num_gpus for w in p.workers) <= 8 + 1e-9


def test_dense_rollout_beside_single_gpu_actors_also_spans():
    p = plan(grpo_7b(2, 1, nodes=1), parse_nodes("1x8"))
    assert [w.gpus for w in p.by_component("rollout")] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert all(w.visible_gpus == w.gpus and w.gpu_fraction == 0 for w in p.by_component("rollout"))


def test_disaggregated_rollout_owns_its_gpus_per_data_parallel_rank():
    """Rollout on its own GPUs: GPUs per rollout DP rank each, whole GPUs from Ray, one bundle per process."""
    spec = groups_spec({"actor": (("cluster",), [(r(0, 7), None)]), "rollout": (("cluster",), [(r(8, 15), None)])})
    p = plan(shaped(spec, "rollout", ProcessShape(4, 1, "8 rollout GPUs // rollout DP size 2")), parse_nodes("2x8"))
    rollout = p.by_component("rollout")
    assert [(w.node_rank, w.gpus, w.gpu_fraction, w.visible_gpus) for w in rollout] == [
        (1, (0, 1, 2, 3), 1.0, None),
        (1, (4, 5, 6, 7), 1.0, None),
    ]
    assert [p.bundles[w.bundle].gpus for w in rollout] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert not p.settings.is_colocated


def test_a_shape_that_does_not_divide_the_resources_names_where_it_came_from():
    spec = shaped(groups_spec({"rollout": (("cluster",), [(r(0, 5), None)])}), "rollout", ProcessShape(4, 1, "TP 4"))
    with pytest.raises(ConfigError, match=r"rollout has 6 resource\(s\).*processes of 4 device\(s\).*\(TP 4\)"):
        plan(spec, parse_nodes("1x8"))


def test_a_process_cannot_span_two_nodes():
    spec = shaped(groups_spec({"rollout": (("cluster",), [(r(3, 10), None)])}), "rollout", ProcessShape(4, 1, "TP 4"))
    with pytest.raises(ConfigError, match="must be GPUs of one node"):
        plan(spec, parse_nodes("2x6"))


def test_shape_round_trips_through_json():
    from rlplace.plan import Plan

    p = plan(grpo_7b(2, 2, nodes=1), parse_nodes("1x8"))
    again = Plan.from_dict(p.to_dict())
    assert again == p and again.process_shapes == p.process_shapes
    assert [w.visible_gpus for w in again.workers] == [w.visible_gpus for w in p.workers]


def test_one_device_processes_ignore_the_stride():
    """Actor TP 2 over rollout TP 1 gives stride 2 with one GPU a process: the same as packed."""
    p = plan(grpo_7b(1, 2, nodes=1), parse_nodes("1x8"))
    assert [w.gpus for w in p.by_component("rollout")] == [(g,) for g in range(8)]
    assert all(w.visible_gpus is None and w.gpu_fraction == pytest.approx(1 / 3) for w in p.by_component("rollout"))
