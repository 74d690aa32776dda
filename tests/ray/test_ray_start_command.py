"""`rlplace start`: the node rank rules and the `ray start` command it builds (no daemon is started)."""

from __future__ import annotations

import json
import subprocess

import pytest

from rlplace.cli import main
from rlplace.commands.start import detect_accelerator, ray_start_command, resolve_node_rank, start_environment
from rlplace.errors import ConfigError


def _cmd(**kw):
    base = dict(head=False, address="10.0.0.1:6379", node_rank=None, accelerator=None)
    return ray_start_command(**{**base, **kw})


def test_worker_node_gets_rank_and_accelerator_labels():
    cmd = _cmd(node_rank=3, accelerator="A800")
    assert cmd[:3] == ["ray", "start", "--address=10.0.0.1:6379"]
    assert "--labels=rlplace/node-rank=3,rlplace/accelerator=A800" in cmd


def test_head_node_and_passthrough_options_keep_their_order():
    cmd = _cmd(head=True, address=None, node_rank=0, ray_args=["--", "--num-cpus", "8", "--block"])
    assert cmd[2] == "--head"
    assert cmd[-3:] == ["--num-cpus", "8", "--block"]


def test_user_labels_and_resources_are_merged_not_duplicated():
    cmd = _cmd(
        node_rank=16,
        hardware=["franka:0", "Franka:1"],
        ray_args=["--labels", "zone=a", '--resources={"disk": 2}', "--num-gpus=0"],
    )
    labels = [a for a in cmd if a.startswith("--labels")]
    assert labels == ["--labels=zone=a,rlplace/node-rank=16"]
    resources = json.loads(next(a for a in cmd if a.startswith("--resources=")).split("=", 1)[1])
    assert resources == {"disk": 2.0, "rlplace/robot/franka/0": 1.0, "rlplace/robot/franka/1": 1.0}
    assert cmd[-1] == "--num-gpus=0"


def test_no_rank_means_no_rank_label():
    assert not any(a.startswith("--labels") for a in _cmd())


def test_conflicting_user_rank_label_is_rejected():
    with pytest.raises(ConfigError, match="rlplace/node-rank is set by rlplace start"):
        _cmd(node_rank=1, ray_args=["--labels=rlplace/node-rank=2"])


@pytest.mark.parametrize("bad", ["franka", "franka:x", ":0"])
def test_bad_hardware_item_names_the_expected_form(bad):
    with pytest.raises(ConfigError, match="TYPE:INDEX"):
        _cmd(hardware=[bad])


def test_rank_from_cli_then_rlplace_env_then_rlinf_env():
    assert resolve_node_rank("2", {"RLPLACE_NODE_RANK": "5"}) == 2
    assert resolve_node_rank(None, {"RLPLACE_NODE_RANK": "5", "RLINF_NODE_RANK": "5"}) == 5
    assert resolve_node_rank(None, {"RLINF_NODE_RANK": "7"}) == 7
    assert resolve_node_rank(None, {}) is None


def test_bad_or_conflicting_ranks_are_errors_naming_the_source():
    with pytest.raises(ConfigError, match=r"--node-rank.*integer"):
        resolve_node_rank("-1", {})
    with pytest.raises(ConfigError, match=r"\$RLINF_NODE_RANK.*integer"):
        resolve_node_rank(None, {"RLINF_NODE_RANK": "two"})
    with pytest.raises(ConfigError, match="environment disagrees"):
        resolve_node_rank(None, {"RLPLACE_NODE_RANK": "1", "RLINF_NODE_RANK": "2"})


