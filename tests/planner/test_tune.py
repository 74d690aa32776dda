"""`rlplace tune` as a user runs it: the fastest placement in the config's own dialect, which `rlplace plan` plans
identically; RLinf's inputs in the shapes of RLinf's own auto-placement tests (our numbers); what topology, GPU
models and memory change; every bad input an exit 2 naming the key and value."""

from __future__ import annotations

import json
import textwrap
import time

import pytest
from tests.conftest import ROOT

from rlplace.cli import main

REASONING = """
    cluster:
      num_nodes: {nodes}
      component_placement:
        actor,rollout,reward: all
    runner: {{task_type: reasoning}}
    algorithm: {{group_size: 8, n_minibatches: 2, recompute_logprobs: true}}
    data: {{rollout_batch_size: 64}}
    rollout: {{max_running_requests: 128, tensor_parallel_size: 1}}
    actor: {{model: {{tensor_model_parallel_size: 2}}}}
    profile_data: {{actor_cost: {actor}, rollout_cost: {rollout}, inference_cost: {inference}}}
"""


def run(capsys, command: str, *argv: str) -> tuple[int, str, str]:
    try:
        code = main([command, *argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def config(tmp_path, text: str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def tuned(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, "tune", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_rollout_that_holds_its_batch_on_fewer_gpus_is_disaggregated(capsys, tmp_path):
    # RLinf's unit-test shape: 512 requests fit 5 engines of 115, so rollout takes as long on 40 GPUs as on 64;
    # the actor, on fewer GPUs, gains (RLinf's Megatron rule): streaming beats taking turns
    path = config(tmp_path, REASONING.format(nodes=8, actor=60, rollout=120, inference=8))
    doc = tuned(capsys, path, "--nodes", "8x8")
    best = doc["best"]
    placed = best["config"]["component_placement"]
    assert best["mode"] != "collocated" and "rollout" in placed and "actor" in placed  # rollout on GPUs of its own
    assert best["gpus"]["rollout"] + best["gpus"]["actor"] <= 64
    assert best["seconds"] < doc["as_written"]["seconds"] == pytest.approx(60 + 120 + 8)
    assert [c["mode"] for c in doc["candidates"]].count("collocated") == 1
    assert all(c["seconds"] >= best["seconds"] for c in doc["candidates"] if c["seconds"] is not None)


def test_costs_that_scale_do_not_pay_for_disaggregation(capsys, tmp_path):
    # RLinf's e2e shape: 128 x 16 requests, engines of 64 on 8 GPUs: rollout scales linearly, collocated wins
    shape = REASONING.format(nodes=1, actor=90, rollout=60, inference=30)
    shape = shape.replace("group_size: 8, n_minibatches: 2", "group_size: 16, n_minibatches: 4")
    shape = shape.replace("rollout_batch_size: 64", "rollout_batch_size: 128").replace("requests: 128", "requests: 64")
    doc = tuned(capsys, config(tmp_path, shape), "--nodes", "1x8")
    assert doc["best"]["mode"] == "collocated" and doc["best"]["seconds"] == pytest.approx(180)
    assert doc["best"]["config"]["component_placement"] == {"reward": "all", "rollout,actor": "all"}


def test_the_written_config_plans_identically_in_each_dialect(capsys, tmp_path):
    rlinf = config(tmp_path, REASONING.format(nodes=8, actor=60, rollout=120, inference=8), "rlinf.yaml")
    pools = config(
        tmp_path,
        """
        cluster:
          train_worker_num: 4
          eval_worker_num: 4
          env_each_gpu_num: 0
          placement: {strategy: colocate}
        """,
        "pools.yaml",
    )
    profile = config(
        tmp_path,
        """
        measured: {gpus: 8, gpu: A800}
        components:
          eval: {seconds: {8: 10, 2: 14}, memory_gb: 30}
          train: {seconds: 6, memory_gb: 40}
        """,
        "profile.yaml",
    )
    for path, nodes, extra in ((rlinf, "8x8", ()), (pools, "2x4:A800", ("--profile", profile))):
        out = tmp_path / f"tuned-{nodes}.yaml"
        doc = tuned(capsys, path, "--nodes", nodes, *extra, "--write", str(out))
        code, planned, _ = run(capsys, "plan", str(out), "--nodes", nodes, "--format", "json")
        assert code == 0 and json.loads(planned) == doc["best"]["plan"]
        code, timed, _ = run(capsys, "plan", str(out), "--nodes", nodes, "--time", "--format", "json", *extra)
        # the written file's costs are re-measured where they were written (RLinf: on the tuned ranges), so the
        # pools config, whose profile names its GPUs, predicts the same seconds
        if extra:
            assert json.loads(timed)["time"]["seconds"] == pytest.approx(doc["best"]["seconds"])
    assert "resource_pool" in doc["best"]["config"] and doc["best"]["config"]["placement"] == {"mode": "manual"}


def test_memory_and_gpu_models_choose_the_nodes(capsys, tmp_path):
    # the actor's 60 GB fit an A800, not an RTX 4090; rollout's 20 GB fit both, and at 0.8 of an A800's speed
    # (the profile's figure) the 4090 node streams rollout beside the actor faster than the A800s alone take turns
    path = config(
        tmp_path,
        """
        cluster:
          num_nodes: 2
          component_placement:
            actor,rollout: all
        """,
    )
    profile = config(
        tmp_path,
        """
        measured: {gpus: 8, gpu: A800}
        batches: 16
        components:
          rollout: {seconds: {8: 20}, memory_gb: 20}
          actor: {seconds: {8: 30}, memory_gb: 60}
        gpus:
          RTX4090: {speed: 0.8}
        """,
        "profile.yaml",
    )
    doc = tuned(capsys, path, "--nodes", "1x4:RTX4090,1x4:A800", "--profile", profile)
    assert doc["as_written"]["seconds"] is None and "RTX4090's 24 GB" in doc["as_written"]["problem"]
    assert doc["best"]["config"]["component_placement"] == {"rollout": "0-3", "actor": "4-7"}


def test_model_parallel_groups_stay_inside_nodes(capsys, tmp_path):
    # actor tensor parallel 4 on nodes of 6 GPUs: its range starts on a node and takes whole groups of it
    path = config(
        tmp_path,
        REASONING.format(nodes=2, actor=60, rollout=120, inference=8).replace(
            "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 4"
        ),
    )
    doc = tuned(capsys, path, "--nodes", "2x6")
    for c in doc["candidates"]:
        if c["seconds"] is not None:
            assert not c["time"]["problems"]
    plan = doc["best"]["plan"]
    actor = sorted((w["node_rank"], w["gpus"][0]) for w in plan["workers"] if w["component"] == "actor")
    groups = [actor[i : i + 4] for i in range(0, len(actor), 4)]
    assert all(len({node for node, _ in g}) == 1 for g in groups) and not plan["split_groups"]


def test_table_names_the_best_why_the_others_lose_and_the_placement_as_written(capsys, tmp_path):
    path = config(tmp_path, REASONING.format(nodes=8, actor=60, rollout=120, inference=8))
    code, out, _ = run(capsys, "tune", path, "--nodes", "8x8", "--svg", str(tmp_path / "best.svg"))
    assert code == 0
    assert (
        "│ best " in out
        and "│ as written │ 188.00 s │ collocated" in out
        and "taking turns: rollout + inference + actor" in out
    )
    assert "predicted iteration:" in out and "streamed over 64 group batches" in out
    assert "assumed: model size 14 GB" in out and "cluster:\n  num_nodes: 8\n  component_placement:" in out
    assert "<svg" in (tmp_path / "best.svg").read_text()


def test_plan_time_shows_each_phase_and_what_was_assumed(capsys, tmp_path):
    path = config(tmp_path, REASONING.format(nodes=1, actor=90, rollout=60, inference=30))
    code, out, _ = run(capsys, "plan", path, "--nodes", "1x8", "--time")
    assert code == 0
    assert "predicted iteration: 180.00 s (collocated: rollout + inference + actor (8))" in out
    assert "  rollout        8 x unknown     60.00 s" in out
    assert "costs: RLinf's profile_data in" in out and "GPU model not given (--nodes COUNTxGPUS:MODEL)" in out


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ("components: {actor: {seconds: -1}}", "components.actor.seconds: must be seconds, a number > 0, got -1"),
        ("components: {actor: {seconds: 1, memory: 2}}", "unknown key 'memory' in a component's cost; did you mean"),
        ("components: {critic: {seconds: {8: 1}}}", "components.critic: the config has no component 'critic'; valid:"),
        ("components: {actor: {seconds: {8: fast}}}", "components.actor.seconds.8: must be seconds, a number > 0, got"),
        ("components: {actor: {seconds: 3}}", "seconds: 3 is one number, which means seconds on measured.gpus GPUs"),
        (
            "gpus: {H100: {speed: 0}}\ncomponents: {actor: {seconds: {8: 1}}}",
            "gpus.H100.speed: must be a speed ratio > 0",
        ),
    ],
)
def test_every_bad_profile_value_is_exit_2_naming_it_in_under_a_second(capsys, tmp_path, profile, says):
    path = config(tmp_path, REASONING.format(nodes=1, actor=90, rollout=60, inference=30))
    bad = config(tmp_path, profile, "profile.yaml")
    started = time.perf_counter()
    code, _, err = run(capsys, "tune", path, "--nodes", "1x8", "--profile", bad)
    assert code == 2 and says in err and "Traceback" not in err
    assert f"{bad}:1" in err or f"{bad}:2" in err
    assert time.perf_counter() - started < 1.0


def test_a_missing_profile_and_a_config_without_costs_are_exit_2(capsys, tmp_path):
    path = config(tmp_path, REASONING.format(nodes=1, actor=90, rollout=60, inference=30))
    code, _, err = run(capsys, "tune", path, "--nodes", "1x8", "--profile", str(tmp_path / "nope.yaml"))
    assert code == 2 and "argument --profile" in err and "nope.yaml: no such file" in err
    bare = config(tmp_path, "cluster:\n  num_nodes: 1\n  component_placement:\n    actor,rollout: all\n", "bare.yaml")
    code, _, err = run(capsys, "tune", bare, "--nodes", "1x8")
    assert code == 2 and "no costs to predict with: write RLinf's profile_data" in err
    stages = config(tmp_path, "cluster:\n  disaggregated_stages: overlapped\n", "stages.yaml")
    code, out, err = run(capsys, "validate", stages)
    assert (
        code == 2
        and "cluster.disaggregated_stages: must be one of 'streamed', 'sequential', got 'overlapped'" in out + err
    )


def test_a_bad_model_parallel_size_of_rlinfs_profile_is_exit_2_said_once(capsys, tmp_path):
    # was a TypeError traceback (found by mypy); the actor's size is read again for inference: one problem
    text = REASONING.format(nodes=1, actor=90, rollout=60, inference=30)
    path = config(tmp_path, text.replace("tensor_model_parallel_size: 2", "pipeline_model_parallel_size: 0"))
    code, _, err = run(capsys, "tune", path, "--nodes", "1x8")
    assert code == 2 and "Traceback" not in err
    assert err.count("actor.model.pipeline_model_parallel_size: must be an integer >= 1, got 0") == 1


def test_nothing_that_fits_is_exit_3(capsys, tmp_path):
    path = config(tmp_path, "cluster:\n  num_nodes: 1\n  component_placement:\n    actor,rollout: all\n")
    profile = config(tmp_path, "measured: {gpus: 4}\ncomponents: {actor: {seconds: 9, memory_gb: 30}}\n", "p.yaml")
    code, _, err = run(capsys, "tune", path, "--nodes", "1x4:RTX4090", "--profile", profile)
    assert (
        code == 3
        and "no placement of actor fits: actor 30 GB does not fit in RTX4090's 24 GB (node 0), even with offload" in err
    )


def test_ctrl_c_stops_the_search_with_nothing_written(capsys, tmp_path, monkeypatch):
    import rlplace.planner.tune as search

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(search, "tune", interrupted)
    path = config(tmp_path, REASONING.format(nodes=1, actor=90, rollout=60, inference=30))
    code, _, err = run(capsys, "tune", path, "--nodes", "1x8", "--write", str(tmp_path / "out.yaml"))
    assert code == 130 and err.strip() == "interrupted" and not (tmp_path / "out.yaml").exists()


def test_plan_with_a_profile_predicts_from_it(capsys, tmp_path):
    path = config(
        tmp_path,
        """
        cluster:
          train_worker_num: 2
          eval_worker_num: 2
          env_each_gpu_num: 0
          placement: {strategy: disaggregate}
        """,
    )
    profile = config(
        tmp_path, "measured: {gpus: 2, gpu: H100}\ncomponents: {train: {seconds: 8}, eval: {seconds: 5}}\n", "p.yaml"
    )
    code, out, _ = run(capsys, "plan", path, "--nodes", "2x2:H100", "--profile", profile)
    assert code == 0
    assert "predicted iteration: 13.14 s (disaggregated: eval (2) | train (2))" in out  # 14 GB assumed: 0.14 s sync
    assert "sequential: each waits for the one before (cluster.disaggregated_stages: sequential)" in out


def test_a_verl_config_is_not_tuned_and_says_so(capsys, tmp_path):
    verl = str(ROOT / "tests/data/frameworks/verl/verl/trainer/config/ppo_trainer.yaml")
    profile = config(tmp_path, "measured: {gpus: 8}\ncomponents: {actor_rollout: {seconds: 3}}\n", "p.yaml")
    code, _, err = run(capsys, "tune", verl, "--nodes", "1x8", "--profile", profile)
    assert code == 2 and "a verl config is not tuned (plan it with rlplace plan --time" in err
