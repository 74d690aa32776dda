"""`rlplace run CONFIG --simulate NODES -- COMMAND` (issue 25): the user's own script as the job's driver.

The scripts are written here, as a user writes one: they call `rlplace.connect()` with no argument and launch
their own actor class on the plan. Every process a run starts (the simulated cluster's GCS, raylets and workers,
the command) inherits a marker of the test's in its environment, so "nothing left running" is checked in the
process table. Measured on the loaded 2-core machine (load 4-8): 15-30 s per run, most of it starting the
simulated cluster; so each simulated cluster here checks every fact of its run, and what does not need a cluster of
its own (`kill -INT` of `run` alone being passed on) runs on the session's (`--address`, marked `ray`).
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import pty
import signal
import subprocess
import sys
import termios
import time
import uuid

import pytest

from rlplace.cli import main
from rlplace.commands import local_nodes
from rlplace.config import load
from rlplace.config.driver_env import CONFIG_ENV, OVERRIDES_ENV, driver_environment, load_driver_config
from rlplace.errors import RlplaceError
from rlplace.examples.cartpole_ppo import CONFIGS

RLPLACE = str(pathlib.Path(sys.executable).with_name("rlplace"))
MARK = "RLPLACE_TEST_RUN"
#: The user's script: edits the config `run` planned before it connects (the plan it gets is still the one shown),
#: launches its own actor class on that plan, prints where each worker ran, the overrides it was given and the first
#: line of `rlplace status`, and waits to be interrupted, without catching KeyboardInterrupt itself.
MY_TRAIN = """\
import os, pathlib, subprocess, sys, time
import rlplace

config = pathlib.Path("job.yaml")
config.write_text(config.read_text().replace("train_worker_num: 3", "train_worker_num: 1"))

class Learner:
    def __init__(self, lr):
        self.lr = lr

    def where(self):
        p = rlplace.worker_placement()
        return f"{p.component} {p.rank} node {p.node_rank} {p.accelerator} gpus {list(p.gpus)} lr {self.lr}"

with rlplace.connect() as job:
    for line in job.launch("train", Learner, lr=float(sys.argv[1])).call("where"):
        print(line)
    print("overrides", os.environ["RLPLACE_OVERRIDES"])
    print(subprocess.run(["rlplace", "status"], capture_output=True, text=True).stdout.splitlines()[0])
    print("ready", flush=True)
    time.sleep(600)
"""
#: A script that waits to be interrupted, cleans up when it is, and says how many SIGINTs it got (a second one
#: would interrupt its clean-up).
WAITER = """\
import signal, sys, time
import rlplace

class Echo:
    def ping(self):
        return "pong"

received = []

def on_sigint(signum, frame):
    received.append(signum)
    if len(received) == 1:
        raise KeyboardInterrupt

try:
    with rlplace.connect() as job:
        job.launch("train", Echo).call("ping")
        signal.signal(signal.SIGINT, on_sigint)
        print("ready", flush=True)
        time.sleep(600)
except KeyboardInterrupt:
    print(f"interrupted: the job is shut down; SIGINTs received: {len(received)}", flush=True)
    sys.exit(7)
