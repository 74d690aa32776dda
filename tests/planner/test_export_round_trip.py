"""The spec's Tip, as a user follows it: `rlplace plan --export` writes the pools, the user puts them in the config
with `placement.mode: manual`, and that config validates and plans to the identical placement. For every config
of the spec examples and of the frameworks corpus that has pools; and an export a user edited is never replaced."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from tests.config.test_frameworks import CASES, CORPUS
from tests.conftest import EXAMPLES

from rlplace.cli import main
from rlplace.config.compose import compose_file
from rlplace.config.problems import Reporter
from rlplace.config.yaml_source import read_yaml

#: Spec examples with pools, each on an inventory that holds it (auto-default has no pools: its --export is an
#: error, tests/planner/test_cli.py).
SPEC = {
    "auto-colocate-device.yaml": "2x4",
    "auto-disaggregate.yaml": "2x4",
    "offload-colocate.yaml": "2x4",
    "manual-global-pool.yaml": "3x8",
    "pools-all-colocated.yaml": "3x8",
    "pools-fully-disaggregated.yaml": "3x8",
    "pools-mixed.yaml": "3x8",
}
#: The corpus's pools configs whose strategy makes pools (default leaves the workers to Ray).
CORPUS_POOLS = [
    (case[0], case[1])
    for case in CASES
    if case[0].startswith("rlightning/")
    and not case[0].endswith(("remote_debug.yaml", "empty.yaml", "default_env_strategy.yaml"))
]
ROUND_TRIPS = [(EXAMPLES / name, nodes) for name, nodes in SPEC.items()] + [
    (CORPUS / name, nodes) for name, nodes in CORPUS_POOLS
]


def composed(path: pathlib.Path) -> dict:
    """The config as rlplace composes it (a Hydra primary's groups merged in), as one document."""
    text = path.read_text()
    rep = Reporter(str(path))
    data = compose_file(str(path), rep, read_yaml(text, rep), text).data
    assert not rep.problems and isinstance(data, dict)
    return data


def placed(capsys, config: pathlib.Path, nodes: str, *extra: str) -> dict:
    assert main(["plan", str(config), "--nodes", nodes, "--format", "json", *extra]) == 0
    doc = json.loads(capsys.readouterr().out)
    workers = [
        (w["component"], w["rank"], w["node_rank"], w["gpus"], w["gpu_fraction"], w["bundle"]) for w in doc["workers"]
    ]
    return {"workers": workers, "bundles": doc["bundles"], "buffer": doc["settings"]["buffer_worker_num"]}


def test_the_round_trips_cover_cpu_only_env_workers_and_both_modes():
    """The cases below include what broke (CPU-only env workers) and manual as well as auto configs."""
    names = [str(p) for p, _ in ROUND_TRIPS]
    assert len(ROUND_TRIPS) >= 15 and any("train_small_machine" in n for n in names)
    assert any("manual" in n for n in names) and any("colocate" in n for n in names)


@pytest.mark.parametrize(("config", "nodes"), ROUND_TRIPS, ids=[p.name for p, _ in ROUND_TRIPS])
def test_the_exported_pools_validate_and_plan_identically(config, nodes, tmp_path, capsys):
    export = tmp_path / "resource_pool_auto.yaml"
    before = placed(capsys, config, nodes, "--export", str(export))
    data = composed(config)
    data.pop("defaults", None)
    cluster = data["cluster"] if isinstance(data.get("cluster"), dict) else data
    cluster["placement"] = {"mode": "manual"}
    data.pop("resource_pool", None)
    cluster["resource_pool"] = yaml.safe_load(export.read_text())["resource_pool"]
    manual = tmp_path / "manual.yaml"
    manual.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(manual)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert placed(capsys, manual, nodes) == before


def test_cpu_only_env_workers_are_exported_with_their_pools_range(tmp_path, capsys):
    """Written as `env: ''` (an empty range, which does not validate) before: now the pool's whole range."""
    config = tmp_path / "job.yaml"
    config.write_text(
        "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  env_worker_num: 4\n  env_each_gpu_num: 0\n"
        "  placement: {mode: auto, strategy: disaggregate}\n"
    )
    export = tmp_path / "pools.yaml"
    assert main(["plan", str(config), "--nodes", "2x2", "--export", str(export)]) == 0
    assert yaml.safe_load(export.read_text())["resource_pool"][1] == {
        "name": "rollout_pool",
        "num_node": 1,
        "num_gpus": 2,
        "eval": "0-1",
        "env": "0-1",
    }


def export(capsys, path: pathlib.Path) -> str:
    args = ["plan", str(EXAMPLES / "auto-disaggregate.yaml"), "--nodes", "2x4", "--export", str(path)]
    assert main(args) == 0
    return capsys.readouterr().out.replace("\n", "")


def test_the_export_header_names_the_command_that_wrote_it(tmp_path, capsys):
    path = tmp_path / "resource_pool_auto.yaml"
    export(capsys, path)
    first = path.read_text().splitlines()[0]
    assert first.startswith(f"# resource_pool computed by `rlplace plan {EXAMPLES / 'auto-disaggregate.yaml'} --nodes")
    assert f"--export {path}`" in first


def test_an_edited_export_is_left_as_it_is_and_the_new_pools_go_beside_it(tmp_path, capsys):
    path = tmp_path / "resource_pool_auto.yaml"
    export(capsys, path)
    edited = path.read_text().replace("train: 0-1", "train: 0-3")
    path.write_text(edited)
    said = export(capsys, path)
    beside = tmp_path / "resource_pool_auto.1.yaml"
    assert path.read_text() == edited, "the user's edit was replaced"
    assert "train: 0-1" in beside.read_text()
    assert f"{path} holds other pools" in said and f"written beside it to {beside}" in said
    # the same plan again: nothing new is written, and the message says where the pools are
    said = export(capsys, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resource_pool_auto.1.yaml", "resource_pool_auto.yaml"]
    assert f"already in {beside}" in said


def test_an_export_with_the_same_pools_is_not_written_again(tmp_path, capsys):
    path = tmp_path / "resource_pool_auto.yaml"
    export(capsys, path)
    path.write_text("# my notes\n" + path.read_text())  # a comment added: the pools are the same
    said = export(capsys, path)
    assert path.read_text().startswith("# my notes\n") and f"{path} already holds these pools" in said
    assert [p.name for p in tmp_path.iterdir()] == ["resource_pool_auto.yaml"]


def test_connects_export_names_it_and_leaves_an_edited_file_with_a_warning(tmp_path, caplog, monkeypatch):
    """After an auto-mode start `rlplace.connect()` writes the pools (the spec's Tip) into the working folder: into
    the file a user edited, it wrote over their edits."""
    from rlplace.config import load
    from rlplace.inventory import parse_nodes
    from rlplace.planner import plan
    from rlplace.ray.job import _export

    monkeypatch.setattr("sys.argv", ["train.py", "--lr", "3e-4"])
    planned = plan(load(EXAMPLES / "auto-disaggregate.yaml"), parse_nodes("2x4"))
    path = tmp_path / "resource_pool_auto.yaml"
    _export(planned, path)
    assert path.read_text().startswith("# resource_pool computed by `rlplace.connect() in train.py --lr 3e-4`")
    path.write_text(path.read_text().replace("train: 0-1", "train: 0-3"))
    with caplog.at_level("WARNING", logger="rlplace.ray.job"):
        _export(planned, path)
    assert "train: 0-3" in path.read_text() and (tmp_path / "resource_pool_auto.1.yaml").exists()
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} holds other pools (edited, or from another plan), so it was left as it is; these pools were written "
        f"beside it to {tmp_path / 'resource_pool_auto.1.yaml'} (use it with placement.mode: manual)"
    ]
