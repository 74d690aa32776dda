"""The explorer's coverage report (`scripts/explore.py --coverage`): its head line counts as its list does, and
the violation messages of the invariants are explained by kind, never a whole invariant."""

from __future__ import annotations

import ast
import logging
import pathlib
import re

import pytest

from rlplace.sim.coverage import _run_at_import, _violation_lines, recording, report
from rlplace.sim.explore import cases, explore

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORLD = ROOT / "src/rlplace/sim/world.py"


def test_violation_lines_are_the_messages_of_broken_invariants_and_nothing_else():
    lines = _violation_lines(WORLD)
    source = WORLD.read_text().splitlines()
    raises = {n.lineno for n in ast.walk(ast.parse(WORLD.read_text())) if isinstance(n, ast.Raise)}
    violations = {n for n in raises if "raise Violation(" in source[n - 1]}
    assert violations and violations <= lines
    assert any(source[n - 1].strip().startswith('return f"no GPU given twice') for n in lines)
    said = [source[n - 1].strip() for n in lines]
    assert not [s for s in said if s.startswith("self.promised")]  # why a move promised an answer: not a violation
    assert not [s for s in said if s.startswith("return None") or s.startswith("continue")]


@pytest.mark.slow
def test_the_head_line_counts_the_functions_listed_unexplained(tmp_path):
    logging.disable(logging.WARNING)
    try:
        with recording(str(tmp_path)):
            explore(cases(ROOT), 20, seed=3)
    finally:
        logging.disable(logging.NOTSET)
    text = report(str(tmp_path), ROOT)
    head, *rows = text.splitlines()
    found = re.search(r"(\d+\.\d)% of lines, (\d+\.\d)% of branches; (\d+) function", head)
    assert found is not None, head
    assert int(found[3]) == sum(r.endswith(": UNEXPLAINED") for r in rows)
    assert 0 < float(found[1]) <= 100 and 0 < float(found[2]) <= 100
    module_level = _run_at_import(ROOT / "src/rlplace/ray/records.py")
    assert not [r for r in rows if r.startswith("ray/records.py:<module>")] and module_level
