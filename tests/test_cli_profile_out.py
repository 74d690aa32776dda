"""`rlplace run ... --profile-out FILE` end to end: the phases of the user's own driver (`with job.phase(...)`) and
of the bundled pipeline become a profile that `rlplace tune --profile` reads as it is; a driver that times no phase
gets no file, a line saying why and exit 1. Each run joins the session's cluster (`--address`): what `run` does
with the phases does not depend on whose cluster it is, and `run --simulate` starting and stopping its own is
tests/test_cli_run.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from tests.test_cli_run import left_running, rlplace_run

from rlplace.cli import main
from rlplace.examples.cartpole_ppo import CONFIGS

#: RLinf's names: rollout and actor taking turns on two GPUs (node 0's A800s on the session cluster).
JOB = """\
cluster:
  num_nodes: 1
  model_bytes: 3M
  component_placement:
    actor,rollout: 0-1
"""
#: A user's driver: its own worker class, each iteration's parts in phases (or none, with `none`).
DRIVER = """\
import sys, time
import rlplace

class Worker:
    def work(self, seconds):
        time.sleep(seconds)

with rlplace.connect() as job:
    rollout, actor = job.launch("rollout", Worker), job.launch("actor", Worker)
    for iteration in range(3):
        if sys.argv[1] == "none":
            rollout.call("work", 0.2)
            continue
        with job.phase("rollout"):
            rollout.call("work", 0.2)
        with job.phase("train"):
            actor.call("work", 0.1)
"""


def cli_json(capsys, *argv: str) -> dict:
    """What an rlplace command prints with `--format json`, run in this process."""
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def tune_json(capsys, config: str, nodes: str, profile: str) -> dict:
    return cli_json(capsys, "tune", config, "--nodes", nodes, "--profile", profile)


def where_ran(stdout: str) -> dict[str, list[str]]:
    """The rows of the run's "Where each worker ran" table: worker -> [group, node, GPUs, ok]."""
    table = stdout.split("Where each worker ran", 1)[1].split("\n\n", 1)[0]
    rows = (line.split("│")[1:-1] for line in table.splitlines() if line.startswith("│"))
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


@pytest.mark.ray
@pytest.mark.parametrize("phases", ["timed", "none"])
def test_a_drivers_phases_become_the_profile_tune_reads(ray_cluster, tmp_path, capsys, phases):
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "train.py").write_text(DRIVER)
    argv = ["job.yaml", "--address", ray_cluster.address, "--profile-out", "profile.yaml", "--", "python", "train.py"]
    proc, mark = rlplace_run(tmp_path, *argv, phases)
    _, err = proc.communicate(timeout=300)
    assert left_running(mark) == []
    if phases == "none":
        assert proc.returncode == 1, err[-3000:]
        assert "rlplace: profile.yaml not written: the command finished no phase" in err
        assert not (tmp_path / "profile.yaml").exists()
        return
    assert proc.returncode == 0, err[-3000:]
    assert "rlplace: profile written to profile.yaml: rollout" in err
    profile = yaml.safe_load((tmp_path / "profile.yaml").read_text())
    gpus = sum(n.num_gpus for n in ray_cluster.inventory.nodes)  # the cluster's, and the model the workers ran on
    assert profile["measured"] == {"gpus": gpus, "gpu": "A800"} and profile["model_bytes"] == 3_000_000
    seconds = {c: cost["seconds"] for c, cost in profile["components"].items()}
    assert list(seconds) == ["rollout", "actor"] and list(seconds["rollout"]) == [2] == list(seconds["actor"])
    assert 0.2 <= seconds["rollout"][2] < 1.0 and 0.1 <= seconds["actor"][2] < 0.5  # waited on the workers
    doc = tune_json(capsys, str(tmp_path / "job.yaml"), "1x2:A800", str(tmp_path / "profile.yaml"))
    assert doc["as_written"]["seconds"] == pytest.approx(seconds["rollout"][2] + seconds["actor"][2], rel=1e-3)


@pytest.mark.ray
@pytest.mark.slow
def test_the_bundled_pipeline_on_an_existing_cluster_writes_its_files_and_the_profile_tune_reads(
    ray_cluster, tmp_path, capsys
):
    """About 15 s. `rlplace run CONFIG --address ...`: a second driver joins the session cluster, runs the pipeline
    with every worker where the plan put it (the disaggregated config: test_cartpole_ppo_placed.py runs the others
    in-process), writes the picture, the computed pools (auto mode) and the profile of its rollout and train phases,
    and cleans up after itself (the session's leftover check)."""
    config = str(CONFIGS / "disaggregate.yaml")
    args = ["run", config, "--address", ray_cluster.address, "--iterations", "2", "--out", str(tmp_path)]
    proc = subprocess.run(
        [sys.executable, "-m", "rlplace.cli", *args, "--profile-out", str(tmp_path / "p.yaml")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Where each worker ran" in proc.stdout and "Embedded cluster" not in proc.stdout
    nodes = ",".join(f"1x{n.num_gpus}:{n.gpu_model}" if n.num_gpus else "1x0" for n in ray_cluster.inventory.nodes)
    ran = where_ran(proc.stdout)
    planned = cli_json(capsys, "plan", config, "--nodes", nodes)["workers"]
    assert sorted(ran) == sorted(f"{w['component']}:{w['rank']}" for w in planned)  # every planned worker ran
    for w in planned:
        node, gpus = w["node_rank"], ",".join(map(str, w["gpus"])) or "-"
        assert ran[f"{w['component']}:{w['rank']}"][1:] == [f"{node} -> {node}", f"{gpus} -> {gpus}", "yes"], w
    assert "offload hooks: not enabled in this config (nothing moved)" in proc.stdout
    assert "buffer samples read on the train worker's own node: 100%" in proc.stdout
    assert (tmp_path / "topology.svg").exists()
    assert (tmp_path / "resource_pool_auto.yaml").exists()  # auto mode writes the computed pools
    assert f"profile written to {tmp_path / 'p.yaml'}: eval" in " ".join(proc.stdout.split())
    profile = yaml.safe_load((tmp_path / "p.yaml").read_text())
    assert sorted(profile["components"]) == ["eval", "train"]  # the pipeline's rollout and train phases
    assert profile["model_bytes"] > 0  # the CartPole networks it syncs
    doc = tune_json(capsys, config, nodes, str(tmp_path / "p.yaml"))
    assert doc["best"]["seconds"] > 0
