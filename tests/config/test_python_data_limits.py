"""A config handed over as Python data gets a YAML file's limits (issue 36, item 4): `rlplace.config.load(dict)`
and `rlplace.connect(dict)` (which loads it the same way) turn a structure that holds itself, one nested 500
deep, or one that holds a list many times over into one ConfigError naming the key, where the first two were a
RecursionError from deep inside the loader."""

from __future__ import annotations

import time

import pytest
from omegaconf import OmegaConf

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


def shared_lists() -> dict:
    """Ten references to the same list eight levels down: 10^8 values, a few hundred objects."""
    value: list = [1] * 10
    for _ in range(8):
        value = [value] * 10
    return {"cluster": {"train_worker_num": 1, "x": value}}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (self_holding_mapping(), "cluster.again: this list or mapping holds itself"),
        (self_holding_list(), "cluster.x[1]: this list or mapping holds itself"),
        ({"cluster": {"train_worker_num": 1, "x": nested(500)}}, "cluster.x.a: the document is nested more than 64"),
        (shared_lists(), "cluster.x[0]: the config is too large: lists and mappings it holds more than once"),
    ],
    ids=["mapping-holds-itself", "list-holds-itself", "500-deep", "shared-lists"],
)
def test_python_data_over_a_yaml_limit_is_one_config_error(data, said):
    started = time.monotonic()
    with pytest.raises(ConfigError) as e:
        load(data, filename="train.py")
    (problem,) = e.value.problems
    assert str(problem).startswith(f"train.py: {said}"), problem
    assert time.monotonic() - started < 1.0


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
