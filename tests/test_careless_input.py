"""Careless input a new user types (issue 34): each gets one line saying what is wrong and how to write it, with its
own exit code, and nothing starts for it. No cluster is started in here: every case is refused before one."""

from __future__ import annotations

import pytest

from rlplace.cli import main
from rlplace.commands.driver import EXIT_NOT_STARTED
from rlplace.examples.cartpole_ppo import CONFIGS

JOB = str(CONFIGS / "disaggregate.yaml")


@pytest.fixture(autouse=True)
def in_a_folder_of_its_own(tmp_path, monkeypatch):
    """`run` writes its picture (--out, default: here) before it refuses a command: not into the checkout."""
    monkeypatch.chdir(tmp_path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own exit
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "fixed"),
    [
        (["train.py", "--lr", "3e-4", "--simulate", "2x4"], "--simulate 2x4 -- python train.py --lr 3e-4"),
        (["cluster.train_worker_num=2", "python", "train.py"], "cluster.train_worker_num=2 -- python train.py"),
    ],
    ids=["script", "python-script"],
)
def test_a_command_without_the_dashes_is_shown_with_them(capsys, argv, fixed):
    code, _, err = run(capsys, "run", JOB, *argv)
    assert code == 2 and err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"rlplace run: error: '{argv[-2] if argv[0].startswith('cluster') else argv[0]}' is not a")
    assert err.rstrip().endswith(f"write it after --: rlplace run {JOB} {fixed}")


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["python", "no_such_train.py", "--lr", "1"], "the script 'no_such_train.py' does not exist in "),
        (["python", "-u", "-W", "ignore", "nowhere/train.py"], "the script 'nowhere/train.py' does not exist"),
        (["no-such-program-here", "x"], "cannot run 'no-such-program-here': not found on PATH"),
    ],
)
def test_a_command_that_cannot_start_is_refused_with_its_own_exit_code_before_a_cluster(capsys, command, said):
    """Python told to run a missing script exits 2, a config error's code; `run` refuses it first, with 127."""
    code, out, err = run(capsys, "run", JOB, "--simulate", "2x4", "--", *command)
    assert code == EXIT_NOT_STARTED == 127 and said in err, err
    assert "starting a simulated cluster" not in out + err


def test_python_with_a_module_or_code_is_not_taken_for_a_script():
    from rlplace.commands.driver import _check_runnable

    for command in (["python", "-m", "pytest"], ["python", "-c", "print(1)"], ["python3.11", "-um", "x"]):
        _check_runnable(command)  # nothing to check: no script named


def test_a_missing_inventory_file_is_one_line_without_the_usage(capsys):
    code, _, err = run(capsys, "plan", JOB, "--inventory", "nope.yaml")
    assert code == 2 and err == "rlplace plan: error: argument --inventory: nope.yaml: no such file\n"


def test_a_malformed_command_line_still_gets_the_usage(capsys):
    code, _, err = run(capsys, "plan")
    assert code == 2 and err.startswith("usage: rlplace plan") and "the following arguments are required" in err


@pytest.mark.parametrize("nodes", ["2x8 1x4", "2x8;1x4"])
def test_nodes_errors_show_the_comma_between_terms(capsys, nodes):
    code, _, err = run(capsys, "plan", JOB, "--nodes", nodes)
    assert code == 2 and "the terms separated by ','" in err and "'8x8:A800,2x0'" in err


@pytest.mark.parametrize(
    ("text", "column"),
    [("cluster:\n\ttrain_worker_num: 2\n", 1), ("cluster:\n  train_worker_num: 2\n\t  eval_worker_num: 2\n", 1)],
)
def test_tab_indentation_is_named_as_a_tab(capsys, tmp_path, text, column):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    code, out, err = run(capsys, "validate", str(job))  # validate reports on stdout
    err += out
    line = text[: text.index("\t")].count("\n") + 1
    assert code == 2 and f"{job}:{line}: YAML syntax: a tab (column {column}); YAML indents with spaces only" in err


def test_a_python_file_given_as_the_config_is_named_as_not_a_yaml_config(capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import rlplace\nprint('hi')\n")
    code, out, err = run(capsys, "validate", str(script))
    err += out
    assert code == 2 and f"{script}: this is a Python file, not a YAML config" in err
    assert f"rlplace run CONFIG.yaml -- python {script}" in err


@pytest.mark.parametrize("command", ["plan", "status"])
def test_plan_and_status_help_describe_the_command(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    description = out.split("\n\n")[1]
    assert code == 0 and not description.startswith(("options:", "positional")) and len(description) > 100


def test_run_help_shows_the_topology_suffix_of_simulate(capsys):
    code, out, _ = run(capsys, "run", "--help")
    assert code == 0 and "COUNTxGPUS[:MODEL][/LEVEL=N...]" in " ".join(out.split()) and "/rack=2" in out
