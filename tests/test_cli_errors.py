"""The main paths fail fast, without a traceback, naming what the user typed (issue 12).

The wording of each message is checked against the docs by tests/docs/test_error_catalogue.py; here, what a
user notices besides the words: how long it takes, which address or flag it names, and that nothing was
started for nothing.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from rlplace.cli import main
from rlplace.examples.cartpole_ppo import CONFIGS

RLPLACE = str(pathlib.Path(sys.executable).with_name("rlplace"))
#: "About 10 s" in the issue; the check itself gives up after 3 s (rlplace.ray.join.JOIN_TIMEOUT_S).
FAST_S = 10.0


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)
    return done, time.monotonic() - start


CONNECT = """\
import rlplace
try:
    rlplace.connect({config!r}, address={address!r})
except rlplace.RlplaceError as e:
    print(e)
"""


@pytest.mark.parametrize(
    ("address", "env", "named"),
    [
        ("auto", {"RAY_ADDRESS": "127.0.0.1:1"}, "RAY_ADDRESS=127.0.0.1:1"),
        ("127.0.0.1:1", {}, "no Ray cluster reachable at 127.0.0.1:1"),
        (None, {"RAY_ADDRESS": "127.0.0.1:1"}, "RAY_ADDRESS=127.0.0.1:1"),
    ],
)
def test_connect_to_nothing_fails_within_seconds_naming_the_address(address, env, named):
    code = CONNECT.format(config=str(CONFIGS / "disaggregate.yaml"), address=address)
    done, seconds = timed([sys.executable, "-c", code], env)
    assert seconds < FAST_S, f"took {seconds:.1f} s"  # Ray alone retries the GCS for over a minute
    assert named in done.stdout and "rlplace start --head" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--address", "127.0.0.1:6399"],
        ["run", str(CONFIGS / "disaggregate.yaml"), "--address", "127.0.0.1:6399"],
        ["run", str(CONFIGS / "disaggregate.yaml"), "--address", "127.0.0.1:6399", "--", "python", "train.py"],
        ["start", "--address", "127.0.0.1:6399", "--node-rank", "1"],
        ["plan", str(CONFIGS / "disaggregate.yaml"), "--address", "127.0.0.1:6399"],
    ],
    ids=["status", "run", "run-command", "start", "plan"],
)
def test_commands_name_the_address_as_typed_and_fail_fast(argv):
    done, seconds = timed([RLPLACE, *argv], {"RAY_ADDRESS": ""})
    assert seconds < FAST_S, f"took {seconds:.1f} s"
    assert done.returncode == 1
    assert "no Ray cluster reachable at 127.0.0.1:6399" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_run_refuses_a_config_the_pipeline_cannot_run_before_starting_a_cluster(tmp_path, capsys):
    config = tmp_path / "agents.yaml"
    config.write_text("cluster:\n  num_nodes: 1\n  component_placement: {actor: 0, rollout: 0}\n")
    assert main(["run", str(config), "--simulate", "2x4"]) == 2
    captured = capsys.readouterr()
    assert "lacks train, eval, env, buffer" in captured.err
    own = f"or run your own script on this plan: `rlplace run {config} --simulate 2x4 -- python train.py`"
    assert own in captured.err  # the pipeline is refused, and the way to run one's own said
    assert "Starting an embedded Ray cluster" not in captured.out and not list(tmp_path.glob("topology.*"))


def test_an_unwritable_out_fails_before_starting_a_cluster(capsys):
    assert main(["demo", "--out", "/proc/no-such-dir"]) == 1
    captured = capsys.readouterr()
    assert "error: /proc/no-such-dir: No such file or directory" in captured.err
    assert "Starting an embedded Ray cluster" not in captured.out


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for shown in ("(default: 60)", "(default: 0)", "(default: .)", "(default: 60.0)"):
        assert shown in out, out
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "else 14G, a 7B model in bf16, said to be assumed" in out and "(default: table)" in out


def test_plan_without_nodes_and_no_cluster_suggests_planning_offline(tmp_path):
    """`rlplace plan FILE` reads the live cluster; with none reachable it says so and how to plan offline."""
    done, seconds = timed([RLPLACE, "plan", str(CONFIGS / "disaggregate.yaml")], {"RAY_ADDRESS": "127.0.0.1:6399"})
    assert seconds < FAST_S, f"took {seconds:.1f} s"
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no Ray cluster reachable at RAY_ADDRESS=127.0.0.1:6399" in done.stderr
    assert "plan offline with --nodes" in done.stderr
