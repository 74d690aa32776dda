"""`rlplace demo --kill-node`: a node lost mid-training, a hot spare takes over and training goes on; without a
spare the run stops with the NodeLostError message, unless `--elastic` lets the job shrink instead (and grow back
when `--add-node-after` starts the node again). Bad node-loss options fail before any cluster starts.

A demo that trains on through the loss runs two ways: in `make test` with `--stop-when-handled`, the node going 1 s
into training (the run ends at the first iteration finished after the job dealt with it: the same report, picture
and clean stop, in a fraction of the iterations), and marked `long` (`make test-long`) as the guide shows it, until
CartPole is solved, which says the redone iteration put training back on its track. Every demo that loses a node
runs only in `make test-long` (the elastic one, the spare, the drain, the stop without a spare), since
tests/ray/test_ray_nodeloss.py, test_ray_elastic_nodeloss.py and test_ray_drain.py check the job doing each on the
session's cluster, a spare taking over with the training state included, a shrink and the growth back (3-7 CPU
seconds a test, against 25-37 for a demo: its own cluster, eight workers, four of them importing torch). What only
the demos check, the pipeline's redo of an interrupted iteration from the checkpoint and the demo's node-loss
report, is checked there. `make test` keeps the refusals of bad node-loss options, which start nothing."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rlplace.cli import main
from rlplace.ray.local_raylets import session_processes


def demo(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlplace.cli", "demo", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_stopped_clean(out: str) -> None:
    session = re.search(r"Embedded cluster (session_\S+) stopped", out).group(1)
    assert session_processes(session) == []


def fault_args(until: str, *argv: str) -> tuple[str, ...]:
    """`argv` (the node to lose and how), then when (`--kill-after`/`--drain-after` SECONDS) and how the run ends."""
    return (*argv, "1", "--stop-when-handled") if until == "handled" else (*argv, "3")


def assert_trained_on(out: str, until: str) -> None:
    """Solved, or (`handled`) ended as asked, at least one iteration after the one the node went in."""
    said = " ".join(out.split())  # rich wraps lines at the terminal width
    if until == "solved":
        assert "Solved CartPole-v1" in said
        return
    assert "Stopped before solving, as asked (--stop-when-handled)" in said, said[-2000:]
    went = int(re.search(r"during iteration (\d+)", said).group(1))
    assert int(re.search(r"after (\d+) iterations", said).group(1)) >= went


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("until", ["handled", "solved"])
def test_demo_survives_losing_a_node_to_a_hot_spare(tmp_path, until):
    """About 20 s (`handled`) or 45 s (`solved`, in about 30 iterations; the budget is 60): node 1 (train rank 1,
    buffer shard 1) goes during training; the spare takes over and training goes on."""
    proc = demo(tmp_path, *fault_args(until, "--kill-node", "1", "--kill-after"))
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "and 1 hot spare" in out
    report = " ".join(out[out.index("Node loss:") :].split())  # rich wraps lines at the terminal width
    assert re.search(
        r"node 1 removed abruptly [13] s into training, during iteration \d+; the job declared it lost", report
    )
    assert re.search(r"node 1 spare after \d+\.\d s: hot spare \S+ \(id \w+\) took over node 1", report)
    assert re.search(r"iteration \d+ redone from the last checkpoint", report)
    assert re.search(r"training time lost to node losses: \d+\.\d s in all", report)
    assert_trained_on(out, until)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo_topology.html", "demo_topology.svg"]
    picture = (tmp_path / "demo_topology.svg").read_text()
    assert 'data-state="spare"' in picture and "node 1 SPARE" in picture
    assert_stopped_clean(out)


@pytest.mark.slow
@pytest.mark.long
def test_demo_without_a_spare_stops_with_the_node_lost_error(tmp_path):
    """About 25 s: no spare and replace_within 0: the run ends with the NodeLostError message, no traceback."""
    proc = demo(tmp_path, "--kill-node", "1", "--kill-after", "3", "--spare", "0", "--replace-within", "0")
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert re.search(r"placement: node 1 \(4x A800, \S+\) was lost and its workers \(rlplace:\w+:1", proc.stderr)
    assert "replace_within_s=0" in proc.stderr and "rlplace start --spare" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert_stopped_clean(proc.stdout)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("until", ["handled", "solved"])
def test_demo_with_elastic_components_shrinks_instead_of_stopping_and_grows_back(tmp_path, until):
    """About 25 s (`handled`) or 28-35 s (`solved`): no spare; node 1 (train rank 1, buffer shard 1) goes during
    training, train and buffer shrink to 1 and the interrupted iteration is redone at the new size; node 1 is started
    again 3 s after it went, both grow back to 2 (another iteration redone), and training goes on. (Without
    `--add-node-after` the same run goes on at the smaller size: the shrink is the same code path.)"""
    argv = fault_args(until, "--kill-node", "1", "--spare", "0", "--elastic", "--add-node-after", "3", "--kill-after")
    proc = demo(tmp_path, *argv)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "train: 2 workers, 1 GPU each, 1 CPU each; elastic: may change from 1 to 2" in " ".join(out.split())
    report = " ".join(out[out.index("Node loss:") :].split())  # rich wraps lines at the terminal width
    assert re.search(r"node 1 shrunk after \d+\.\d s: no spare or replacement: train 2 -> 1, buffer 2 -> 1", report)
    assert "train 2 -> 1 (node lost (node 1)" in report and "removed rlplace:train:1 (node 1 GPU 0)" in report
    assert re.search(r"started again \d+\.\d s after it went", report)
    assert re.search(r"node 1 grown: replacement \S+ \(id \w+\) serves node 1: train 1 -> 2, buffer 1 -> 2", report)
    assert "train 1 -> 2 (grow back (node 1)" in report and "added rlplace:train:1 (node 1 GPU 0)" in report
    assert len(re.findall(r"iteration \d+ redone from the last checkpoint", report)) == 2
    assert_trained_on(out, until)
    assert "Traceback" not in proc.stderr
    table = out[out.index("Where each worker ran") :]
    assert " train:1 " in table and " buffer:1 " in table
    picture = (tmp_path / "demo_topology.svg").read_text()  # the plan as it ended: node 1 back, train 1 on it
    assert 'data-state="replaced"' in picture and "node 1 REPLACED" in picture
    assert_stopped_clean(out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--kill-node", "0"], "--kill-node 0: the embedded cluster's nodes that can be lost are 1-3"),
        (["demo", "--kill-node", "4"], "--kill-node 4: the embedded cluster's nodes that can be lost are 1-3"),
        (["demo", "--spare", "2x"], "--spare: '2x' is neither a count (1) nor node shapes"),
        (["demo", "--add-node-after", "3"], "--add-node-after needs --kill-node RANK"),
        (["demo", "--stop-when-handled"], "--stop-when-handled needs --kill-node RANK or --drain-node RANK"),
        (["demo", "--drain-node", "0"], "--drain-node 0: the embedded cluster's nodes that can be lost are 1-3"),
        (["demo", "--drain-node", "1", "--kill-node", "2"], "--kill-node 2 and --drain-node 1: the demo shows one"),
    ],
)
def test_bad_node_loss_options_fail_before_a_cluster_starts(argv, message, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_node_loss_options_are_the_demos_not_runs(tmp_path, capsys):
    """Losing a node on purpose is what the demo shows; `rlplace run` runs a config's pipeline or one's own
    command and has no such option."""
    from rlplace.examples.cartpole_ppo import CONFIGS

    with pytest.raises(SystemExit) as e:
        main(["run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--kill-node", "1"])
    assert e.value.code == 2
    assert "unrecognized arguments: --kill-node 1" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.long
def test_demo_trains_on_through_a_preemption_notice_moving_the_node_before_its_deadline(tmp_path):
    """About 45 s: node 1 (train rank 1, buffer shard 1) is drained 3 s into training with a 20 s deadline; the spare
    takes its workers over while it still runs, the report says how long before the deadline, and the run solves
    CartPole. Wherever the move lands (in the iteration the node drained in, or the next one), the interrupted
    iteration is replayed: before the replay, a move landing in the next iteration sent training down a trajectory
    that ended the 60 iterations unsolved (average return 119)."""
    proc = demo(tmp_path, "--drain-node", "1", "--drain-after", "3", "--deadline", "20")
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = " ".join(out[out.index("Node loss:") :].split())
    found = re.search(
        r"node 1 drained 3 s into training, during iteration \d+, with a 20 s deadline; the job was done "
        r"(\d+\.\d) s after the notice \(spare\), (\d+\.\d) s before the deadline",
        report,
    )
    assert found and float(found.group(2)) > 10, report
    assert re.search(r"node 1 draining: \S+ \(id \w+\): deadline \d\d:\d\d:\d\d \(in \d+ s\); spare \S+ takes", report)
    assert re.search(r"node 1 spare after \d+\.\d s: hot spare \S+ \(id \w+\) took over node 1", report)
    assert "node 1 lost" not in report, "a drain is no loss: the workers moved while the node was up"
    assert re.search(r"iteration \d+ redone from the last checkpoint", report)
    assert "Solved CartPole-v1" in out
    assert_stopped_clean(out)
