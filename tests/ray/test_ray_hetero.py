"""A scaled-down heterogeneous config (spec/heterogeneous-cluster): GPU groups of two models, robots,
CPU-only agents placed through the `node` group, per-group env vars and a per-node interpreter."""

from __future__ import annotations

import os
import stat
import sys

import pytest
import ray
from ray_workers import Probe

import rlplace

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HETERO = """
cluster:
  num_nodes: 4
  component_placement:
    actor: {node_group: a800, placement: 3-4}        # group-local GPU ranks: node 0 GPU 3, node 1 GPU 0
    rollout: {node_group: "4090", placement: 0-1}
    env: {node_group: franka, placement: 0-1}        # robot ranks
    agent: {node_group: node, placement: "0-1:0-1,3:2-3"}
  node_groups:
    - label: a800
      node_ranks: 0-1
      env_configs:
        - node_ranks: 0-1
          python_interpreter_path: {python}
          env_vars:
            - GLOO_SOCKET_IFNAME: eth0
    - label: "4090"
      node_ranks: 2
      env_configs:
        - node_ranks: 2
          env_vars:
            - GLOO_SOCKET_IFNAME: eth1
    - label: franka
      node_ranks: 3
      hardware:
        type: Franka
        configs:
          - {robot_ip: 10.10.10.1, node_rank: 3, camera_serials: ["322142001230", "322142001231"]}
          - {robot_ip: 10.10.10.2, node_rank: 3, camera_serials: ["322142001232"]}
"""


@pytest.fixture
def wrapper_python(tmp_path):
    """A per-node interpreter made for the test: a wrapper script that marks the processes it starts."""
    path = tmp_path / "openpi-python"
    path.write_text(f'#!/bin/sh\nexport RLPLACE_TEST_INTERPRETER="$0"\nexec {sys.executable} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def test_heterogeneous_config_lands_on_the_planned_nodes_devices_and_environments(ray_cluster, wrapper_python):
    with rlplace.connect(HETERO.replace("{python}", wrapper_python), timeout_s=20, export_path=None) as job:
        groups = {c: job.launch(c, Probe, c) for c in ("actor", "rollout", "env", "agent")}
        job.verify()
        seen = {c: g.call("where") for c, g in groups.items()}
        interp = {c: g.call("env", "RLPLACE_TEST_INTERPRETER") for c, g in groups.items()}
        robots_free = ray.available_resources().get("rlplace/robot/franka/0", 0.0)

    where = {c: [(s["placement"].node_rank, s["placement"].gpus) for s in out] for c, out in seen.items()}
    assert where["actor"] == [(0, (3,)), (1, (0,))]
    assert where["rollout"] == [(2, (0,)), (2, (1,))]
    assert where["env"] == [(3, ()), (3, ())]
    assert where["agent"] == [(0, ()), (1, ()), (3, ()), (3, ())]

    # per-group env vars and the a800 nodes' interpreter reach the workers placed through those groups; agents are
    # placed through `node`, which has no env configs: none of the a800 group's (as RLinf)
    assert [s["placement"].env_vars.get("GLOO_SOCKET_IFNAME") for s in seen["actor"]] == ["eth0", "eth0"]
    assert [s["placement"].env_vars.get("GLOO_SOCKET_IFNAME") for s in seen["rollout"]] == ["eth1", "eth1"]
    assert interp["actor"] == [wrapper_python] * 2
    assert interp["agent"] == [None, None, None, None]
    assert interp["rollout"] == [None, None]

    # robots: hardware info in the worker, exclusive while the job holds them, and no GPU visible
    hw = [s["placement"].hardware for s in seen["env"]]
    assert [h["robot_ip"] for h in hw] == ["10.10.10.1", "10.10.10.2"]
    assert hw[0]["camera_serials"] == ["322142001230", "322142001231"]
    assert robots_free == 0.0
    assert all(s["cuda_visible_devices"] == "" for s in seen["env"] + seen["agent"][2:])
    # agents on the GPU nodes 0-1 are placed through `node`: they see their node's GPUs without reserving any
    assert [s["cuda_visible_devices"] for s in seen["agent"][:2]] == ["0,1,2,3", "0,1,2,3"]
    assert all(s["placement"].gpus == () and s["placement"].mismatch is None for s in seen["agent"])
    assert [s["placement"].accelerator for s in seen["rollout"]] == ["RTX4090", "RTX4090"]
    assert os.environ.get("RLPLACE_TEST_INTERPRETER") is None  # only the workers went through the wrapper
