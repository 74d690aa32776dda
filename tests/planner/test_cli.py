"""`rlplace plan` as a user runs it: exit codes, the table, JSON/YAML, --export, --compare, --inventory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from tests.conftest import EXAMPLES

from rlplace.cli import main
from rlplace.config import load
from rlplace.inventory import parse_nodes
from rlplace.plan import Plan
from rlplace.planner import plan


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["plan", *argv])
    except SystemExit as e:  # argparse's own exit: a value --nodes or --inventory cannot be read as
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_table_shows_each_run_of_nodes_its_gpus_who_is_on_them_and_the_warnings(capsys):
    code, out, _ = run(capsys, str(EXAMPLES / "pools-mixed.yaml"), "--nodes", "3x8")
    assert code == 0
    assert "│ nodes 1-2 (8 GPUs) │ GPU 0-7 │ eval 0-15 (1/2), env 0-15 (1/2), one of each per GPU │" in out
    assert "│ node 0 (8 GPUs)    │ GPU 0-7 │ train 0-7, one per GPU" in out and "│ CPU     │ buffer 0" in out
    code, out, _ = run(capsys, str(EXAMPLES / "manual-global-pool.yaml"), "--nodes", "3x8")
    assert code == 0 and out.count("warning:") == 3 and "idle: node 0 GPUs 1-7" in out.replace("\n", " ")


def test_inventory_too_small_exits_3_naming_what_is_missing(capsys):
    code, _, err = run(capsys, str(EXAMPLES / "auto-disaggregate.yaml"), "--nodes", "1x2")
    assert code == 3
    assert "needs 6 GPU(s)" in err and "train_pool 2" in err and "the inventory has 2 (node 0: 2 GPUs)" in err


def test_hetero_on_too_few_nodes_exits_3(capsys):
    code, _, err = run(capsys, str(EXAMPLES / "hetero-18-nodes.yaml"), "--nodes", "16x8")
    assert code == 3 and "num_nodes is 18" in err


def test_config_errors_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  is_colocated: true\n  placement:\n    strategy: disaggregate\n")
    code, _, err = run(capsys, str(bad), "--nodes", "2x4")
    assert code == 2 and "is_colocated" in err and "contradicts placement.strategy: disaggregate" in err
    code, _, err = run(capsys, str(EXAMPLES / "auto-default.yaml"), "--nodes", "2y4")
    assert code == 2 and err.splitlines()[-1].startswith(
        "rlplace plan: error: argument --nodes: '2y4' is not COUNTxGPUS[:MODEL][@RESOURCE]"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["plan", str(EXAMPLES / "auto-default.yaml"), "--nodes", "2y4"],
            "rlplace plan: error: argument --nodes: '2y4'",
        ),
        (
            ["start", "--address", "10.0.0.1:6379", "--insecure"],
            "rlplace start: error: argument --insecure: only a head",
        ),
        (
            ["start", "--head", "--hardware", "franka", "--dry-run"],
            "rlplace start: error: argument --hardware: expected",
        ),
        (["demo", "--spare", "2y"], "rlplace demo: error: argument --spare: '2y' is neither a count (1) nor node"),
    ],
)
def test_command_line_mistakes_are_command_line_errors_not_config_problems(argv, said, capsys):
    """A mistyped flag is said as argparse says its own mistakes, not as "1 problem in the config: <config>: ..."."""
    try:
        code = main(argv)
    except SystemExit as e:  # found while parsing
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and said in err and "problem in the config" not in err and "<config>" not in err, err


def test_export_of_a_plan_without_pools_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, str(EXAMPLES / "auto-default.yaml"), "--nodes", "2x4", "--export", str(tmp_path / "x"))
    assert code == 2 and "strategy default creates no resource pools" in err


def test_export_writes_the_spec_form_with_a_header(capsys, tmp_path):
    out = tmp_path / "resource_pool_auto.yaml"
    code, text, _ = run(capsys, str(EXAMPLES / "auto-disaggregate.yaml"), "--nodes", "2x4", "--export", str(out))
    assert code == 0 and str(out) in text.replace("\n", "")
    written = out.read_text()
    assert written.startswith("# resource_pool computed by `rlplace plan ")
    assert yaml.safe_load(written) == {
        "resource_pool": [
            {"name": "train_pool", "num_node": 1, "num_gpus": 4, "train": "0-1"},
            {"name": "rollout_pool", "num_node": 1, "num_gpus": 4, "eval": "0-1", "env": "2-3"},
        ]
    }


def test_yaml_output_equals_json_output(capsys):
    args = (str(EXAMPLES / "pools-mixed.yaml"), "--nodes", "3x8", "--format")
    _, as_json, _ = run(capsys, *args, "json")
    _, as_yaml, _ = run(capsys, *args, "yaml")
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_compare_estimates_each_strategy_for_the_same_workers(capsys):
    argv = (str(EXAMPLES / "auto-disaggregate.yaml"), "--nodes", "2x4", "--compare", "--format", "json")
    code, out, _ = run(capsys, *argv, "--model-bytes", "1G", "--batch-bytes", "10M")
    assert code == 0
    c = json.loads(out)["compare"]
    assert set(c) == {"default", "disaggregate", "colocate"}
    assert c["disaggregate"]["weight_sync_bytes"] == 10**9 and c["disaggregate"]["experience_bytes"] == 10**7
    assert c["colocate"]["weight_sync_bytes"] == 0 and c["colocate"]["gpus_used"] == 4
    assert c["default"]["weight_sync_bytes"] is None
    code, out, _ = run(capsys, str(EXAMPLES / "auto-disaggregate.yaml"), "--nodes", "2x4", "--compare")
    assert code == 0 and "strategies compared" in out


def test_compare_reports_a_strategy_that_does_not_fit(capsys):
    argv = (str(EXAMPLES / "pools-mixed.yaml"), "--nodes", "3x8", "--compare", "--format", "json")
    code, out, _ = run(capsys, *argv)
    c = json.loads(out)["compare"]
    assert code == 0 and c["disaggregate"]["fits"] is False and "needs 40 GPU(s)" in c["disaggregate"]["error"]
    # eval and env share GPUs in the manual layout, so colocate is compared with env_strategy device-colocate
    assert c["colocate"]["fits"] is True and c["colocate"]["env_strategy"] == "device-colocate"
    assert c["colocate"]["gpus_used"] == 16


DISAGGREGATE_DEVICE_COLOCATE = """\
cluster:
  train_worker_num: 8
  eval_worker_num: 8
  env_worker_num: 8
  placement: {mode: auto, strategy: disaggregate, env_strategy: device-colocate}
