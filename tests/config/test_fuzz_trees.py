"""Random Hydra defaults trees, loaded with and without overrides: a JobSpec or one ConfigError, never anything else,
within seconds, nothing written into the tree or beside it, and a limit (size, aliases, depth, configs loaded) that
refuses a tree without overrides refuses it with them too, in the same words (issue 27).

Each example writes a small tree (a primary, two config groups of a few options, files with defaults lists of
their own, now and then an alias bomb, a deep package, a `../` entry, a search path whose variable is not set),
then loads it through rlplace's composer and through hydra-core with random overrides: group choices, additions,
deletions, values, malformed ones. Anything but ConfigError escaping fails the test with the tree that caused it.
"""

from __future__ import annotations

import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.trees import write_tree

from cpu_clock import cpu_seconds
from rlplace.config import load
from rlplace.errors import ConfigError
from rlplace.model import JobSpec

pytest.importorskip("hydra")
pytestmark = pytest.mark.slow  # about 60 hydra-core compositions: 5-20 s on the 2-core CI machine
#: New trees each run (Hypothesis seeds itself afresh), so `make test`'s runs add up.
TREES = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: A composition that takes longer is a hang in the making (each finishes in milliseconds to a second).
SLOW_S = 10.0
LIMITS = ("too large", "nested more than", "load more than")
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 7)
)
GROUPS = ("g0", "g1")
UNSET = "RLPLACE_FUZZ_UNSET"  # a search path's variable no test sets

OPTIONS = ("a", "b", "c")

entries = st.sampled_from(
    [
        "- g0: a",
        "- g0: b",
        "- g1: a",
        "- g1: c",
        "- g0: zz",
        "- optional g1: zz",
        "- g1: null",
        "- g1: ???",
        "- g0@pkg.deep: a",
        "- g0: ${g1}",
        "- override g0: b",
        "- _self_",
        "- other",
        "- ../../../outside/file",
        "- g0: [a, b]",
    ]
)
scalars = st.sampled_from(["1", "two", "null", "[1, 2]", "{k: v}", "${cluster.train_worker_num}", "'1:1'", "!tag x"])
contents = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}\n", st.sampled_from(["x", "train_worker_num", "eval_worker_num", "k"]), scalars),
    st.just(BOMB),
    st.just("- 1\n- 2\n"),
    st.just("just text\n"),
    st.just(""),
)


@st.composite
def trees(draw: st.DrawFn) -> dict[str, str]:
    files = {}
    for group in GROUPS:
        for option in OPTIONS:
            if draw(st.booleans()):
                own = draw(st.lists(entries, max_size=3))
                listed = "defaults:\n" + "".join(f"  {e}\n" for e in own) if own else ""
                files[f"{group}/{option}.yaml"] = listed + draw(contents)
    files["other.yaml"] = draw(contents)
    primary = draw(st.lists(entries, min_size=1, max_size=4))
    searchpath = 'hydra:\n  searchpath: ["file://${oc.env:' + UNSET + '}/conf"]\n' if draw(st.booleans()) else ""
    files["main.yaml"] = (
        "defaults:\n"
        + "".join(f"  {e}\n" for e in primary)
        + searchpath
        + "cluster:\n  train_worker_num: 1\n  eval_worker_num: 1\n"
    )
    return files


overrides = st.lists(
    st.sampled_from(
        [
            "g0=a",
            "g0=b",
            "g0=zz",
            "g1=c",
            "+g1=a",
            "~g0",
            "cluster.train_worker_num=2",
            "x.y=1",
            "+new=3",
            "g0=[a,b]",
            "bad==override",
            "hydra.searchpath=[file:///nonexistent]",
        ]
    ),
    min_size=1,
    max_size=3,
)


def outcome(primary: pathlib.Path, given_overrides: list[str]) -> str:
    """'ok', or the first problem's message; anything but a JobSpec or a ConfigError fails the test."""
    started = cpu_seconds()
    try:
        assert isinstance(load(primary, overrides=given_overrides), JobSpec)
        result = "ok"
    except ConfigError as e:
        assert e.problems and all(p.message for p in e.problems)
        result = e.problems[0].message
    seconds = cpu_seconds() - started
    assert seconds < SLOW_S, f"{given_overrides}: {seconds:.1f} s"
    return result


def files_under(folder: pathlib.Path) -> set[pathlib.Path]:
    return set(folder.rglob("*"))


@TREES
@given(tree=trees(), given_overrides=overrides)
def test_random_trees_with_overrides_load_or_refuse_and_write_nothing(tree, given_overrides):
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        conf = write_tree(root / "deep" / "er" / "conf", tree)
        before = files_under(root)
        outcome(conf / "main.yaml", [])
        outcome(conf / "main.yaml", given_overrides)
        assert files_under(root) == before  # no stand-in, nothing anywhere in or beside the tree


@TREES
@given(tree=trees())
def test_a_limit_refuses_the_same_tree_with_a_value_override(tree):
    """An override that changes no file (a value) never gets a tree past a limit its files go over."""
    with tempfile.TemporaryDirectory() as scratch:
        conf = write_tree(pathlib.Path(scratch), tree)
        plain = outcome(conf / "main.yaml", [])
        if any(limit in plain for limit in LIMITS):
            assert outcome(conf / "main.yaml", ["cluster.eval_worker_num=1"]) == plain
