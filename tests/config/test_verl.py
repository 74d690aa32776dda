"""verl's trainer configs (config/verl, planner/verl.py), on rlplace's own small tree in verl's shape
(tests/data/frameworks/verl, its README): loaded as `rlplace plan verl.trainer.main_ppo OVERRIDES` loads them,
pools and roles as verl's trainers build them, verl's refusals, and the checks verl leaves out."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from rlplace.cli import main
from rlplace.config import load
from rlplace.config.verl.entry import config_file
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan

pytest.importorskip("hydra")

TREE = pathlib.Path(__file__).resolve().parents[1] / "data" / "frameworks" / "verl"
MAIN = "verl.trainer.main_ppo"
ONE_STEP = "verl.experimental.one_step_off_policy.main_ppo"
FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"
SEPARATED = ["actor_rollout_ref.hybrid_engine=False"]


@pytest.fixture(autouse=True)
def _in_tree(monkeypatch):
    monkeypatch.chdir(TREE)  # as verl's scripts run: from the checkout's root


def spec_of(entry: str, *overrides: str):
    return load(config_file(entry), overrides=list(overrides))


def pools(spec) -> dict[str, tuple[int, ...]]:
    return {g.label: g.gpus_per_node for g in spec.node_groups}


def roles(spec) -> dict[str, tuple[str, ...]]:
    return {c.name: c.placement.groups for c in spec.components}


# --- loading: pools and roles as verl's trainers build them --------------------------------------------------------


def test_main_trainer_global_pool_holds_the_hybrid_engine_and_the_critic():
    spec = spec_of(MAIN, "trainer.nnodes=2", "trainer.n_gpus_per_node=4")
    assert spec.dialect == "verl"
    assert pools(spec) == {"global_pool": (4, 4)}
    assert roles(spec) == {"actor_rollout": ("global_pool",), "critic": ("global_pool",)}


def test_reference_policy_names_the_hybrid_role_and_grpo_drops_the_critic():
    spec = spec_of(MAIN, "actor_rollout_ref.actor.use_kl_loss=true", "algorithm.adv_estimator=grpo")
    assert roles(spec) == {"actor_rollout_ref": ("global_pool",)}
    lora = spec_of(MAIN, "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.model.lora_rank=8")
    assert "actor_rollout" in roles(lora)  # LoRA: the reference is the actor without its adapter


def test_rollout_engines_are_groups_of_consecutive_hybrid_ranks():
    spec = spec_of(MAIN, "actor_rollout_ref.rollout.tensor_model_parallel_size=4", "algorithm.adv_estimator=grpo")
    (actor,) = spec.components
    assert actor.model_parallel.groups == (
        ("rollout tensor-parallel", 4, "actor_rollout_ref.rollout.tensor_model_parallel_size: 4"),
    )


def test_reward_model_gets_its_pool_only_with_enable_resource_pool():
    base = ("reward.reward_model.enable=true", "reward.reward_model.nnodes=1", "reward.reward_model.n_gpus_per_node=4")
    colocated = spec_of(MAIN, *base)
    assert roles(colocated)["rm"] == ("global_pool",) and "reward_pool" not in pools(colocated)
    own = spec_of(MAIN, *base, "reward.reward_model.enable_resource_pool=true")
    assert pools(own)["reward_pool"] == (4,) and roles(own)["rm"] == ("reward_pool",)


def test_an_unused_reward_pool_is_said_and_not_reserved():
    spec = spec_of(MAIN, "reward.reward_model.enable_resource_pool=true", "reward.reward_model.nnodes=1")
    assert "reward_pool" not in pools(spec)
    assert any("reward_pool" in w and "places nothing" in w for w in spec.warnings)


def test_separated_trainer_has_a_trainer_pool_and_one_pool_per_rollout_replica():
    spec = spec_of(ONE_STEP, *SEPARATED, "actor_rollout_ref.rollout.tensor_model_parallel_size=4", "rollout.nnodes=2")
    assert pools(spec) == {
        "trainer_pool": (8,),
        "rollout_pool_0": (4,),
        "rollout_pool_1": (4,),
        "rollout_pool_2": (4,),
        "rollout_pool_3": (4,),
    }
    assert roles(spec)["rollout"] == ("rollout_pool_0", "rollout_pool_1", "rollout_pool_2", "rollout_pool_3")
    assert roles(spec)["actor"] == ("trainer_pool",)


def test_rollout_gpus_no_whole_engine_uses_are_said():
    spec = spec_of(ONE_STEP, *SEPARATED, "actor_rollout_ref.rollout.tensor_model_parallel_size=3")
    assert len([p for p in pools(spec) if p.startswith("rollout_pool_")]) == 2
    assert any("2 of its 8 GPUs" in w and "stay idle" in w for w in spec.warnings)


def test_engine_wider_than_a_node_spans_nodes_of_its_replica_pool():
    spec = spec_of(ONE_STEP, *SEPARATED, "actor_rollout_ref.rollout.tensor_model_parallel_size=16", "rollout.nnodes=2")
    assert pools(spec)["rollout_pool_0"] == (8, 8)


def test_fully_async_serving_trainer_is_actor_rollout_and_numbers_standalone_replicas_after_it():
    spec = spec_of(FULLY_ASYNC, *SEPARATED, "async_training.use_trainer_do_validate=true")
    assert "actor_rollout" in roles(spec)
    assert next(p for p in pools(spec) if p.startswith("rollout_pool_")) == "rollout_pool_4"  # 4 hybrid replicas first


# --- verl's own refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "overrides", "key", "reason"),
    [
        (
            MAIN,
            ["model_engine=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3"],
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
            "n_gpus (8) must be divisible by model_parallel_size (3) times context_parallel_size (1)",
        ),
        (MAIN, ["actor_rollout_ref.rollout.name=???"], "actor_rollout_ref.rollout.name", "mandatory value not set"),
        (ONE_STEP, [], "actor_rollout_ref.hybrid_engine", "hybrid_engine is false"),
        (
            MAIN,
            ["reward.reward_model.enable=true", "reward.reward_model.rollout.tensor_model_parallel_size=3"],
            "reward.reward_model.rollout.tensor_model_parallel_size",
            "split_size must be a divisor of world_size",
        ),
        (
            MAIN,
            ["actor_rollout_ref.rollout.pipeline_model_parallel_size=2"],
            "actor_rollout_ref.rollout.pipeline_model_parallel_size",
            "not implemented pipeline_model_parallel_size > 1",
        ),
        (
            MAIN,
            ["actor_rollout_ref.rollout.expert_parallel_size=4"],
            "actor_rollout_ref.rollout.expert_parallel_size",
            "expert_parallel_size must be equal to tensor_model_parallel_size * data_parallel_size",
        ),
        (
            MAIN,
            ["trainer.v1.trainer_mode=separate_async"],
            "actor_rollout_ref.rollout.nnodes",
            "must be > 0 in separate async training",
        ),
        (ONE_STEP, [*SEPARATED, "rollout.n_gpus_per_node=0"], "rollout.n_gpus_per_node", "greater than 0"),
        (ONE_STEP, [*SEPARATED, "reward.reward_model.enable=true"], "reward.reward_model.enable", "KeyError"),
        (
            MAIN,
            ["distillation.enabled=true", "distillation.nnodes=1", "distillation.n_gpus_per_node=3"],
            "distillation.teacher_models.teacher_model.inference.tensor_model_parallel_size",
            "must divide the distillation resource pool size",
        ),
    ],
)
def test_what_verl_refuses_is_refused_at_its_key_with_its_reason(entry, overrides, key, reason):
    with pytest.raises(ConfigError) as e:
        spec_of(entry, *overrides)
    (problem,) = e.value.problems
    assert problem.path == key and reason in problem.message


def test_megatron_sizes_that_do_not_divide_the_gpus_pass_with_dynamic_batch_size_as_in_verl():
    # verl's validate_config checks the division only without use_dynamic_bsz; the fully async main never calls it
    tp3 = ("model_engine=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3")
    assert spec_of(MAIN, *tp3, "actor_rollout_ref.actor.use_dynamic_bsz=true").dialect == "verl"
    assert spec_of(FULLY_ASYNC, *tp3, *SEPARATED).dialect == "verl"


def test_an_entry_module_without_a_verl_package_here_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    with pytest.raises(ConfigError, match="no verl package found"):
        config_file(MAIN)


def test_an_entry_module_that_is_not_an_rl_trainer_is_refused_not_planned_as_one():
    # verl's generation server composes ppo_trainer too, but its placement is not the trainer's
    with pytest.raises(ConfigError, match="not one of the verl RL trainers") as e:
        config_file("verl.trainer.main_generation_server")
    assert MAIN in str(e.value)


def test_a_file_reached_through_the_own_package_is_named_from_the_checkouts_root():
    # fully_async_ppo_trainer.yaml finds ppo_trainer through pkg://verl.trainer.config: the message names the file
    # as from the root, as it names the files of the one-step-off trainer's file:// path
    with pytest.raises(ConfigError) as e:
        spec_of(FULLY_ASYNC)
    assert e.value.problems[0].file == "verl/trainer/config/ppo_trainer.yaml"


def test_config_name_and_path_replace_the_entry_modules_own():
    assert config_file(MAIN, "ppo_trainer", "config").name == "ppo_trainer.yaml"
    assert config_file(MAIN, "one_step_off_ppo_trainer", "../experimental/one_step_off_policy/config").is_file()


# --- the planner: pools on nodes as Ray places verl's placement groups ----------------------------------------------


def test_small_pools_pack_onto_nodes_in_creation_order():
    spec = spec_of(FULLY_ASYNC, *SEPARATED, "trainer.n_gpus_per_node=4")
    p = plan(spec, parse_nodes("2x8"))
    where = {(w.component, w.rank): (w.node_rank, w.gpus, w.group) for w in p.workers}
    assert where[("actor", 3)] == (0, (3,), "trainer_pool")
    assert where[("rollout", 0)] == (0, (4,), "rollout_pool_0")  # replica 0 beside the trainer on node 0
    assert where[("rollout", 7)] == (1, (3,), "rollout_pool_3")
    assert {g.name: g.node_ranks for g in p.groups}["rollout_pool_3"] == (1,)
    assert any("node 1 GPUs 4-7" in w for w in p.warnings)  # the GPUs no pool takes


def test_roles_on_one_gpu_share_it():
    p = plan(spec_of(MAIN), parse_nodes("1x8"))
    assert {(w.component, w.gpu_fraction) for w in p.workers} == {("actor_rollout", 0.5), ("critic", 0.5)}
    assert len(p.bundles) == 8


def test_too_few_nodes_names_trainer_nnodes():
    with pytest.raises(PlanError, match=r"global_pool \(trainer\.nnodes: 3 x trainer\.n_gpus_per_node: 8"):
        plan(spec_of(MAIN, "trainer.nnodes=3"), parse_nodes("2x8"))


def test_nodes_smaller_than_n_gpus_per_node_are_refused():
    with pytest.raises(PlanError, match=r"needs 1 node.* with 8 GPUs each.*GPUs per node: 4"):
        plan(spec_of(MAIN), parse_nodes("2x4"))


def test_a_pool_over_two_gpu_models_is_warned():
    p = plan(spec_of(MAIN, "trainer.nnodes=2"), parse_nodes("1x8:A100,1x8:H100"))
    assert any("spans GPU models" in w and "A100" in w and "H100" in w for w in p.warnings)


def test_rollout_engines_across_nvlink_domains_are_warned():
    spec = spec_of(
        MAIN, "trainer.nnodes=4", "trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=4"
    )
    p = plan(spec, parse_nodes("4x4/nvlink_domain=1"))  # pools take 2 of 4 GPUs a node
    (warning,) = [w for w in p.warnings if "NVLink" in w]
    assert "2 of its 2 rollout tensor-parallel groups" in warning
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size: 4" in warning
    inside = plan(spec, parse_nodes("4x4/nvlink_domain=2"))
    assert not [w for w in inside.warnings if "NVLink" in w]


# --- the CLI ---------------------------------------------------------------------------------------------------------


def test_validate_and_plan_take_the_entry_module_and_its_overrides(capsys):
    assert main(["validate", MAIN, "trainer.nnodes=2"]) == 0
    assert f"{MAIN}: ok" in capsys.readouterr().out
    assert main(["plan", MAIN, "trainer.nnodes=2", "--nodes", "2x8"]) == 0
    assert "actor_rollout" in capsys.readouterr().out


def test_plan_exits_3_when_the_nodes_cannot_hold_the_pools(capsys):
    assert main(["plan", MAIN, "trainer.nnodes=3", "--nodes", "2x8"]) == 3
    assert "trainer.nnodes" in capsys.readouterr().err


def test_validate_exits_2_with_verls_reason(capsys):
    assert (
        main(
            [
                "validate",
                "--config-name",
                "one_step_off_ppo_trainer",
                "--config-path",
                "../experimental/one_step_off_policy/config",
                MAIN,
            ]
        )
        == 2
    )
    assert "actor_rollout_ref.hybrid_engine" in capsys.readouterr().out


def test_config_name_beside_a_file_is_refused(capsys):
    assert main(["validate", "--config-name", "x", "verl/trainer/config/ppo_trainer.yaml"]) == 2


def test_plan_table_names_each_roles_pools(capsys):
    assert main(["plan", FULLY_ASYNC, *SEPARATED, "trainer.n_gpus_per_node=4", "--nodes", "2x8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "actor: 4 workers, 1/2 GPU each, 1 CPU each, in trainer_pool" in lines
    assert (
        "rollout: 8 workers, 1 GPU each, 1 CPU each, in rollout_pool_0..rollout_pool_3 (2 each, ranks in pool order)"
        in lines
    )


def test_export_of_a_verl_plan_is_refused_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "pools.yaml"
    assert main(["plan", MAIN, "--nodes", "1x8", "--export", str(out)]) == 2
    assert "which verl does not read" in capsys.readouterr().err
    assert not out.exists()


# --- scripts/measure_tree.py --verl: the tree measured as a user runs it ---------------------------------------------


def test_measure_tree_counts_verls_configs_entry_modules_and_launches(tmp_path):
    launches = tmp_path / "launches.jsonl"
    records = [
        {"script": "examples/run_a.sh", "module": MAIN, "args": ["trainer.nnodes=2", "--config-name=ppo_trainer"]},
        {"script": "examples/run_b.sh", "module": ONE_STEP, "args": [*SEPARATED, "rollout.nnodes=1"]},
        {"script": "examples/run_c.sh", "module": MAIN, "args": ["+trainer.nnodes=2"]},  # Hydra: the key exists
        {"script": "examples/sft.sh", "module": None, "args": []},  # launches no verl module: not a case
    ]
    launches.write_text("".join(json.dumps(r) + "\n" for r in records))
    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "measure_tree.py"
    out = subprocess.run(
        [sys.executable, str(script), ".", "--verl", "--launches", str(launches)],
        cwd=TREE,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"]},
    ).stdout
    sections = dict(part.split("\n", 1) for part in out.split("== ")[1:])
    totals = {
        kind: next(x for x in text.splitlines() if x.startswith("total")).split() for kind, text in sections.items()
    }
    # 3 trainer configs (ppo_trainer and the separated trainers', which verl refuses with hybrid_engine true)
    assert totals["verl trainer configs"][1:4] == ["3", "1", "1"]
    # main_ppo planned; the separated trainers refused as above; the generation server is not a trainer
    assert totals["entry modules (@hydra.main)"][1:4] == ["4", "1", "1"]
    assert "verl.trainer.main_generation_server is not one of the verl RL trainers" in out
    assert totals["run scripts' launches"][1:4] == ["3", "2", "2"]
    assert "refused: examples/run_c.sh (verl.trainer.main_ppo, 1 arguments)" in out
