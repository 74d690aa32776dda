"""A config handed over as Python data gets a YAML file's limits (issue 36, item 4): `rlplace.config.load(dict)`
and `rlplace.connect(dict)` (which loads it the same way) turn a structure that holds itself, one nested 500
deep, or one that holds a list many times over into one ConfigError naming the key, where the first two were a
RecursionError from deep inside the loader."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from cpu_clock import cpu_seconds
from rlplace.config import load
from rlplace.errors import ConfigError


def nested(depth: int) -> dict:
    top: dict = {}
    node = top
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return top


def self_holding_mapping() -> dict:
    cluster: dict = {"train_worker_num": 1}
    cluster["again"] = cluster
    return {"cluster": cluster}


def self_holding_list() -> dict:
    items: list = [1]
    items.append(items)
    return {"cluster": {"train_worker_num": 1, "x": items}}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (self_holding_mapping(), "cluster.again: this list or mapping holds itself"),
        (self_holding_list(), "cluster.x[1]: this list or mapping holds itself"),
        ({"cluster": {"train_worker_num": 1, "x": nested(500)}}, "cluster.x.a: the document is nested more than 64"),
    ],
    ids=["mapping-holds-itself", "list-holds-itself", "500-deep"],
)
def test_python_data_over_a_yaml_limit_is_one_config_error(data, said):
    started = cpu_seconds()
    with pytest.raises(ConfigError) as e:
        load(data, filename="train.py")
    (problem,) = e.value.problems
    assert str(problem).startswith(f"train.py: {said}"), problem
    assert cpu_seconds() - started < 1.0


SHARED = """
import time
from rlplace.config import load
value = [1] * 10
for _ in range(8):
    value = [value] * 10
started = time.process_time()
try:
    load({"cluster": {"train_worker_num": 1, "x": value}}, filename="train.py")
except Exception as e:
    print(type(e).__name__, e.problems[0] if hasattr(e, "problems") else e)
print(f"{time.process_time() - started:.3f}")
"""


def test_a_list_held_many_times_over_is_refused_as_an_alias_bomb_is():
    """Ten references to the same list eight levels down: 10^8 values from a few hundred objects, walked for
    minutes (in a subprocess with a timeout, so that the code before the fix fails this instead of hanging)."""
    done = subprocess.run([sys.executable, "-c", SHARED], capture_output=True, text=True, timeout=20)
    said, seconds = done.stdout.splitlines()
    assert said == (
        "ConfigError train.py: cluster.x[0]: the config is too large: lists and mappings it holds more than once "
        "expand it by more than 100000 values"
    ), done.stdout + done.stderr
    assert float(seconds) < 1.0


def test_a_deep_dictconfig_is_one_config_error_too():
    with pytest.raises(ConfigError, match=r"cluster\.x\.a: the document is nested more than 64 levels deep"):
        load(OmegaConf.create({"cluster": {"train_worker_num": 1, "x": nested(70)}}))


def test_data_a_config_shares_within_the_limits_loads():
    """A list written once and referred to from two places (as YAML aliases do) is fine."""
    ranks = "0-1"
    shared = {"node_group": "gpu", "placement": ranks}
    spec = load(
        {
            "cluster": {
                "num_nodes": 1,
                "node_groups": [{"label": "gpu", "node_ranks": 0}],
                "component_placement": {"actor": shared, "rollout": shared},
            }
        }
    )
    assert spec.component("rollout").placement.segments[0].resources == (0, 1)
