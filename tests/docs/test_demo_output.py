"""The sample output of `rlplace demo` in docs/guide.md section 1 is what the demo prints, and the demo
(what `make demo` runs) leaves its picture and no process of its Ray session behind.

The block is skipped by the docs run (a training run). `make test` runs the demo with a budget of two iterations:
everything the guide shows is printed as shown but the outcome, which says the budget ended instead of "Solved"
(training until solved is the same pipeline, run by tests/examples/test_cartpole_ppo_core.py in one process); the
run exactly as written, until CartPole is solved, is `make test-long`'s. Numbers outside the tables (returns,
iterations, seconds), the reward curve's bars and the Ray session's name differ between runs, so they are compared
as `...`; the plan, the table of where each worker ran and every sentence are compared as written.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
from tests.docs.blocks import ROOT, console_steps, output_matches, shell

from rlplace.ray.local_raylets import session_processes

_TABLE = ("│", "┃", "┏", "┡", "└")


def loosen(expected: str) -> str:
    """`expected` with the run-dependent parts of its non-table lines replaced by `...`."""
    lines = []
    for line in expected.splitlines():
        if not line.lstrip().startswith(_TABLE):
            line = re.sub(r"session_\S+", "...", line)
            line = re.sub(r"[▁▂▃▄▅▆▇█]+", "...", line)
            line = re.sub(r"\d[\d.]*", "...", line)
        lines.append(line)
    return "\n".join(lines)


#: What the demo says of a budget that ended before CartPole was solved (its numbers are loosened like the others).
UNSOLVED = (
    "Not solved within the budget: average return 9.5 over the last 100 episodes (target 195 over 100) after 2 "
    "iterations, 40 episodes, 1.0 s."
)


@pytest.mark.slow  # the embedded cluster and its eight workers: about 20 s of CPU (30 s until solved)
@pytest.mark.parametrize("budget", ["two iterations", pytest.param("until solved", marks=pytest.mark.long)])
def test_the_demo_prints_what_the_guide_shows(tmp_path, budget):
    guide = (ROOT / "docs/guide.md").read_text()
    block = re.search(r"```console\n(\$ rlplace demo\n.*?)```", guide, re.DOTALL)
    assert block, "docs/guide.md has no console block of `rlplace demo`"
    [(command, expected)] = console_steps(block.group(1))
    if budget == "two iterations":
        command += " --iterations 2"
        assert expected.count("\nSolved CartPole-v1: ") == 1, "the guide's demo output has no outcome line"
        expected = re.sub(r"(?m)^Solved CartPole-v1: .*$", UNSOLVED, expected)
    expected = loosen(expected)
    done = shell(command, tmp_path)
    actual = done.stdout + done.stderr
    assert done.returncode == 0, actual
    assert output_matches(expected, actual), f"the guide shows:\n{expected}\nthe demo printed:\n{actual}"
    # The guide shows either path as `...`: which one ran depends on torch (docs/guide.md section 1).
    if importlib.util.find_spec("torch") is not None:
        assert "gradients: all-reduce (gloo) among the train workers" in actual, actual
        assert "weight sync: collective (gloo)" in actual, actual
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo_topology.html", "demo_topology.svg"]
    picture = (tmp_path / "demo_topology.svg").read_text()
    for component in ("train", "eval", "env", "buffer"):
        assert f'data-component="{component}"' in picture, component
    session = re.search(r"Embedded cluster (session_\S+) stopped", actual).group(1)
    assert session_processes(session) == [], "processes of the demo's Ray session are still running"
