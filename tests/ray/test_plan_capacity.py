"""`rlplace plan` against the live cluster refuses exactly the plans `rlplace run` refuses for lack of CPUs, with
the same words: each config is planned with the command and placed with `rlplace.connect` (what `rlplace run`
calls), on the session cluster (8 logical CPUs a node)."""

from __future__ import annotations

import pytest
import yaml
from tests.ray_helpers import leftovers

import rlplace
from rlplace.cli import main
from rlplace.errors import PlacementError

pytestmark = pytest.mark.ray


def colocated(cpus: float | None) -> dict:
    """Train/eval/env 4 each on node 0's 4 GPUs (device-colocate): 12 workers and a buffer shard there, each
    reserving `cpus` CPUs (1 when None): 13 CPUs of the node's 8 by default, 7 with 0.5 each."""
    cluster: dict = {
        "train_worker_num": 4,
        "eval_worker_num": 4,
        "placement": {"mode": "auto", "strategy": "colocate", "env_strategy": "device-colocate"},
    }
    if cpus is not None:
        cluster.update({f"{c}_each_cpu_num": cpus for c in ("train", "eval", "env")})
    return {"cluster": cluster}


@pytest.mark.parametrize(("cpus", "fits"), [(None, False), (0.5, True), (0.75, False)])
def test_plan_refuses_what_run_refuses_for_lack_of_cpus(ray_cluster, tmp_path, capsys, cpus, fits):
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(colocated(cpus)))
    code = main(["plan", str(config)])
    out, err = capsys.readouterr()
    try:
        job = rlplace.connect(str(config), timeout_s=30, export_path=None)
    except PlacementError as e:
        refused: str | None = str(e)
    else:
        refused = None
        job.shutdown()
    assert (refused is None) is fits
    if fits:
        row = " ".join(next(line for line in out.splitlines() if "node 0 (4x A800)" in line).split())
        assert code == 0 and row.startswith("│ node 0 (4x A800) │ GPU 0-3 │") and row.endswith("│ 7 of 8 │")
    else:
        assert code == 3 and refused in err, err
        assert "node 0 (4x A800, 8 CPU, " in refused and "can never hold what the plan reserves there" in refused
        assert "train_each_cpu_num: 0.5" in refused  # the fix
    assert leftovers() == ([], [])


def test_plan_names_the_cpus_missing_on_each_node(ray_cluster, tmp_path, capsys):
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(colocated(None)))
    assert main(["plan", str(config)]) == 3
    err = capsys.readouterr().err
    assert "the plan cannot be placed on this cluster:" in err
    assert "(4 GPU, 13 CPU): missing 5 CPU" in err
