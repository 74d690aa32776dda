"""Thousands of random and mutated configs: the loader returns a JobSpec or raises ConfigError, nothing else.

Three sources: arbitrary nested data, the spec examples with one value replaced, one key renamed or
deleted, and YAML text with random edits (syntax errors, tags, odd scalars). Anything but ConfigError
escaping (a KeyError, a RecursionError, a TypeError) fails the test with the input that caused it.
"""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlplace.config import load
from rlplace.errors import ConfigError
from rlplace.model import JobSpec

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "spec_examples"
TEXTS = [p.read_text() for p in sorted(EXAMPLES.glob("*.yaml"))]
DATA = [yaml.safe_load(t) for t in TEXTS]
KEYS = sorted(
    """cluster num_nodes node_groups component_placement label node_ranks env_configs env_vars hardware type
    configs robot_ip node_rank camera_serials ignore_hardware node_group placement python_interpreter_path
    train_worker_num eval_worker_num env_worker_num buffer_worker_num train_each_gpu_num eval_each_gpu_num
    env_each_gpu_num is_colocated enable_offload mode strategy env_strategy resource_pool name num_node num_gpus
    node_ids train eval env buffer""".split()  # noqa: SIM905 - a word list reads better than 40 quoted strings
)
#: Each run draws new examples (Hypothesis seeds itself afresh, and replays a failure it saved), so `make test`'s runs
#: add up; 600 a source keeps the three at about 5 s of CPU.
FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.slow  # 3 x 600 examples: 5-10 s on the 2-core CI machine

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 40),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["0-7", "0-1:0-3", "all", "auto", "manual", "colocate", "Franka", "10.0.0.1", "a800", "node", ""]),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6), st.integers(0, 3)), inner, max_size=4),
    ),
    max_leaves=20,
)


def must_load_or_refuse(source: object) -> None:
    try:
        assert isinstance(load(source), JobSpec)
    except ConfigError as e:
        assert e.problems, "a ConfigError must carry at least one problem"
        assert all(isinstance(p.message, str) and p.message for p in e.problems)


def paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out


@st.composite
def mutated_examples(draw: st.DrawFn) -> object:
    data = copy.deepcopy(draw(st.sampled_from(DATA)))
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(paths(data)))
        if not target:
            continue
        parent = data
        for part in target[:-1]:
            parent = parent[part]
        key = target[-1]
        action = draw(st.sampled_from(["replace", "delete", "rename"]))
        if action == "replace":
            parent[key] = draw(values)
        elif isinstance(parent, dict):
            value = parent.pop(key)
            if action == "rename":
                parent[draw(st.sampled_from(KEYS))] = value
        else:
            parent.pop(key)
    return data


@st.composite
def edited_texts(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 6))
        insert = draw(
            st.sampled_from(["", "-", ":", " ", "\n", "  ", "!!", "&a ", "*a", "[", "{", "0-", "'", "\t", "x"])
        )
        text = text[:at] + insert + text[at + cut :]
    return text


@FUZZ
@given(values)
def test_arbitrary_data(data):
    must_load_or_refuse(data)
    must_load_or_refuse({"cluster": data})


@FUZZ
@given(mutated_examples())
def test_mutated_spec_examples(data):
    must_load_or_refuse(data)


@FUZZ
@given(edited_texts())
def test_edited_yaml_text(text):
    must_load_or_refuse(text)
