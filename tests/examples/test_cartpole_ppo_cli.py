"""`rlplace demo` / `rlplace run` as a user runs them: output, exit codes, files, and no Ray left behind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlplace.cli import main
from rlplace.examples.cartpole_ppo import CONFIGS, config_names
from rlplace.examples.cartpole_ppo.curve import RewardCurve
from rlplace.examples.cartpole_ppo.pipeline import RunResult
from rlplace.examples.cartpole_ppo.report import counters, outcome


def test_outcome_says_how_far_an_unsolved_run_got():
    result = RunResult(curve=RewardCurve(), seconds=12.0)
    result.curve.add_iteration([20.0, 40.0])
    text = outcome(result)
    assert text.startswith("Not solved within the budget: average return 30.0 over the last 2 episodes")
    assert "after 1 iterations, 2 episodes" in text


def test_report_counts_offload_moves_only_when_offload_ran():
    moved = {"offloads": 9, "reloads": 6, "bytes_offloaded": 9 * 4096, "bytes_reloaded": 6 * 4096}
    still = dict.fromkeys(moved, 0)
    result = RunResult(offload={"train:0": moved, "eval:0": still}, hook_calls=12)
    text = counters(result).plain
    assert "offload: 12 hook calls" in text and "train:0 9/6 (36 KiB out)" in text and "eval:0" not in text
    assert "not enabled" in counters(RunResult(offload={"train:0": still})).plain


def test_solved_needs_a_full_window_of_good_episodes():
    curve = RewardCurve()
    curve.add_iteration([500.0] * 99)
    assert not curve.solved  # 99 episodes are not a 100-episode window
    curve.add_iteration([0.0])
    assert curve.average == pytest.approx(495.0) and curve.solved
    curve.add_iteration([0.0] * 61)
    assert not curve.solved  # the window moved on


def test_list_configs_names_every_shipped_config(capsys):
    assert main(["demo", "--list-configs"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == config_names()
    assert len(config_names()) == 5


def test_run_reports_a_bad_config_before_starting_any_cluster(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  train_worker_num: two\n")
    assert main(["run", str(bad), "--simulate", "2x4"]) == 2
    captured = capsys.readouterr()
    assert "train_worker_num" in captured.err and "two" in captured.err
    assert "Starting an embedded Ray cluster" not in captured.out


def test_run_rejects_a_malformed_simulated_cluster_before_starting_it(capsys):
    with pytest.raises(SystemExit) as e:  # argparse's exit: the flag is checked while the line is parsed
        main(["run", str(CONFIGS / "default.yaml"), "--simulate", "2by4"])
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert "argument --simulate: '2by4' is not COUNTxGPUS[:MODEL]" in captured.err  # the flag as typed
    assert "--nodes" not in captured.err and "Starting an embedded Ray cluster" not in captured.out


def test_run_reports_a_plan_that_cannot_fit_before_starting_the_simulated_cluster(capsys):
    assert main(["run", str(CONFIGS / "node-groups.yaml"), "--simulate", "1x4"]) == 3
    captured = capsys.readouterr()
    assert "inventory has 1 node" in captured.err
    assert "Starting an embedded Ray cluster" not in captured.out


def test_the_cli_starts_without_importing_the_demos_dependencies():
    """`rlplace validate` must stay fast and work without the demo extra: the demo's options are light."""
    code = "import sys; from rlplace.cli import build_parser; build_parser(); print(sorted(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("'numpy'", "'gymnasium'", "'ray'"):
        assert heavy not in loaded, heavy


def test_demo_without_the_demo_extra_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # as if not installed
    assert main(["demo"]) == 1
    assert "needs gymnasium: pip install 'rlplace[demo]'" in capsys.readouterr().err


def test_run_on_an_unreachable_address_fails_within_seconds(capsys):
    assert main(["run", str(CONFIGS / "default.yaml"), "--address", "127.0.0.1:1"]) == 1
    assert "no Ray cluster reachable at" in capsys.readouterr().err