"""


def rlplace_run(tmp_path: pathlib.Path, *argv: str, **popen: object) -> tuple[subprocess.Popen, str]:
    """`rlplace run ARGV` in `tmp_path`, its processes marked; returns it and the mark."""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update({MARK: mark, "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    proc = subprocess.Popen(
        [RLPLACE, "run", *argv], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        **popen,
    )  # fmt: skip
    return proc, mark


def left_running(mark: str) -> list[tuple[int, str]]:
    return local_nodes.marked_processes(MARK, mark)


@pytest.mark.slow
def test_run_runs_the_users_script_on_the_plan_shown_and_ctrl_c_ends_it_with_130(tmp_path):
    """About 12 s. The script's stdout is its own (the plan and run's lines go to stderr); the plan `run` showed (3
    train workers) is the one the command runs, though the config says 1 by then; `rlplace status` does not call the
    simulated cluster OPEN; and a Ray-connected driver that Ctrl-C ends exits 130, as an interrupted command does
    (Ray alone makes it 1). That `run` exits with the command's own code: the Ctrl-C test below (7) and the guide's
    block of `rlplace run` (0)."""
    (tmp_path / "my_train.py").write_text(MY_TRAIN)
    text = (CONFIGS / "disaggregate.yaml").read_text()
    (tmp_path / "job.yaml").write_text(text.replace("train_worker_num: 2", "train_worker_num: 3"))
    argv = ["job.yaml", "cluster.eval_worker_num=1", "--simulate", "2x8:A800,1x4", "--", "python", "my_train.py"]
    proc, mark = rlplace_run(tmp_path, *argv, "3e-4")
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(5)]
    assert proc.stdout.readline().strip() == "ready", "".join(lines) + (proc.stderr.read() if proc.stderr else "")
    os.kill(proc.pid, signal.SIGINT)  # to `run` alone: passed on to the command
    out, err = proc.communicate(timeout=120)
    assert [line.rstrip("\n") for line in lines[:4]] == [
        "train 0 node 0 A800 gpus [0] lr 0.0003",
        "train 1 node 0 A800 gpus [1] lr 0.0003",
        "train 2 node 0 A800 gpus [2] lr 0.0003",
        'overrides ["cluster.eval_worker_num=1"]',
    ]
    # `rlplace status` on the cluster run simulates: no OPEN warning (nothing to do about it), what it is instead
    assert lines[4].startswith("cluster ") and " is simulated by rlplace on this machine " in lines[4], lines[4]
    assert out == ""  # nothing but the script's lines on stdout
    assert "train 0-2, one per GPU" in err  # the plan, shown before the cluster started
    assert proc.returncode == 130, err[-3000:]
    assert "KeyboardInterrupt" in err and "rlplace: simulated cluster stopped, none of its processes left" in err
    assert left_running(mark) == []


def _on_a_terminal(slave: int) -> None:
    """In the child before exec: a session of its own whose controlling terminal is the pty `slave` (its stdin),
    with its process group in the foreground, as a shell starts a command."""
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)


def interrupt_the_waiter(tmp_path: pathlib.Path, where: list[str], by_terminal: bool) -> tuple[int, str, str, str]:
    """`rlplace run job.yaml WHERE -- python waiter.py`, its stdin a terminal (a pty), interrupted once the waiter is
    ready: by Ctrl-C at the terminal, or by `kill -INT` of `run` alone. Returns its exit code, stdout, stderr, mark."""
    (tmp_path / "waiter.py").write_text(WAITER)
    (tmp_path / "job.yaml").write_text((CONFIGS / "disaggregate.yaml").read_text())
    master, slave = pty.openpty()
    try:
        proc, mark = rlplace_run(
            tmp_path, "job.yaml", *where, "--", "python", "waiter.py", stdin=slave,
            preexec_fn=lambda: _on_a_terminal(slave),
        )  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        if by_terminal:
            os.write(master, b"\x03")  # the terminal's interrupt character: SIGINT to its foreground group
        else:
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    return proc.returncode, out, err, mark


@pytest.mark.slow
def test_ctrl_c_at_the_terminal_stops_the_command_then_the_simulated_cluster(tmp_path):
    """About 12 s. Ctrl-C typed at a terminal reaches `run` and the command, one foreground process group, and
    `run` sends no second one; the command cleans up and ends with its own code, then the cluster goes."""
    code, out, err, mark = interrupt_the_waiter(tmp_path, ["--simulate", "1x4,1x4"], by_terminal=True)
    assert code == 7, err[-3000:]
    assert out.splitlines() == ["interrupted: the job is shut down; SIGINTs received: 1"]
    assert "rlplace: simulated cluster stopped, none of its processes left" in err
    assert left_running(mark) == []


@pytest.mark.ray
def test_kill_int_of_run_alone_is_passed_on_to_the_command_once(ray_cluster, tmp_path):
    """`kill -INT` of `run` alone (not its process group) is passed on, once; the command ends with its own code.
    On the session's cluster: what `run` does with the signal does not depend on whose cluster it is."""
    code, out, err, mark = interrupt_the_waiter(tmp_path, ["--address", ray_cluster.address], by_terminal=False)
    assert code == 7, err[-3000:]
    assert out.splitlines() == ["interrupted: the job is shut down; SIGINTs received: 1"]
    assert left_running(mark) == []


