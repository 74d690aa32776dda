"""`rlplace run` hands the plan it showed to its command (issue 34): `rlplace.connect()` with no argument runs that
plan on the session cluster, not a new one, and stops naming every change when the cluster is no longer the one it
was made for; and `run` joins no cluster it was not sent to."""

from __future__ import annotations

import dataclasses
import sys

import pytest

import rlplace
from rlplace.cli import main
from rlplace.config import load
from rlplace.config.driver_env import driver_environment
from rlplace.errors import PlacementError
from rlplace.examples.cartpole_ppo import CONFIGS
from rlplace.inventory import Inventory, Node
from rlplace.planner import plan
from rlplace.ray.handoff import write_handoff

pytestmark = pytest.mark.ray

JOB = "cluster:\n  train_worker_num: {n}\n  placement: {{strategy: colocate}}\n"


def handed(monkeypatch, tmp_path, job, shown, nodes) -> None:
    """This process as `run` starts its command: the config, its overrides and the plan it showed."""
    for name, value in {**driver_environment(job, []), **write_handoff(shown, nodes, tmp_path)}.items():
        monkeypatch.setenv(name, value)


def test_connect_runs_the_plan_run_showed_even_when_the_config_changed_since(ray_cluster, tmp_path, monkeypatch):
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(n=2))
    shown = plan(load(job), ray_cluster.inventory)
    handed(monkeypatch, tmp_path, job, shown, ray_cluster.inventory)
    job.write_text(JOB.format(n=3))  # edited after `run` showed its plan: planning again would start 3 workers
    with rlplace.connect(export_path=None) as connected:
        assert connected.plan == shown
        assert [w.rank for w in connected.plan.by_component("train")] == [0, 1]


def test_connect_stops_naming_each_change_when_the_cluster_is_not_the_one_planned_on(
    ray_cluster, tmp_path, monkeypatch
):
    """The plan was made for node 2 with 4 GPUs (it has 2) and for a fifth node (gone): nothing is reserved."""
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(n=2))
    live = ray_cluster.inventory
    then = list(live.nodes)
    then[2] = dataclasses.replace(then[2], num_gpus=4)
    nodes = Inventory((*then, Node(len(then), 4, labels={"rlplace/node-rank": str(len(then))})))
    handed(monkeypatch, tmp_path, job, plan(load(job), nodes), nodes)
    with pytest.raises(PlacementError) as e:
        rlplace.connect(export_path=None)
    said = str(e.value)
    assert said.startswith("the live cluster is no longer the one `rlplace run` planned on, so its plan is not run:")
    assert "node 2: 2 GPU(s), the plan was made for 4" in said and f"node {len(then)} is gone" in said
    assert said.endswith("Run `rlplace run` again to plan on the cluster as it is now")


@pytest.mark.parametrize("command", [["--", sys.executable, "-c", "print(1)"], []], ids=["command", "pipeline"])
def test_run_does_not_join_a_cluster_it_happens_to_find(ray_cluster, monkeypatch, capsys, command):
    """The session cluster runs on this machine; `run` without --simulate, --address or $RAY_ADDRESS names it (or
    another one running here) and how to join it on purpose, and runs nothing."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    code = main(["run", str(CONFIGS / "disaggregate.yaml"), *command])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("rlplace run: error: argument --address: not given, and a Ray cluster runs on this machine")
    assert "--address auto: the cluster running here" in err and "--simulate NODES" in err