def test_workers_without_gpu_are_made_blind_to_gpus_unless_the_user_says_otherwise():
    assert start_environment({})["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] == "1"
    assert start_environment({"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"})["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] == "0"


def test_accelerator_detection_from_nvidia_smi_output():
    def fake(out, rc=0):
        return lambda *a, **k: subprocess.CompletedProcess(a, rc, stdout=out, stderr="")

    assert detect_accelerator(fake("NVIDIA A800-SXM4-80GB\nNVIDIA A800-SXM4-80GB\n")) == "A800-SXM4-80GB"
    assert detect_accelerator(fake("NVIDIA GeForce RTX 4090\n")) == "RTX-4090"
    assert detect_accelerator(fake("", rc=9)) is None

    def missing(*a, **k):
        raise FileNotFoundError("nvidia-smi")

    assert detect_accelerator(missing) is None


def test_cli_dry_run_prints_the_command(capsys, monkeypatch):
    monkeypatch.setenv("RLPLACE_NODE_RANK", "4")
    assert main(["start", "--address", "head:6379", "--accelerator", "RTX4090", "--dry-run", "--", "--block"]) == 0
    out = capsys.readouterr().out
    assert "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1" in out
    assert "--labels=rlplace/node-rank=4,rlplace/accelerator=RTX4090" in out and out.strip().endswith("--block")


def test_cli_bad_rank_exits_2_without_traceback(capsys):
    assert main(["start", "--head", "--node-rank", "x", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--node-rank" in err and "Traceback" not in err


def test_a_spare_is_labelled_as_such_and_carries_no_rank(capsys, monkeypatch):
    assert "--labels=rlplace/accelerator=A800,rlplace/spare=true" in _cmd(accelerator="A800", spare=True)
    for var in ("RLPLACE_NODE_RANK", "RLINF_NODE_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert main(["start", "--spare", "--address", "10.0.0.1:6379", "--accelerator", "A800", "--dry-run"]) == 0
    assert "rlplace/spare=true" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "env", "where"),
    [
        (["--spare", "--node-rank", "2", "--address", "10.0.0.1:6379"], {}, "--node-rank"),
        (["--spare", "--address", "10.0.0.1:6379"], {"RLPLACE_NODE_RANK": "2"}, "$RLPLACE_NODE_RANK=2"),
        (["--spare", "--head"], {}, "--spare"),
    ],
)
def test_a_spare_with_a_rank_or_as_head_is_refused(argv, env, where, capsys, monkeypatch):
    for var in ("RLPLACE_NODE_RANK", "RLINF_NODE_RANK"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["start", *argv, "--dry-run"]) == 2
    assert f"{where}: " in capsys.readouterr().err


def test_the_hardware_environment_of_the_node_is_published_as_labels_and_read_back_by_the_live_inventory(
    capsys, monkeypatch
):
    from rlplace.config.hardware import env_var_names
    from rlplace.ray.nodes import inventory_from_nodes

    for name in env_var_names():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROBOT_IP", "10.0.0.1,10.0.0.2")
    monkeypatch.setenv("CAMERA_SERIALS", "111,112")
    monkeypatch.setenv("UNRELATED", "x")
    assert main(["start", "--address", "head:6379", "--node-rank", "1", "--accelerator", "none", "--dry-run"]) == 0
    flag = next(a for a in capsys.readouterr().out.split() if a.startswith("--labels="))
    labels = dict(item.split("=", 1) for item in flag.removeprefix("--labels=").split(","))
    assert not any("UNRELATED" in k for k in labels)
    record = {"NodeID": "n1", "Alive": True, "NodeManagerAddress": "10.1.0.1", "Resources": {"CPU": 4.0}}
    (node,) = inventory_from_nodes([{**record, "Labels": {**labels, "rlplace/node-rank": "0"}}]).nodes
    assert node.env == {"ROBOT_IP": "10.0.0.1,10.0.0.2", "CAMERA_SERIALS": "111,112"}


def test_a_node_is_labelled_with_its_rack_and_nvlink_domain_and_its_zone_goes_through_ray_nodes_zone(capsys):
    from rlplace.commands.start import topology_labels, zone_environment

    cmd = _cmd(node_rank=2, topology=topology_labels("r7", "nvl-7"), ray_args=["--labels", "team=rl"])
    assert "--labels=team=rl,rlplace/node-rank=2,rack=r7,nvlink-domain=nvl-7" in cmd
    assert zone_environment("us-east-1a") == {"RAY_NODE_ZONE": "us-east-1a"} and zone_environment(None) == {}
    with pytest.raises(ConfigError, match="--rack"):
        topology_labels("rack 7", None)
    with pytest.raises(ConfigError, match="rack is set by rlplace start"):
        _cmd(topology=topology_labels("r7", None), ray_args=["--labels=rack=r8"])
    code = main(["start", "--head", "--insecure", "--dry-run", "--accelerator", "H100", "--rack", "r1", "--zone", "z1"])
    out = capsys.readouterr().out
    assert code == 0 and "RAY_NODE_ZONE=z1" in out and "rack=r1" in out
