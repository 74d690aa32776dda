"""RLinf's refusals before its workers start, made by the loader: the model-parallel checks of the reasoning and
coding entry points (by runner.task_type), cluster.profiling, and the near misses of component names.

Each case was run through RLinf's own code on the same config (the agreement harness, DEVELOPERS.md): the ones
refused here are the ones RLinf refuses, the ones loaded here RLinf runs.
"""

from __future__ import annotations

import pytest
import yaml

from rlplace.config import load
from rlplace.errors import ConfigError


def reasoning(placement: dict, task="reasoning", actor_tp=1, recompute=True, **more) -> dict:
    cfg = {
        "runner": {"task_type": task},
        "cluster": {"num_nodes": 1, "component_placement": placement},
        "actor": {"model": {"tensor_model_parallel_size": actor_tp}},
        "rollout": {"tensor_parallel_size": 1},
        "algorithm": {"recompute_logprobs": recompute},
    }
    return {**cfg, **more}


def refusal(cfg: dict) -> tuple[str, str]:
    with pytest.raises(ConfigError) as e:
        load(yaml.safe_dump(cfg, sort_keys=False), filename="job.yaml")
    (problem,) = e.value.problems
    return problem.path, f"{problem.file}:{problem.line}: {problem.message}"


@pytest.mark.parametrize(
    ("cfg", "path", "words"),
    [
        (reasoning({"rollout": "0-3", "reward": "4-7"}), "cluster.component_placement", "needs actor placed"),
        (reasoning({"actor,rollout": "0-7"}), "cluster.component_placement", "needs reward placed"),
        (
            reasoning({"actor": "0-1,4-5", "rollout": "2-3", "reward": "6-7"}),
            "cluster.component_placement.actor",
            "needs one contiguous range, like 0-3",
        ),
        (
            reasoning({"actor,rollout,reward": "0-5", "inference": "6-7"}),
            "cluster.component_placement.inference",
            "actor and rollout share their GPUs (collocated)",
        ),
        (
            reasoning({"actor": "0-5", "rollout": "4-7", "reward": "0-7"}),
            "cluster.component_placement",
            "actor (GPUs 0-5) and rollout (GPUs 4-7) share some GPUs",
        ),
        (
            reasoning({"actor": "0-3", "rollout": "4-5", "inference": "6", "reward": "7"}, recompute=False),
            "algorithm.recompute_logprobs",
            "RLinf runs it only with algorithm.recompute_logprobs: true",
        ),
        (
            reasoning(
                {"actor": "0-3", "rollout": "4-5", "inference": "6", "reward": "7"},
                inference={"model": {"tensor_model_parallel_size": 2}},
            ),
            "inference.model.tensor_model_parallel_size",
            "larger than its 1 GPU(s)",
        ),
        (
            reasoning({"actor": "0-1", "rollout": "2-5", "reward": "6-7"}, actor_tp=4),
            "actor.model.tensor_model_parallel_size",
            "larger than actor's 2 GPU(s)",
        ),
        (reasoning({"actor,rollout,reward": "0-7"}, task="coding_online_rl"), "runner.task_type", "disjoint GPUs"),
        (reasoning({"rollout": "0-7"}, task="reasoning_eval"), "cluster.component_placement", "needs reward placed"),
        (
            reasoning({"actor,reward": "0-7", "rollout": "0-3", "rollout_judge": "4-9"}),
            "cluster.component_placement.rollout_judge",
            "must be inside actor's GPUs",
        ),
    ],
)
def test_model_parallel_refusals_by_task_type_name_the_key_and_line(cfg, path, words):
    got_path, message = refusal(cfg)
    assert got_path == path and words in message and message.startswith("job.yaml:")


def test_the_same_placements_load_for_an_embodied_task_and_the_valid_model_parallel_ones_load():
    load(reasoning({"actor,rollout": "0-7"}, task="embodied"))
    load(reasoning({"actor": "0-3", "rollout": "4-5", "inference": "6", "reward": "7"}))
    load(reasoning({"actor,reward": "0-7", "rollout": "0-3", "rollout_judge": "4-7"}))  # RLinf's multi-agent
    shaped = load(
        {**reasoning({"rollout,reward": "0-7"}, task="reasoning_eval"), "rollout": {"tensor_parallel_size": 2}}
    )
    assert shaped.component("rollout").process_shape.devices_per_process == 2


def profiled(profiling) -> dict:
    return {"cluster": {"num_nodes": 1, "component_placement": {"actor": "0-7"}, "profiling": profiling}}


@pytest.mark.parametrize(
    ("profiling", "path", "words"),
    [
        ({"worker_groups": "all"}, "cluster.profiling.backend", "needs 'backend': backends: nsight, rocprof_sys"),
        ({"backend": "nsys"}, "cluster.profiling.backend", "backend 'nsys' is not one RLinf registers"),
        ({"backend": "nsigth"}, "cluster.profiling.backend", "did you mean 'nsight'?"),
        ({"backend": "nsight", "args": {"a": 1}}, "cluster.profiling.args", "unknown key 'args'"),
        ({"backend": "nsight", "steps": [-1]}, "cluster.profiling.steps[0]", "an integer >= 0"),
        ({"backend": "nsight", "steps": 5}, "cluster.profiling.steps", "must be a list"),
        ({"backend": "nsight", "options": ["t"]}, "cluster.profiling.options", "must be a mapping"),
        ({"backend": "nsight", "flags": ["t"], "options": {"t": "cuda"}}, "cluster.profiling.flags", "both a flag"),
        ({"backend": "nsight", "flags": "capture-range", "steps": [3]}, "cluster.profiling.flags", "because steps"),
        ({"backend": "nsight", "options": {"o": "a", "output": "b"}}, "cluster.profiling.options", "'o' and 'output'"),
        ({"backend": "nsight", "flags": [""]}, "cluster.profiling.flags", "a flag name is empty"),
        ({"backend": "rocprof_sys", "env": ["A=1"]}, "cluster.profiling.env", "must be a mapping"),
        ({"backend": "nsight", "worker_groups": 3}, "cluster.profiling.worker_groups", "must be"),
        ("nsight", "cluster.profiling", "must be a mapping with backend"),
    ],
)
def test_profiling_refusals(profiling, path, words):
    got_path, message = refusal(profiled(profiling))
    assert got_path == path and words in message


def test_valid_profiling_is_kept_as_written():
    section = {"backend": "rocprof_sys", "args": {"f": "x"}, "env": {"ROCPROFSYS_X": 1}, "steps": [1]}
    assert load(profiled(section)).extras["profiling"] == section


def test_a_near_miss_of_a_component_name_warns_with_the_share_it_cuts():
    spec = load(
        "cluster:\n  num_nodes: 1\n  component_placement:\n    actor: 0-7\n    rollout: 0-7\n    rolout: 4-7\n"
        "rollout: {}\n",
        filename="job.yaml",
    )
    (warning,) = spec.warnings
    assert warning.startswith("job.yaml:6: cluster.component_placement.rolout: component 'rolout'")
    assert "did you mean 'rollout'?" in warning and "cuts the share of each actor process from 1/2 to 1/3" in warning
    (typo,) = load("cluster:\n  num_nodes: 1\n  component_placement:\n    'actr,rollout': 0-7\n").warnings
    assert "did you mean 'actor'?" in typo
    assert load("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: 0-3\n    learner: 4-7\n").warnings == ()
