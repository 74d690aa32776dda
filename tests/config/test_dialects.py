"""Forms of both dialects beyond the spec examples, and how they map onto the one model."""

from __future__ import annotations

import textwrap

from rlplace.config import load
from rlplace.model import Placement, Segment


def spec_of(text: str):
    return load(textwrap.dedent(text))


def test_short_form_places_each_listed_component_on_the_cluster_group():
    spec = spec_of(
        """\
        cluster:
          num_nodes: 1
          component_placement:
            "actor,rollout": 0-7
            env: all
            reward: 0
        """
    )
    assert [c.name for c in spec.components] == ["actor", "rollout", "env", "reward"]
    assert spec.component("actor").placement == spec.component("rollout").placement
    assert spec.component("actor").placement == Placement(("cluster",), (Segment(tuple(range(8))),))
    assert spec.component("env").placement.segments == (Segment(None),)
    assert spec.component("reward").placement.segments == (Segment((0,)),)
    assert all(c.num_workers is None for c in spec.components)


def test_node_group_as_comma_list_or_yaml_list_and_case_sensitive_labels():
    spec = spec_of(
        """\
        cluster:
          num_nodes: 4
          component_placement:
            actor: {node_group: "A800,a800", placement: 0-15}
            rollout: {node_group: [a800, A800], placement: 0-15}
          node_groups:
            - {label: A800, node_ranks: 0-1}
            - {label: a800, node_ranks: [2, "3"]}
            - {label: cpu, node_ranks: 0-3, ignore_hardware: true}
        """
    )
    assert spec.component("actor").placement.groups == ("A800", "a800")
    assert spec.component("rollout").placement.groups == ("a800", "A800")
    assert spec.group("a800").node_ranks == (2, 3)
    assert spec.group("cpu").ignore_hardware is True  # overlapping groups are allowed


def test_ignore_hardware_group_counts_nodes():
    text = """\
        cluster:
          num_nodes: 4
          component_placement:
            search: {node_group: cpu, placement: "0-1:0-7"}
          node_groups:
            - {label: cpu, node_ranks: 2-3, ignore_hardware: true}
        """
    assert spec_of(text).component("search").placement.segments == (Segment((0, 1), tuple(range(8))),)


def test_hardware_units_are_ranked_in_node_order():
    spec = spec_of(
        """\
        cluster:
          num_nodes: 2
          component_placement:
            env: {node_group: arms, placement: 0-1}
          node_groups:
            - label: arms
              node_ranks: 0-1
              hardware:
                type: Franka
                configs:
                  - {robot_ip: "fd00::2", node_rank: 1}
                  - {robot_ip: "10.0.0.1", node_rank: 0, camera_serials: ["a1"]}
        """
    )
    units = spec.group("arms").hardware
    assert [(u.node_rank, u.config["robot_ip"]) for u in units] == [(0, "10.0.0.1"), (1, "fd00::2")]


def test_env_var_numbers_become_text():
    spec = spec_of(
        """\
        cluster:
          num_nodes: 1
          component_placement: {a: 0}
          node_groups:
            - label: g
              node_ranks: 0
              env_configs:
                - node_ranks: 0
                  env_vars: [{NCCL_P2P_DISABLE: 1}, {RATIO: 0.5}]
        """
    )
    assert spec.group("g").env_configs[0].env_vars == (("NCCL_P2P_DISABLE", "1"), ("RATIO", "0.5"))


def test_pools_with_node_ids_and_per_node_gpu_counts():
    spec = spec_of(
        """\
        cluster:
          train_worker_num: 12
          eval_worker_num: 4
          eval_each_gpu_num: 0.5
          env_each_gpu_num: 0
          buffer_worker_num: 2
          placement: {mode: manual}
          resource_pool:
            - {name: big, node_ids: [3, 1], num_gpus: [8, 4], train: "0-11"}
            - {name: rest, num_node: 2, num_gpus: 2, eval: "0-1", env: "0-3", buffer: "0, 2"}
        """
    )
    big, rest = spec.node_groups
    assert (big.node_ranks, big.gpus_per_node, big.node_ids) == ((3, 1), (8, 4), (3, 1))
    assert (rest.node_ranks, rest.gpus_per_node) == ((0, 2), (2, 2))  # the next nodes not bound by node_ids
    assert spec.component("eval").gpus_per_worker == 0.5 and spec.component("env").gpus_per_worker == 0.0
    buffer = spec.component("buffer")
    assert (buffer.num_workers, buffer.gpus_per_worker, buffer.placement.segments) == (2, 0.0, (Segment((0, 2)),))


def test_pools_bound_to_node_names_leave_ranks_to_the_planner():
    spec = spec_of(
        """\
        cluster:
          placement: {mode: manual}
          resource_pool:
            - {name: p, node_ids: [gpu-a, gpu-b], num_gpus: [8, 4], train: "0-11"}
        """
    )
    (pool,) = spec.node_groups
    assert (pool.node_ranks, pool.node_ids, pool.gpus_per_node) == ((), ("gpu-a", "gpu-b"), (8, 4))


def test_auto_mode_always_emits_train_eval_env_and_keeps_unwritten_values_none():
    spec = spec_of("cluster:\n  env_each_gpu_num: 0\n  placement: {strategy: colocate, env_strategy: node-affinity}\n")
    assert [(c.name, c.num_workers, c.gpus_per_worker, c.placement) for c in spec.components] == [
        ("train", None, 1.0, None),
        ("eval", None, 1.0, None),
        ("env", None, 0.0, None),
    ]
    assert spec.settings.env_strategy == "node-affinity" and spec.settings.is_colocated is None
