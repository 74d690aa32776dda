"""`rlplace plan` without --nodes plans on the live cluster, and says which one it read."""

from __future__ import annotations

import json

import pytest

from rlplace.cli import main

pytestmark = pytest.mark.ray


def test_plan_without_nodes_names_the_live_cluster_it_read(ray_cluster, tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  train_worker_num: 2\n  placement: {strategy: colocate}\n")
    assert main(["plan", str(job), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert {w["node_rank"] for w in json.loads(out)["workers"] if w["component"] == "train"} <= {0, 1, 2}
    gpus = ray_cluster.inventory.total_gpus
    assert err.splitlines() == [
        f"planning on the live Ray cluster at {ray_cluster.address}: {len(ray_cluster.inventory)} node(s), "
        f"{gpus} GPU(s) (plan offline with --nodes COUNTxGPUS or --inventory FILE)"
    ]


def test_plan_address_plans_on_that_cluster(ray_cluster, tmp_path, capsys):
    """`plan --address`, as `status` and `run` take it (it was refused as an unrecognized argument)."""
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  train_worker_num: 2\n  placement: {strategy: colocate}\n")
    assert main(["plan", str(job), "--address", ray_cluster.address, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert sorted(w["rank"] for w in json.loads(out)["workers"] if w["component"] == "train") == [0, 1]
    assert f"planning on the live Ray cluster at {ray_cluster.address}" in err
