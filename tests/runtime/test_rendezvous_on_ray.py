"""The torch.distributed rendezvous variables every worker gets before its constructor runs, on the session's
simulated multi-node cluster: per-rank values of a multi-node component, distinct master ports for two
components and two jobs on one node, the same values after a restart, components Ray places itself, GPU
visibility of workers that see their node's GPUs, and the one job record. No torch needed."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from typing import Any

import pytest
from ray import cloudpickle

import rlplace
from rlplace.config import load
from rlplace.planner import plan as make_plan
from rlplace.ray import records
from rlplace.ray.master_ports import DEFAULT_PORT_RANGE
from rlplace.ray.rendezvous import ENV_KEYS

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(sys.modules[__name__])

# learner: 2 workers on node 0 (GPUs 0-1), 2 on node 1 (GPUs 0-1); critic: 2 on node 0 (GPUs 2-3);
# eval: both GPUs of node 2.
GROUPS = """
cluster:
  num_nodes: 4
  component_placement:
    learner: {node_group: a800, placement: "0-1,4-5"}
    critic: {node_group: a800, placement: "2-3"}
    eval: {node_group: "4090", placement: 0-1}
  node_groups:
    - {label: a800, node_ranks: 0-1}
    - label: "4090"
      node_ranks: 2
      env_configs:
        - node_ranks: 2
          env_vars:
            - {MASTER_PORT: "12345"}
"""


class EnvProbe:
    """Records the environment its constructor saw, before any method runs."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.at_init = {k: os.environ.get(k) for k in (*ENV_KEYS, "CUDA_VISIBLE_DEVICES")}
        self.placement = rlplace.worker_placement()

    def seen(self) -> dict[str, Any]:
        return {"env": self.at_init, "placement": self.placement, "now": rlplace.worker_placement()}

    def pid(self) -> int:
        return os.getpid()


def _seen(group: Any) -> list[dict[str, Any]]:
    return group.call("seen")


def test_every_worker_of_a_multi_node_component_gets_its_rendezvous_before_its_constructor(ray_cluster):
    with rlplace.connect(GROUPS, export_path=None, name="rdzv-a") as job:
        learner = job.launch("learner", EnvProbe)
        seen = _seen(learner)
        envs = [s["env"] for s in seen]
        node_ip = {n.rank: n.address for n in ray_cluster.inventory.nodes}

        assert sorted(int(e["RANK"]) for e in envs) == [0, 1, 2, 3]  # unique and dense, in rank order
        assert [int(e["RANK"]) for e in envs] == [0, 1, 2, 3]
        assert {e["WORLD_SIZE"] for e in envs} == {"4"}
        assert [e["NODE_RANK"] for e in envs] == ["0", "0", "1", "1"]
        assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "0", "1"]
        assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {"2"}
        assert [e["GROUP_RANK"] for e in envs] == ["0", "0", "1", "1"]
        assert {e["GROUP_WORLD_SIZE"] for e in envs} == {"2"}
        assert {e["MASTER_ADDR"] for e in envs} == {node_ip[0]}
        (port,) = {int(e["MASTER_PORT"]) for e in envs}
        assert DEFAULT_PORT_RANGE[0] <= port <= DEFAULT_PORT_RANGE[1]
        # Ray's GPU mask is kept: each worker sees its own GPU only.
        assert [s["env"]["CUDA_VISIBLE_DEVICES"] for s in seen] == ["0", "1", "0", "1"]

        for s in seen:  # worker_placement() exposes the same, already in the constructor
            p = s["placement"]
            assert p.rendezvous_env == {k: v for k, v in s["env"].items() if k in ENV_KEYS}
            assert (p.master_addr, p.master_port, p.local_world_size) == (node_ip[0], port, 2)
            assert (p.group_rank, p.group_world_size) == (int(s["env"]["GROUP_RANK"]), 2)
            assert p.local_rank == int(s["env"]["LOCAL_RANK"]) and p.mismatch is None
            assert p.visible_devices == s["env"]["CUDA_VISIBLE_DEVICES"]

        # The one job record: rank -> node map and the master, readable from outside the driver.
        record = records.read(job.cluster, job.namespace, job.name)
        assert record is not None and record.components["learner"].node_ranks == (0, 0, 1, 1)
        assert (record.components["learner"].master_addr, record.components["learner"].master_port) == (
            node_ip[0],
            port,
        )
        assert record.node_of("eval", 1) == 2 and record.nodes[2].address == node_ip[2]
        assert any(r.instance == record.instance for r in records.read_all(job.cluster, live_only=True))
    assert records.read(job.cluster, job.namespace, job.name) is None  # shutdown deletes it


def _on_node0(learner: str, critic_group: str, critic: str) -> str:
    return f"""
cluster:
  num_nodes: 4
  component_placement:
    learner: {{node_group: a800, placement: "{learner}"}}
    critic: {{node_group: {critic_group}, placement: "{critic}"}}
  node_groups:
    - {{label: a800, node_ranks: 0-1}}
"""