def test_a_command_that_cannot_start_is_refused_before_a_cluster_starts(tmp_path, capsys):
    config = str(CONFIGS / "disaggregate.yaml")
    argv = ["run", config, "--simulate", "2x4", "--out", str(tmp_path), "--", "no-such-program-here", "x"]
    assert main(argv) == 127
    out, err = capsys.readouterr()
    assert "cannot run 'no-such-program-here': not found on PATH" in err
    assert "starting a simulated cluster" not in out + err


def test_runs_output_is_not_wrapped_at_80_columns_when_piped(tmp_path):
    """One wrapping rule for every command: off a terminal lines are whole (`run` wrapped at 80 columns
    mid-sentence, `plan` never did); here the plan `run` shows before refusing a command it cannot start."""
    env = {**os.environ, "COLUMNS": "80"}
    argv = [RLPLACE, "run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4,1x4", "--", "no-such-program-here"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 127, done.stderr
    note = next(line for line in done.stderr.splitlines() if line.startswith("note: strategy disaggregate"))
    assert note.endswith("(docs/migrating.md)") and len(note) > 200


def test_nothing_after_the_dashes_is_a_command_line_error(capsys):
    assert main(["run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--"]) == 2
    assert capsys.readouterr().err.startswith("rlplace run: error: nothing to run after --")


def test_a_config_that_does_not_fit_is_refused_before_the_command_runs(tmp_path, capsys):
    argv = ["run", str(CONFIGS / "node-groups.yaml"), "--simulate", "1x4", "--", sys.executable, "-c", "print(1)"]
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert "inventory has 1 node" in err and "starting a simulated cluster" not in err and out == ""


def test_a_configured_ray_address_elsewhere_is_refused_with_simulate(tmp_path, capsys):
    """RLightning's `ray_address: HOST:PORT`: the command's connect() would refuse it beside the simulated cluster's
    $RAY_ADDRESS, so run refuses it before the cluster starts."""
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  ray_address: 10.1.2.3:6379\n  train_worker_num: 1\n")
    assert main(["run", str(job), "--simulate", "2x4", "--", sys.executable, "-c", "print(1)"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{job}:2: cluster.ray_address: the config names 10.1.2.3:6379 as the Ray cluster to join, and this command "
        "joins the simulated cluster" in err
    )


def test_connect_without_a_config_loads_what_run_planned(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text((CONFIGS / "disaggregate.yaml").read_text())
    env = driver_environment(job, ["cluster.train_worker_num=5"])
    assert env[CONFIG_ENV] == str(job.resolve())
    spec = load_driver_config(env)
    assert spec == load(job, overrides=["cluster.train_worker_num=5"])
    assert spec.component("train").num_workers == 5


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({}, "rlplace.connect() was given no config and $RLPLACE_CONFIG is not set: pass one"),
        ({CONFIG_ENV: "job.yaml", OVERRIDES_ENV: "a=1"}, "$RLPLACE_OVERRIDES must be a JSON list of override strings"),
    ],
)
def test_connect_without_a_config_outside_run_says_what_to_do(env, said):
    with pytest.raises(RlplaceError) as e:
        load_driver_config(env)
    assert str(e.value).startswith(said)


@pytest.mark.slow
def test_ctrl_c_while_the_simulated_cluster_starts_stops_run_within_2_s_leaving_nothing(tmp_path):
    """Ray's start-up blocks the main thread for seconds (half a minute once a node's raylet is gone), and `run`
    used to finish starting every node first; now the processes are killed at once and `run` exits 130."""
    (tmp_path / "job.yaml").write_text((CONFIGS / "disaggregate.yaml").read_text())
    proc, mark = rlplace_run(tmp_path, "job.yaml", "--simulate", "6x2", "--", "python", "-c", "print(1)")
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("rlplace: starting a simulated cluster"):
            break
    deadline = time.monotonic() + 30
    while len(left_running(mark)) < 4 and time.monotonic() < deadline:  # the head and a raylet are up
        time.sleep(0.2)
    assert len(left_running(mark)) >= 4, "the simulated cluster did not start"
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    stopped = time.monotonic() - sent
    assert proc.returncode == 130, err[-3000:]
    assert stopped < 2.0, f"took {stopped:.1f} s"
    assert "rlplace: interrupted before the command started; the simulated cluster's " in err
    assert "none left (process table checked)" in err and out == ""
    assert left_running(mark) == []
