"""`rlplace run --profile-out FILE` without a cluster: the profile made from a run's phase times is one `rlplace
tune --profile` reads and predicts the run's own placement from; which phase is which component's cost; what is
left out and said; nothing written when there is nothing to write; bad `--profile-phase` values refused."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from rlplace.cli import main
from rlplace.config.loader import load
from rlplace.config.profile_file import load_profile
from rlplace.errors import ConfigError, RlplaceError
from rlplace.examples.cartpole_ppo import CONFIGS
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.planner.profile_record import check_phase_map, phase_components, recorded_profile, write_profile
from rlplace.planner.timing import predict
from rlplace.planner.workload import build_workload

COLLOCATED = {"cluster": {"num_nodes": 2, "component_placement": {"actor,rollout": "all"}}}
SPLIT = {"cluster": {"num_nodes": 2, "component_placement": {"rollout": "0-3", "actor": "4-7"}}}
PPO = {
    "cluster": {
        **{"train_worker_num": 2, "eval_worker_num": 2, "env_worker_num": 2, "env_each_gpu_num": 0},
        "placement": {"mode": "auto", "strategy": "disaggregate"},
    }
}
#: A run's phases: the first rollout waited for the workers to start (the median leaves it out).
TIMES = {"rollout": [5.0, 0.30, 0.32, 0.31, 0.31], "train": [0.11, 0.10, 0.12], "sync": [0.01, 0.01, 0.01]}


def record(document: dict, nodes: str, times=TIMES, memory=None, **kw):
    spec = load(document)
    inventory = parse_nodes(nodes)
    placed = plan(spec, inventory)
    return spec, inventory, placed, recorded_profile(placed, inventory, times, memory or {}, **kw)


def profile_file(tmp_path, recorded) -> str:
    path = tmp_path / "profile.yaml"
    write_profile(path, recorded)
    return str(path)


def test_the_profile_predicts_the_run_it_was_measured_on(tmp_path):
    spec, inventory, placed, recorded = record(COLLOCATED, "2x4:A800", model_bytes=2_000_000)
    profile = load_profile(profile_file(tmp_path, recorded))
    assert profile.measured_gpus == 8 and profile.measured_gpu == "A800" and profile.model_bytes == 2_000_000
    assert {c: cost.seconds for c, cost in profile.components.items()} == {
        "rollout": {8: pytest.approx(0.31)},  # the median: the first iteration's 5 s start-up does not count
        "actor": {8: pytest.approx(0.11)},  # train is the actor's in RLinf's names
    }
    workload = build_workload(spec, placed, inventory, None, profile)
    assert predict(placed, workload, inventory).seconds == pytest.approx(0.31 + 0.11)  # they took turns


def test_tune_reads_the_recorded_file(tmp_path, capsys):
    _, _, _, recorded = record(SPLIT, "2x4:A800", model_bytes=2_000_000)
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(SPLIT))
    argv = ["tune", str(config), "--nodes", "2x4:A800", "--profile", profile_file(tmp_path, recorded)]
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    as_written = json.loads(out)["as_written"]  # the run's own placement, predicted from its own times
    assert as_written["gpus"] == {"rollout": 4, "actor": 4}
    assert as_written["seconds"] == pytest.approx(0.31 + 0.11, rel=1e-3)  # one batch: streaming overlaps nothing


def test_pools_names_sync_and_cpu_components_are_said_not_written(tmp_path):
    times = {**TIMES, "evaluate": [0.5]}
    _, _, _, recorded = record(PPO, "1x4:A800", times, mapping={"evaluate": "env"})
    doc = yaml.safe_load(recorded.text)
    assert sorted(doc["components"]) == ["eval", "train"]  # rollout is eval's, train is train's
    text = " ".join(recorded.text.split())  # the comments are wrapped
    assert "rollout -> eval: 5 entries, median 0.31 s (0.3 to 5)" in text
    assert "sync: 3 entries" in text and "not written: weight sync" in text
    assert "evaluate -> env: 1 entries, median 0.5 s (0.5 to 0.5); not written: env ran on no GPU" in text
    assert "memory_gb left out (eval, train)" in text
    assert "model_bytes left out" in text
    assert all(len(line) <= 120 for line in recorded.text.splitlines())


def test_phases_given_to_one_component_add_up_and_memory_is_rounded_up():
    times = {"rollout": [0.3], "evaluate": [0.2], "train": [0.1]}
    _, _, _, recorded = record(PPO, "1x4:A800", times, {"eval": 1.234, "train": 0.0001}, mapping={"evaluate": "eval"})
    components = yaml.safe_load(recorded.text)["components"]
    assert components["eval"] == {"seconds": {2: pytest.approx(0.5)}, "memory_gb": 1.24}
    assert components["train"] == {"seconds": {2: pytest.approx(0.1)}, "memory_gb": 0.01}
    assert "memory_gb left out" not in recorded.text


def test_a_faster_gpu_models_seconds_are_stretched_to_the_slowest_and_predicted_back(tmp_path):
    # rollout on the H100 node, the actor on the A800 node: one measured.gpu for both
    spec, inventory, placed, recorded = record(SPLIT, "1x4:H100,1x4:A800", model_bytes=1000)
    profile = load_profile(profile_file(tmp_path, recorded))
    assert profile.measured_gpu == "A800"
    assert profile.components["rollout"].seconds[4] == pytest.approx(0.31 * 3.17, rel=1e-3)
    assert "rollout ran on H100, 3.17 times as fast as A800" in " ".join(recorded.text.split())
    workload = build_workload(spec, placed, inventory, None, profile)
    stages = {s.name: s.seconds for s in predict(placed, workload, inventory).stages}
    assert stages == {"rollout": pytest.approx(0.31, rel=1e-4), "actor": pytest.approx(0.11, rel=1e-4)}


def test_nodes_without_a_gpu_model_leave_measured_gpu_out():
    _, _, _, recorded = record(COLLOCATED, "2x4")
    assert yaml.safe_load(recorded.text)["measured"] == {"gpus": 8}
    assert "measured.gpu left out" in recorded.text


@pytest.mark.parametrize(
    ("times", "says"),
    [
        ({}, "the command finished no phase"),
        ({"train": []}, "the command finished no phase"),
        ({"sync": [0.1]}, "no phase the command finished is the cost of a component on GPUs: sync: 1 entries"),
    ],
)
def test_nothing_to_write_is_an_error_naming_why(times, says):
    with pytest.raises(RlplaceError, match=says):
        record(COLLOCATED, "2x4", times)


def test_default_mapping_follows_the_names_then_the_roles():
    assert phase_components(["actor", "rollout"]) == {"rollout": "rollout", "train": "actor"}
    assert phase_components(["train", "eval", "env", "buffer"]) == {"rollout": "eval", "train": "train"}
    assert phase_components(["train", "eval"], {"sync": "train", "rollout": "env"}) == {
        "rollout": "env",
        "train": "train",
        "sync": "train",
    }


def test_a_mapping_to_a_component_tune_cannot_use_is_refused():
    with pytest.raises(ConfigError) as e:
        check_phase_map({"rollout": "evil", "train": "buffer"}, ["train", "eval", "buffer"], "job.yaml")
    text = str(e.value)
    assert "--profile-phase: rollout=evil: the config has no component 'evil'; valid: train, eval" in text
    assert "train=buffer: the time model orders only env, rollout, eval, inference, actor, train" in text


def _run(capsys, *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out + err


def test_run_refuses_a_bad_profile_out_before_anything_starts(tmp_path, capsys):
    config = tmp_path / "job.yaml"
    config.write_text(textwrap.dedent(json.dumps(COLLOCATED)))
    (tmp_path / "target").write_text("mine")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "target")
    base = ["run", str(config), "--simulate", "2x4", "--out", str(tmp_path)]
    code, err = _run(capsys, *base, "--profile-out", str(tmp_path / "link.yaml"), "--", "python", "-c", "0")
    assert code == 1 and "is a symbolic link" in err and "starting a simulated cluster" not in err
    assert (tmp_path / "target").read_text() == "mine"
    code, err = _run(capsys, *base, "--profile-out", str(tmp_path / "no" / "p.yaml"), "--", "python", "-c", "0")
    assert code == 1 and "no such folder" in err and "starting a simulated cluster" not in err
    code, err = _run(capsys, *base, "--profile-out", "p.yaml", "--profile-phase", "rollout=critic", "--", "python")
    assert code == 2 and "rollout=critic: the config has no component 'critic'" in err
    pipeline = ["run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--out", str(tmp_path)]
    code, err = _run(capsys, *pipeline, "--profile-out", str(tmp_path / "link.yaml"))  # the bundled pipeline's
    assert code == 1 and "is a symbolic link" in err and "Starting an embedded" not in err
    code, err = _run(capsys, *base, "--profile-out", "p.yaml", "--profile-phase", "warmup=actor")
    assert code == 2 and "unknown phase 'warmup'; the phases a job times: rollout, evaluate, train, sync" in err
