"""`rlplace status`: the live job's workers with node, GPUs and state; a clear error without a cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ray import cloudpickle

import rlplace
from rlplace.cli import main
from rlplace.commands.status import render
from rlplace.ray.status import collect

cloudpickle.register_pickle_by_value(sys.modules[__name__])

RLPLACE = str(Path(sys.executable).with_name("rlplace"))
PLAN = {
    "cluster": {"train_worker_num": 2, "placement": {"mode": "manual"}},
    "resource_pool": [{"name": "train_pool", "num_node": 2, "num_gpus": 4, "train": "1, 6"}],
}


class Idle:
    def pid(self) -> int:
        return os.getpid()


@pytest.mark.ray
def test_status_lists_each_worker_with_its_node_gpus_and_state(
    ray_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with rlplace.connect(PLAN, export_path=None) as job:
        train = job.launch("train", Idle)
        pids = train.call("pid")
        rows = _train_rows()
        assert [(r.node, r.gpus, r.state, r.pid) for r in rows.values()] == [
            ("node 0", "1", "ALIVE", pids[0]),
            ("node 1", "2", "ALIVE", pids[1]),
        ]
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while rows["rlplace:train:1"].state != "DEAD" and time.monotonic() < deadline:
            rows = _train_rows()
        assert rows["rlplace:train:1"].state == "DEAD" and rows["rlplace:train:1"].gpus == "-"
        assert main(["status", "--format", "json"]) == 0  # reuses this driver's connection
        out = capsys.readouterr().out  # Ray's own line about the killed worker may come first
        shown = json.loads(out[out.index('{\n  "nodes"') :])
        listed = {r["name"]: r for r in shown["workers"] if r["job"] == rows["rlplace:train:0"].job}
        assert listed["rlplace:train:0"]["state"] == "ALIVE" and listed["rlplace:train:1"]["state"] == "DEAD"
        assert listed["rlplace:train:1"]["pid"] is None and listed["rlplace:train:1"]["node"] == "node 1"  # planned
        assert main(["status", "--watch", "--count", "2", "--interval", "0.1"]) == 0
        watched = capsys.readouterr().out
        assert watched.count("WORKER  ") == 2 and "(every 0.1 s" in watched
        table = render(list(rows.values()))
        assert table.splitlines()[0].split() == ["WORKER", "NODE", "GPUS", "STATE", "RESTARTS", "PID"]
        assert "rlplace:train:0  node 0" in table


def test_status_without_a_cluster_says_so_within_seconds() -> None:
    start = time.monotonic()
    out = subprocess.run([RLPLACE, "status", "--address", "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "no Ray cluster reachable at" in out.stderr and "--address" in out.stderr
    assert "Traceback" not in out.stderr
    assert time.monotonic() - start < 15


def test_status_of_a_cluster_without_workers_says_so() -> None:
    assert render([]) == "no rlplace workers on this cluster (no live job has launched any)"


def _train_rows() -> dict[str, Any]:
    """This driver's train workers (earlier tests' jobs in this session left dead ones of other names)."""
    import ray

    job = ray.get_runtime_context().get_job_id()
    return {r.name: r for r in collect() if r.job == job and r.component == "train"}