def test_two_components_and_two_jobs_on_one_node_get_distinct_ports(ray_cluster):
    with (
        rlplace.connect(_on_node0("0-1", "a800", "2"), export_path=None, name="rdzv-b") as job_b,
        rlplace.connect(_on_node0("3", "node", "0"), export_path=None, name="rdzv-c") as job_c,
    ):
        masters = {}
        for job in (job_b, job_c):
            for component in ("learner", "critic"):
                env = job.launch(component, EnvProbe).call("seen", rank=0)["env"]
                masters[(job.name, component)] = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
        # Every master is node 0 (learner and critic rank 0 both run there), on four distinct ports.
        assert {addr for addr, _ in masters.values()} == {ray_cluster.inventory.node(0).address}
        assert len({port for _, port in masters.values()}) == 4, masters


def test_group_env_configs_lose_to_the_rendezvous_with_a_warning(ray_cluster):
    with rlplace.connect(GROUPS, export_path=None, name="rdzv-d") as job:
        seen = _seen(job.launch("eval", EnvProbe))
        ports = {s["env"]["MASTER_PORT"] for s in seen}
        assert len(ports) == 1 and ports != {"12345"}
        (warning,) = [w for w in job.warnings if "MASTER_PORT" in w]
        assert "node group '4090' sets MASTER_PORT=12345" in warning and "wins" in warning


def test_a_restarted_worker_gets_the_same_values(ray_cluster):
    with rlplace.connect(GROUPS, export_path=None, name="rdzv-e") as job:
        learner = job.launch("learner", EnvProbe, max_restarts=1, max_task_retries=-1)
        before = learner.call("seen", rank=3)
        pid = learner.call("pid", rank=3)
        os.kill(pid, signal.SIGKILL)  # the process dies at once; the next calls wait for its restart
        after = learner.call("seen", rank=3)
        assert learner.call("pid", rank=3) != pid and after["now"].restarted
        assert after["env"] == before["env"]


def test_workers_ray_places_agree_on_one_rendezvous_among_themselves(ray_cluster):
    config = {"cluster": {"train_worker_num": 1, "eval_worker_num": 3, "placement": {"strategy": "default"}}}
    with rlplace.connect(config, export_path=None, name="rdzv-f") as job:
        assert all(w.node_rank is None for w in job.plan.by_component("eval"))
        seen = _seen(job.launch("eval", EnvProbe))
    envs = [s["env"] for s in seen]
    nodes = [s["placement"].node_rank for s in seen]
    assert [e["RANK"] for e in envs] == ["0", "1", "2"] and {e["WORLD_SIZE"] for e in envs} == {"3"}
    assert [int(e["NODE_RANK"]) for e in envs] == nodes
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}) == 1
    for rank, e in enumerate(envs):  # LOCAL_* and GROUP_* derived from where Ray really put them
        peers = [r for r, n in enumerate(nodes) if n == nodes[rank]]
        assert (int(e["LOCAL_RANK"]), int(e["LOCAL_WORLD_SIZE"])) == (peers.index(rank), len(peers))
        assert seen[rank]["placement"].local_rank == peers.index(rank)
        assert int(e["GROUP_RANK"]) == sorted(set(nodes)).index(nodes[rank])


def test_a_worker_that_sees_its_nodes_gpus_is_not_blanked(ray_cluster):
    config = """
cluster:
  num_nodes: 4
  component_placement:
    agent: {node_group: node, placement: "0"}
"""
    planned = make_plan(load(config), ray_cluster.inventory)
    (agent,) = planned.by_component("agent")
    assert agent.node_rank == 0 and not agent.gpus
    seeing = agent._replace(sees_node_gpus=True)  # what the planner sets for RLinf's GPU-less groups on GPU nodes
    planned = dataclasses.replace(planned, workers=tuple(seeing if w is agent else w for w in planned.workers))
    with rlplace.connect(planned, export_path=None, name="rdzv-g") as job:
        (seen,) = _seen(job.launch("agent", EnvProbe))
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert seen["placement"].sees_node_gpus and seen["placement"].mismatch is None


def test_a_master_on_another_machine_gets_its_port_from_a_task_on_its_node(ray_cluster):
    """On the simulated cluster every node is the driver's machine, so ports are bound in the driver; a master
    elsewhere gets them from this zero-CPU task on its node."""
    from rlplace.ray.master_ports import free_ports
    from rlplace.ray.ray_port import RAY

    node = ray_cluster.inventory.node(3)
    ports = RAY.get(RAY.run_task(free_ports, 2, [29500], 29500, 29600, node_id=str(node.node_id)), 60)
    assert len(set(ports)) == 2 and 29500 not in ports and all(29500 < p <= 29600 for p in ports)
