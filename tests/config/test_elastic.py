"""`cluster.elastic` in both dialects: what loads, and every refusal with its key path, value and line."""

from __future__ import annotations

import pytest

from rlplace.config import load
from rlplace.config.sections import config_schema
from rlplace.errors import ConfigError
from rlplace.model import ElasticRange

POOLS = """\
cluster:
  train_worker_num: 2
  eval_worker_num: 4
  placement: {{strategy: disaggregate{env_strategy}}}
  elastic:
{entries}"""

GROUPS = """\
cluster:
  num_nodes: 2
  node_groups:
    - {{label: a800, node_ranks: 0-1}}
    - label: arm
      node_ranks: 1
      hardware: {{type: Franka, configs: [{{node_rank: 1, robot_ip: 10.0.0.1}}]}}
  component_placement:
    "actor,reward": {{node_group: a800, placement: 0-7}}
    rollout: {{node_group: a800, placement: 8-11}}
    env: {{node_group: arm, placement: 0}}
  elastic:
{entries}"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load(text, filename="job.yaml")
    return [str(p) for p in e.value.problems]


def test_ranges_load_with_their_defaults_in_both_dialects():
    spec = load(POOLS.format(env_strategy="", entries="    eval: {min: 2, max: 8}\n    train:\n    env: {}\n"))
    assert [(r.component, r.min, r.max, r.path) for r in spec.elastic] == [
        ("eval", 2, 8, "cluster.elastic.eval"),
        ("train", 1, None, "cluster.elastic.train"),
        ("env", 1, None, "cluster.elastic.env"),
    ]
    spec = load(GROUPS.format(entries="    rollout: {max: 8}\n    reward: {min: 4}\n"))
    assert spec.dialect == "node_groups"  # `elastic` belongs to both: it does not tell the dialect
    assert spec.elastic_range("rollout") == ElasticRange("rollout", 1, 8, "cluster.elastic.rollout")
    assert spec.elastic_range("reward").min == 4 and spec.elastic_range("actor") is None


def test_the_section_may_be_the_top_level_and_remote_or_default_components_may_be_elastic():
    spec = load("eval_worker_num: 2\nremote_eval: false\nelastic: {eval: {max: 4}, buffer: {max: 2}}\n")
    assert [r.path for r in spec.elastic] == ["elastic.eval", "elastic.buffer"]


def test_unknown_components_bad_values_and_ranges_are_reported_at_their_lines():
    entries = "    evl: {max: 3}\n    train: {min: 3, max: 2}\n    eval: {max: 2}\n    env: 4\n    buffer: {mx: 1}\n"
    assert problems(POOLS.format(env_strategy="", entries=entries)) == [
        "job.yaml:6: cluster.elastic.evl: 'evl' is not a component of this config; did you mean 'eval'? "
        "Components: train, eval, env, buffer",
        "job.yaml:7: cluster.elastic.train.min: min 3 is larger than max 2; min <= max",
        "job.yaml:8: cluster.elastic.eval: eval starts with 4 worker(s) (eval_worker_num: 4), above its elastic max "
        "2; raise max to 4 or lower the count (the count is the starting size)",
        "job.yaml:9: cluster.elastic.env: must be a mapping (an elastic range {min: N, max: M}), got 4",
        "job.yaml:10: cluster.elastic.buffer.mx: unknown key 'mx' in an elastic range {min: N, max: M}; did you "
        "mean 'max'?",
        "job.yaml:10: cluster.elastic.buffer: buffer cannot change size on its own: under strategy disaggregate there "
        "is one buffer shard on each node holding train workers; remove it from elastic and make train elastic: a "
        "shard is added or removed as train grows onto a node or leaves it",
    ]
    assert problems("cluster:\n  elastic: [eval]\n") == [
        "job.yaml:2: cluster.elastic: must be a mapping of component names to elastic ranges {min: N, max: M}, got "
        "['eval']"
    ]
    assert problems("cluster:\n  elastic: {eval: {min: 0}}\n") == [
        "job.yaml:2: cluster.elastic.eval.min: must be an integer >= 1, got 0"
    ]


def test_every_problem_of_an_entry_with_a_misspelt_name_is_reported():
    """A misspelt component hid the entry's other problems: fixing the name then showed the next one."""
    entries = "    evl: {min: 5, max: 1, strat: 3}\n"
    assert problems(POOLS.format(env_strategy="", entries=entries)) == [
        "job.yaml:6: cluster.elastic.evl.strat: unknown key 'strat' in an elastic range {min: N, max: M}; valid "
        "keys: max, min",
        "job.yaml:6: cluster.elastic.evl: 'evl' is not a component of this config; did you mean 'eval'? "
        "Components: train, eval, env, buffer",
        "job.yaml:6: cluster.elastic.evl.min: min 5 is larger than max 1; min <= max",
    ]


