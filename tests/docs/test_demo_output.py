"""The sample output of `rlplace demo` in docs/guide.md section 1 is what the demo prints, and the demo
(what `make demo` runs) leaves its picture and no process of its Ray session behind.

The block is skipped by the docs run (a training run); this test runs it in full. Numbers outside the
tables (returns, iterations, seconds), the reward curve's bars and the Ray session's name differ between
runs, so they are compared as `...`; the plan, the table of where each worker ran and every sentence are
compared as written.
"""

from __future__ import annotations

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


@pytest.mark.slow  # a full demo: about 30 s on a quiet 2-core machine, up to a minute under load
def test_the_demo_prints_what_the_guide_shows(tmp_path):
    guide = (ROOT / "docs/guide.md").read_text()
    block = re.search(r"```console\n(\$ rlplace demo\n.*?)```", guide, re.DOTALL)
    assert block, "docs/guide.md has no console block of `rlplace demo`"
    [(command, expected)] = console_steps(block.group(1))
    done = shell(command, tmp_path)
    actual = done.stdout + done.stderr
    assert done.returncode == 0, actual
    assert output_matches(loosen(expected), actual), f"the guide shows:\n{expected}\nthe demo printed:\n{actual}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo_topology.html", "demo_topology.svg"]
    picture = (tmp_path / "demo_topology.svg").read_text()
    for component in ("train", "eval", "env", "buffer"):
        assert f'data-component="{component}"' in picture, component
    session = re.search(r"Embedded cluster (session_\S+) stopped", actual).group(1)
    assert session_processes(session) == [], "processes of the demo's Ray session are still running"