"""


def test_compare_agrees_with_plan_on_the_configs_own_strategy(capsys, tmp_path):
    """A disaggregate/device-colocate job that fits 16 GPUs was called "needs 24 GPUs" (compared without its
    env_strategy); the compared row of the config's own strategy is now the plan's estimate."""
    config = tmp_path / "job.yaml"
    config.write_text(DISAGGREGATE_DEVICE_COLOCATE)
    code, out, _ = run(capsys, str(config), "--nodes", "2x8", "--compare", "--format", "json")
    doc = json.loads(out)
    row = doc["compare"]["disaggregate"]
    assert code == 0 and row["fits"] is True and row["env_strategy"] == "device-colocate"
    for key in ("gpus_used", "gpus_idle", "weight_sync_bytes", "experience_bytes"):
        assert row[key] == doc["estimate"][key], key


def test_compare_says_why_a_strategy_does_not_fit_below_the_table_not_in_its_nodes_column(capsys, tmp_path):
    config = tmp_path / "job.yaml"
    config.write_text(DISAGGREGATE_DEVICE_COLOCATE)
    code, out, _ = run(capsys, str(config), "--nodes", "2x8", "--compare")
    rows = [line for line in out.splitlines() if line.startswith("│ default ")]
    assert code == 0 and len(rows) == 1 and "GPU" not in rows[0] and "strategy default" not in rows[0], rows
    after = out[out.rindex("└") :].replace("\n", " ")
    assert "default does not fit: strategy default: train, eval and env ask for 24 GPU(s)" in after


def test_inventory_file(capsys, tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes:\n  - {count: 2, gpus: 4, model: A100}\n  - {gpus: 0, cpus: 16, labels: {robot: franka}}\n")
    code, out, _ = run(capsys, str(EXAMPLES / "auto-default.yaml"), "--inventory", str(inv), "--format", "json")
    assert code == 0 and [w["node_rank"] for w in json.loads(out)["workers"] if w["component"] == "buffer"] == [0, 1]
    inv.write_text("nodes:\n  - {count: 2, gpu: 4}\n")
    code, _, err = run(capsys, str(EXAMPLES / "auto-default.yaml"), "--inventory", str(inv))
    assert code == 2 and "nodes[0].gpu" in err and "valid keys" in err


def test_svg_and_html_pictures_are_written(capsys, tmp_path):
    svg, html = tmp_path / "p.svg", tmp_path / "p.html"
    argv = (str(EXAMPLES / "pools-mixed.yaml"), "--nodes", "3x8", "--svg", str(svg), "--html", str(html))
    code, _, _ = run(capsys, *argv)
    assert code == 0 and svg.read_text().lstrip().startswith("<") and html.stat().st_size > 0


def test_planning_imports_no_ray():
    code = (
        "import sys; import rlplace.planner, rlplace.viz.table, rlplace.commands.plan; sys.exit('ray' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_table_names_robots_and_rlinf_roles_in_the_estimate(capsys):
    code, out, _ = run(capsys, str(EXAMPLES / "hetero-18-nodes.yaml"), "--nodes", "8x8:A800,8x8:RTX4090,2x0")
    text = " ".join(out.split())
    assert code == 0 and "node 16 (CPU only) │ Franka 0 (10.10.10.1) │ env 0" in text
    assert "agent 0-399 (sees GPUs 0-7, reserves none, 100 per node)" in text
    assert "weight sync (actor -> rollout) 112 GB" in text  # actor on nodes 0-7, rollout on 8-15: 8 copies


def test_a_saved_json_plan_reloads_equal(capsys):
    for name, nodes in (("hetero-18-nodes.yaml", "8x8:A800,8x8:RTX4090,2x0"), ("auto-default.yaml", "2x4")):
        _, out, _ = run(capsys, str(EXAMPLES / name), "--nodes", nodes, "--format", "json")
        assert Plan.from_dict(json.loads(out)) == plan(load(EXAMPLES / name), parse_nodes(nodes))


NUM_NODES_1 = "cluster:\n  num_nodes: 1\n  component_placement:\n    actor: 0-9\n    rollout: 0-7\n"


@pytest.mark.parametrize("nodes", ["1x8", "2x8"])
def test_a_plan_never_uses_nodes_past_num_nodes_and_the_refusal_names_its_line(nodes, capsys, tmp_path):
    """RLinf uses the first num_nodes nodes of a bigger cluster: actor 8-9 has nowhere to go on either."""
    job = tmp_path / "job.yaml"
    job.write_text(NUM_NODES_1)
    code, _, err = run(capsys, str(job), "--nodes", nodes)
    assert code == 3
    assert f"{job}:4: cluster.component_placement.actor: placement asks for resource rank 8 in cluster, which" in err
    assert f"num_nodes: 1 at {job}:2 makes the cluster node 0" in err


def test_a_bigger_inventory_than_num_nodes_plans_on_the_first_nodes_with_a_warning(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(NUM_NODES_1.replace("0-9", "0-7"))
    code, out, _ = run(capsys, str(job), "--nodes", "3x8", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and {w["node_rank"] for w in doc["workers"]} == {0}
    (warning,) = [w for w in doc["warnings"] if "num_nodes" in w]
    assert f"num_nodes is 1 but the inventory has 3 nodes (num_nodes is written at {job}:2)" in warning
    assert "only the first 1 (ranks 0) are used; nodes 1-2 stay idle" in warning


def test_too_few_nodes_for_num_nodes_says_where_and_what_to_pass(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(NUM_NODES_1.replace("num_nodes: 1", "num_nodes: 16").replace("0-9", "0-7"))
    code, _, err = run(capsys, str(job), "--nodes", "8x8")
    assert code == 3
    assert f"num_nodes is 16 but the inventory has 8 node(s) (num_nodes is written at {job}:2)" in err
    assert "plan on 16 nodes (--nodes 16x8) or lower num_nodes" in err


def test_plan_on_a_directory_or_a_missing_file_says_so(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path), "--nodes", "1x8")
    assert code == 2 and f"{tmp_path}: is a directory, not a config file: name one of its YAML files" in err
    code, _, err = run(capsys, "no-such-job", "--nodes", "1x8")
    assert code == 2 and "no-such-job: no such file" in err


def test_plan_usage_shows_overrides_as_optional(capsys):
    with pytest.raises(SystemExit):
        main(["plan"])
    err = capsys.readouterr().err
    assert "file [OVERRIDE ...]" in " ".join(err.split()) and "the following arguments are required: file\n" in err


def test_the_model_size_comes_from_the_config_else_every_view_says_it_is_assumed(capsys, tmp_path):
    """CartPole's plan said "weight sync 14 GB (model 14 GB)" and drew "weights 14 GB": the --model-bytes default,
    unsaid. Now the config's cluster.model_bytes is read, and without it the text, the picture and JSON say
    "assumed"."""
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  placement: {strategy: disaggregate}\n")
    picture = tmp_path / "plan.svg"
    code, out, _ = run(capsys, str(job), "--nodes", "2x4", "--svg", str(picture))
    assert code == 0
    assert "weight sync (train -> eval) 14 GB (model 14 GB, assumed: write cluster.model_bytes or pass" in out
    assert ">weights 14 GB (assumed)</text>" in picture.read_text()
    code, out, _ = run(capsys, str(job), "cluster.model_bytes=2.2MiB", "--nodes", "2x4", "--svg", str(picture))
    assert "weight sync (train -> eval) 2.31 MB (model 2.31 MB from cluster.model_bytes)" in out
    assert ">weights 2.31 MB</text>" in picture.read_text() and "assumed" not in picture.read_text()
    code, out, _ = run(capsys, str(job), "cluster.model_bytes=2.2MiB", "--nodes", "2x4", "--format", "json")
    est = json.loads(out)["estimate"]
    assert (est["model_bytes"], est["model_bytes_source"]) == (2306867, "cluster.model_bytes")
    code, out, _ = run(capsys, str(job), "--nodes", "2x4", "--model-bytes", "1G", "--format", "json")
    assert json.loads(out)["estimate"]["model_bytes_source"] == "--model-bytes"
