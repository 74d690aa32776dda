"""`rlplace drain`'s bad input: each refused at the command line, naming the flag, the value and what is valid, with
no traceback and no Ray started (the drain itself: tests/ray/test_ray_drain.py)."""

from __future__ import annotations

import subprocess

import pytest
from tests.test_cli_errors import FAST_S, RLPLACE, timed

from rlplace.cli import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--node-rank", "1", "--deadline", "0"], "argument --deadline: must be more than 0 seconds, got 0"),
        (["--node-rank", "1", "--deadline", "-5"], "argument --deadline: must be more than 0 seconds, got -5"),
        (["--node-rank", "1", "--deadline", "soon"], "argument --deadline: must be a number of seconds, got 'soon'"),
        (["--node-rank", "one", "--deadline", "20"], "argument --node-rank: must be a node rank (a whole number >= 0)"),
        (["--node-rank", "-1", "--deadline", "20"], "argument --node-rank: must be a node rank (a whole number >= 0)"),
        (["--deadline", "20"], "the following arguments are required: --node-rank"),
        (["--node-rank", "1"], "the following arguments are required: --deadline"),
        (["--node-rank", "1", "--deadline", "20", "--reason", "bored"], "argument --reason: invalid choice: 'bored'"),
    ],
    ids=["zero", "negative", "words", "rank-words", "rank-negative", "no-rank", "no-deadline", "reason"],
)
def test_bad_input_is_a_usage_error_naming_the_flag(argv, said, capsys):
    with pytest.raises(SystemExit) as e:
        main(["drain", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_no_cluster_fails_within_seconds_naming_the_address():
    done, seconds = timed([RLPLACE, "drain", "--node-rank", "1", "--deadline", "20", "--address", "127.0.0.1:6399"])
    assert seconds < FAST_S, f"took {seconds:.1f} s"
    assert done.returncode == 1 and "no Ray cluster reachable at 127.0.0.1:6399" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_help_says_what_the_drain_does():
    done = subprocess.run([RLPLACE, "drain", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "--node-rank N" in done.stdout and "--deadline SECONDS" in done.stdout and "preemption" in done.stdout