def test_a_start_below_min_is_refused_also_where_auto_mode_defaults_it():
    assert problems("cluster:\n  elastic: {train: {min: 2}}\n") == [
        "job.yaml:2: cluster.elastic.train: train starts with 1 worker(s) (train_worker_num not written: 1 in auto "
        "mode), below its elastic min 2; lower min to 1 or raise the count (the count is the starting size)"
    ]


def test_followers_are_refused_on_their_own_with_what_to_do_instead():
    found = problems(
        POOLS.format(env_strategy=", env_strategy: device-colocate", entries="    env: {}\n    buffer: {}\n")
    )
    assert found == [
        "job.yaml:6: cluster.elastic.env: env cannot change size on its own: under env_strategy device-colocate env "
        "worker i shares eval worker i's GPU; remove it from elastic and make eval elastic: env grows and shrinks "
        "with eval when they have as many workers",
        "job.yaml:7: cluster.elastic.buffer: buffer cannot change size on its own: under strategy disaggregate there "
        "is one buffer shard on each node holding train workers; remove it from elastic and make train elastic: a "
        "shard is added or removed as train grows onto a node or leaves it",
    ]
    # the same components are free to resize where nothing ties them
    assert len(load("cluster:\n  placement: {strategy: default}\n  elastic: {env: {}, buffer: {}}\n").elastic) == 2
    assert (
        len(
            load(
                "cluster:\n  remote_storage: false\n  placement: {strategy: colocate}\n  elastic: {buffer: {}}\n"
            ).elastic
        )
        == 1
    )


def test_robots_are_refused_and_placement_counts_are_checked_at_load():
    found = problems(GROUPS.format(entries="    env: {}\n    rollout: {max: 3}\n    roll: {}\n"))
    assert found == [
        "job.yaml:13: cluster.elastic.env: env cannot change size on its own: it is placed on the Franka units of "
        "node group 'arm', one worker per unit, and hardware does not multiply; remove it from elastic",
        "job.yaml:14: cluster.elastic.rollout: rollout starts with 4 worker(s) (its placement in a800 gives 4 "
        "process(es)), above its elastic max 3; raise max to 4 or lower the count (the count is the starting size)",
        "job.yaml:15: cluster.elastic.roll: 'roll' is not a component of this config; did you mean 'rollout'? "
        "Components: actor, reward, rollout, env",
    ]


def test_manual_mode_growth_must_fit_the_written_range():
    text = """\
cluster:
  eval_worker_num: 2
  placement: {mode: manual}
  resource_pool:
    - {name: p, num_node: 1, num_gpus: 8, train: 0-3, eval: 4-7}
  elastic: {eval: {max: 4}, train: {max: 5}}
"""
    assert problems(text) == [
        "job.yaml:6: cluster.elastic.train.max: max 5 train workers of 1 GPU each need 5 GPUs, but the range of train "
        "in pool p (cluster.resource_pool[0].train: 0-3) holds 4: in manual mode a component grows only inside its "
        "range; widen the range or lower max"
    ]


def test_the_schema_declares_elastic_in_both_dialects():
    sections = config_schema()["properties"]["cluster"]["anyOf"]
    for section in sections:
        entry = section["properties"]["elastic"]["anyOf"][0]["additionalProperties"]["anyOf"][0]
        assert set(entry["properties"]) == {"min", "max"} and entry["additionalProperties"] is False
