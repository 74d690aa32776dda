"""The keys RLightning and RLinf declare: accepted, checked, and kept where the application or planner reads them."""

from __future__ import annotations

import textwrap

import pytest
from tests.config.test_invalid_configs import DYNAMIC

from rlplace.config import load
from rlplace.config.hardware import REGISTRY
from rlplace.errors import ConfigError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan


def spec_of(text: str, **kw):
    return load(textwrap.dedent(text), filename="job.yaml", **kw)


def problems_of(text: str) -> list:
    with pytest.raises(ConfigError) as e:
        spec_of(text)
    return e.value.problems


# --- RLightning's ClusterConfig ---------------------------------------------------------------------


def test_remote_switches_ray_address_and_rollout_env_interaction():
    spec = spec_of(
        """\
        cluster:
          ray_address: "ray://head:10001"
          remote_train: false
          remote_storage: false
          remote_eval: true
          rollout_env_interaction: batched
        """
    )
    remote = {c.name: c.remote for c in spec.components}
    assert remote == {"train": False, "eval": True, "env": True, "buffer": False}
    assert spec.component("buffer").placement is None and spec.component("buffer").gpus_per_worker == 0
    assert spec.ray_address == "ray://head:10001"
    assert spec.extras == {"rollout_env_interaction": "batched"}
    assert not spec.warnings


def test_unknown_keys_in_a_cluster_section_are_warnings_naming_file_line_and_key():
    spec = spec_of("cluster:\n  train_worker_num: 2\n  seed: 3\n  placement:\n    comment: later\n")
    assert spec.warnings == (
        "job.yaml:3: cluster.seed: unknown key 'seed' in the cluster section is not read by rlplace (kept for your "
        "application; remove it if it is a typo)",
        "job.yaml:5: cluster.placement.comment: unknown key 'comment' in placement is not read by rlplace (kept for "
        "your application; remove it if it is a typo)",
    )


def test_a_far_unknown_key_gets_a_hint_in_its_warning():
    (warning,) = spec_of("cluster:\n  train_worker_num: 2\n  profile: true\n").warnings
    assert "unknown key 'profile'" in warning and "did you mean" not in warning  # far from every pools key
    (warning,) = spec_of(
        "cluster:\n  num_nodes: 1\n  profile: true\n  component_placement: {actor: 0}\n"
    ).warnings  # `profile` is near RLinf's `profiling`, but not a near miss: kept, with the hint
    assert "did you mean 'profiling'?" in warning


def test_empty_cluster_section_is_rlightnings_defaults_with_a_warning():
    for text in ("cluster:\n", "cluster: {}\n", "# nothing here\n", ""):
        spec = spec_of(text)
        assert spec.dialect == "pools" and spec.settings.mode == "auto"
        (warning,) = spec.warnings
        assert "is empty: RLightning's ClusterConfig defaults apply" in warning


def test_device_colocate_beside_disaggregate_loads_and_beside_default_warns():
    text = "cluster:\n  placement:\n    strategy: {}\n    env_strategy: device-colocate\n"
    assert not spec_of(text.format("disaggregate")).warnings
    assert not spec_of(text.format("colocate")).warnings
    (warning,) = spec_of(text.format("default")).warnings
    assert warning.startswith("job.yaml:4: cluster.placement.env_strategy: env_strategy: device-colocate has no effect")
    (warning,) = spec_of("cluster:\n  placement:\n    env_strategy: node-affinity\n").warnings
    assert "(the strategy when none is written)" in warning
    assert not spec_of("cluster:\n  is_colocated: true\n  placement:\n    env_strategy: device-colocate\n").warnings


# --- CPUs per worker (issue 12) -------------------------------------------------------------------------


def test_cpus_per_worker_in_both_dialects_reach_the_plan():
    pools = spec_of(
        """\
        cluster:
          train_worker_num: 2
          train_each_cpu_num: 0.5
          eval_each_cpu_num: 2
          env_each_gpu_num: 0
          env_each_cpu_num: 0.25
          buffer_each_cpu_num: 0.5
          placement: {strategy: colocate}
        """
    )
    cpus = {c.name: c.cpus_per_worker for c in pools.components}
    assert cpus == {"train": 0.5, "eval": 2.0, "env": 0.25, "buffer": 0.5}
    planned = plan(pools, parse_nodes("1x2"))
    assert {w.component: w.num_cpus for w in planned.workers} == cpus
    groups = spec_of(
        """\
        cluster:
          num_nodes: 1
          component_placement:
            actor: {placement: 0-1, num_cpus: 0.5}
            rollout: 0-1
        """
    )
    assert [c.cpus_per_worker for c in groups.components] == [0.5, 1.0]
    assert {w.component: w.num_cpus for w in plan(groups, parse_nodes("1x2")).workers} == {"actor": 0.5, "rollout": 1}


# --- whole RLightning training configs ------------------------------------------------------------------

WHOLE = """\
cluster:
  train_worker_num: 2
  eval_worker_num: 2
  placement: {strategy: disaggregate}
env:
  - {name: a, backend: maniskill, task: t, num_workers: 2, num_gpus: 1, num_cpus: 2}
  - {name: b, backend: maniskill, task: t, num_workers: 1, num_gpus: 1, num_cpus: 2}
buffer:
  type: RolloutBuffer
  capacity: 100
  storage: {type: unified}
policy:
  type: VLAPPOPolicy
train:
  max_epochs: 1
"""


def test_whole_rlightning_config_env_from_groups_and_one_unified_buffer():
    spec = spec_of(WHOLE)
    env = spec.component("env")
    assert (env.num_workers, env.gpus_per_worker, env.cpus_per_worker, env.path) == (3, 1.0, 2.0, "env")
    assert spec.settings.buffer_worker_num == 1 and spec.component("buffer").num_workers == 1
    assert not spec.warnings
    one_group = spec_of(
        WHOLE.replace(
            "  - {name: b, backend: maniskill, task: t, num_workers: 1, num_gpus: 1, num_cpus: 2}\n", ""
        ).replace("env:\n  - ", "env:\n  ")
    )
    assert one_group.component("env").num_workers == 2 and one_group.component("env").path == "env"


def test_env_groups_with_different_resources_are_placed_with_the_largest():
    spec = spec_of(
        WHOLE.replace("num_workers: 1, num_gpus: 1, num_cpus: 2", "num_workers: 1, num_gpus: 0.5, num_cpus: 4")
    )
    env = spec.component("env")
    assert (env.gpus_per_worker, env.cpus_per_worker) == (1.0, 4.0)
    (warning,) = spec.warnings
    assert "num_gpus [0.5, 1.0], num_cpus [2.0, 4.0]" in warning and "the largest (1 GPU, 4 CPU)" in warning


def test_whole_config_rules_from_rlightning():
    problems = problems_of(WHOLE.replace("  train_worker_num: 2\n", "  train_worker_num: 2\n  env_worker_num: 5\n"))
    assert [(p.path, p.line) for p in problems] == [("cluster.env_worker_num", 3)]
    assert "disagrees with the env: groups of this training config (3)" in problems[0].message
    sharded = WHOLE.replace("{type: unified}", "{type: sharded, num_shards: 4}")
    assert spec_of(sharded).settings.buffer_worker_num == 4
    (problem,) = problems_of(WHOLE.replace("{type: unified}", "{type: sharded, device: cuda}"))
    assert problem.path == "buffer.storage.device" and "cpu" in problem.message
    (problem,) = problems_of(WHOLE.replace("{type: unified}", "{type: shared}"))
    assert problem.path == "buffer.storage.type" and "'unified', 'sharded'" in problem.message
    (problem,) = problems_of(WHOLE.replace("num_gpus: 1, num_cpus: 2}\n  - ", "num_gpus: 1.5, num_cpus: 2}\n  - "))
    assert problem.path == "env[0].num_gpus" and "whole number" in problem.message
    spec = spec_of(WHOLE.replace("  train_worker_num: 2\n", "  train_worker_num: 2\n  buffer_worker_num: 3\n"))
    (warning,) = spec.warnings
    assert "buffer_worker_num: 3 ignored: buffer.storage.type unified holds one buffer worker" in warning


@pytest.mark.parametrize("env", ["5", "true", "[{num_workers: 1}, 3]"])
def test_env_neither_a_group_nor_a_list_of_groups_is_one_problem_naming_it(env):
    """`env: 5` was a TypeError traceback (found by mypy): it is one problem at env, as any other shape."""
    start = WHOLE.index("env:\n")
    end = WHOLE.index("buffer:\n")
    (problem,) = problems_of(f"{WHOLE[:start]}env: {env}\n{WHOLE[end:]}")
    assert problem.path == "env" and "env must be one env group (a mapping) or a list of them" in problem.message


def test_policy_gpus_per_worker_are_used_when_the_cluster_does_not_say():
    spec = spec_of(WHOLE.replace("type: VLAPPOPolicy", "type: VLAPPOPolicy\n  train_num_gpus: 0.5"))
    assert spec.component("train").gpus_per_worker == 0.5 and spec.component("train").path == "policy.train_num_gpus"
    assert spec.component("eval").gpus_per_worker == 1.0


def test_a_cluster_section_alone_keeps_its_meaning():
    """`env:` beside a cluster section is the application's unless the whole RLightning config is there."""
    spec = spec_of("cluster:\n  eval_worker_num: 3\nenv:\n  num_workers: 9\n")
    assert spec.component("env").num_workers is None  # follows eval_worker_num in the planner


# --- RLinf ----------------------------------------------------------------------------------------------

REASONING = """\
cluster:
  num_nodes: 2
  component_placement:
    actor,rollout,reward: all
actor:
  model: {tensor_model_parallel_size: 4}
rollout:
  tensor_parallel_size: 2
"""


def test_rollout_spans_its_tensor_parallel_size_like_rlinfs_model_parallel_placement():
    shape = spec_of(REASONING).component("rollout").process_shape
    assert (shape.devices_per_process, shape.stride) == (2, 2)
    assert shape.origin == (
        "rollout.tensor_parallel_size: 2, actor.model.tensor_model_parallel_size: 4, collocated -> 2 GPU(s) per "
        "process, stride 2"
    )
    assert spec_of(REASONING).component("actor").process_shape is None
    same_tp = spec_of(REASONING.replace("tensor_model_parallel_size: 4", "tensor_model_parallel_size: 2"))
    assert (
        same_tp.component("rollout").process_shape.devices_per_process,
        same_tp.component("rollout").process_shape.stride,
    ) == (2, 1)
    split = REASONING.replace("actor,rollout,reward: all", "actor,reward: 0-7\n    rollout: 8-15")
    split = split.replace("tensor_parallel_size: 2", "tensor_parallel_size: 2\n  pipeline_parallel_size: 2")
    shape = spec_of(split).component("rollout").process_shape
    assert (shape.devices_per_process, shape.stride) == (4, 1) and "disaggregated" in shape.origin
    assert (
        spec_of(REASONING.replace("tensor_parallel_size: 2", "tensor_parallel_size: 1").replace(": 4}", ": 1}"))
        .component("rollout")
        .process_shape
        is None
    )


def test_tensor_parallel_sizes_rlinf_refuses_are_errors():
    (problem,) = problems_of(REASONING.replace("tensor_parallel_size: 2", "tensor_parallel_size: 3"))
    assert problem.path == "rollout.tensor_parallel_size" and "must divide" in problem.message
    (problem,) = problems_of(
        REASONING.replace("reward: all", "reward: 0-1").replace("tensor_parallel_size: 2", "tensor_parallel_size: 4")
    )
    assert "larger than rollout's 2 GPU(s)" in problem.message


def test_embodied_configs_place_rollout_as_written():
    text = REASONING.replace("actor,rollout,reward: all", "actor,rollout: all\n    env: 0")
    assert spec_of(text).component("rollout").process_shape is None


def _gpus_by_component(text: str, nodes: str = "1x8") -> dict[str, list[tuple[int, ...]]]:
    result = plan(spec_of(text), parse_nodes(nodes))
    return {c: [w.gpus for w in result.by_component(c)] for c in result.components}


def test_auto_scheduler_places_like_rlinfs_auto_mode_and_says_so():
    """RLinf's AUTO mode: the actor spans every GPU, rollout also takes the actor's GPUs (pre-process policy),
    processes of rollout.tensor_parallel_size GPUs each; inference and reward stay as written."""
    spec = spec_of(DYNAMIC)
    (warning,) = spec.warnings
    assert "job.yaml:3: cluster.auto_scheduler: actor placed on every GPU (written: 0-1)" in warning
    assert "rollout on GPUs 0-5 (written: 2-5)" in warning and "auto_scheduler: false" in warning
    gpus = _gpus_by_component(DYNAMIC)
    assert gpus["actor"] == [(g,) for g in range(8)]
    assert gpus["rollout"] == [(0, 1), (2, 3), (4, 5)]
    assert gpus["inference"] == [(6,), (7,)] and len(gpus["reward"]) == 8
    # "every GPU" is every GPU of the cluster's num_nodes nodes, as RLinf's cluster-wide actor: a bigger
    # inventory adds nodes only when num_nodes does
    assert len(_gpus_by_component(DYNAMIC, "2x8")["actor"]) == 8
    assert len(_gpus_by_component(DYNAMIC.replace("num_nodes: 1", "num_nodes: 2"), "2x8")["actor"]) == 16


def test_auto_scheduler_without_pre_process_keeps_rollout_and_without_auto_keeps_everything():
    no_pre = DYNAMIC.replace("use_pre_process_policy: true", "use_pre_process_policy: false")
    gpus = _gpus_by_component(no_pre)
    assert len(gpus["actor"]) == 8 and gpus["rollout"] == [(2, 3), (4, 5)]
    assert "rollout on GPUs" not in spec_of(no_pre).warnings[0]
    for as_written in (
        DYNAMIC.replace("auto_scheduler: true", "auto_scheduler: false"),
        DYNAMIC.replace("inference: 6-7", "inference: 6\n    critic: 7"),  # RLinf: no AUTO with a critic
    ):
        assert not spec_of(as_written).warnings
        gpus = _gpus_by_component(as_written)
        assert gpus["actor"] == [(0,), (1,)] and gpus["rollout"] == [(2, 3), (4, 5)]


def test_rlinf_top_level_keys_are_kept_for_the_application():
    spec = spec_of(
        """\
        cluster:
          num_nodes: 1
          component_placement: {actor: 0}
          profiling: {backend: nsight, enabled: true, steps: [3, 5]}
          tracer: null
          net_emulation: {delay_ms: 10}
          auto_scheduler: false
          use_pre_process_policy: true
          use_wait_before_last_iter_policy: false
          recreate_nccl_groups: true
        """
    )
    assert spec.extras == {
        "profiling": {"backend": "nsight", "enabled": True, "steps": [3, 5]},
        "tracer": None,
        "net_emulation": {"delay_ms": 10},
        "auto_scheduler": False,
        "use_pre_process_policy": True,
        "use_wait_before_last_iter_policy": False,
        "recreate_nccl_groups": True,
    }
    assert not spec.warnings


def test_node_ranks_all_and_null_optionals():
    spec = spec_of(
        """\
        cluster:
          num_nodes: 3
          component_placement: {actor: {node_group: g, placement: all}}
          node_groups:
            - label: g
              node_ranks: all
              env_configs:
                - node_ranks: All
                  python_interpreter_path: null
                  env_vars: null
              hardware: null
              ignore_hardware: null
            - label: h
              node_ranks: 1-2
              env_configs: [{node_ranks: all, python_interpreter_path: /opt/py/bin/python}]
        """
    )
    g, h = spec.node_groups
    assert g.node_ranks == (0, 1, 2) and g.env_configs[0].node_ranks == (0, 1, 2)
    assert g.env_configs[0].python is None and g.env_configs[0].env_vars == () and g.hardware_type is None
    assert h.env_configs[0].node_ranks == (1, 2) and h.env_configs[0].python == "/opt/py/bin/python"


ROBOTS = {
    "Franka": "{node_rank: 1}",  # robot_ip left out: RLinf reads ROBOT_IP on the node
    "DualFranka": '{node_rank: 1, left_robot_ip: "10.0.0.1", right_camera_type: zed, left_gripper_type: robotiq}',
    "DOSW1": "{node_rank: 1, robot_url: robot.lan, right_lead_port: 50072, camera_serials: ['42']}",
    "GimArm": "{node_rank: 1, arm_variant: gim_arm, enable_gripper: false, disable_validate: true}",
    "Turtle2": "{node_rank: 1}",
    "SO101": "{node_rank: 1, port: /dev/ttyACM0, leader_port: null, camera_cfgs: {top: {index: 2}}}",
    "YAM": "{node_rank: 1, left_ip: 10.1.0.1, right_ip: 10.1.0.2, disable_validate: true}",
    "ADB": "{node_rank: 1, device_id: R58M123, adb_path: adb}",
}


def robot_config(kind: str, entry: str) -> str:
    return textwrap.dedent(
        f"""\
        cluster:
          num_nodes: 2
          component_placement: {{env: {{node_group: hw, placement: 0}}}}
          node_groups:
            - label: hw
              node_ranks: 1
              hardware: {{type: {kind}, configs: [{entry}]}}
        """
    )


@pytest.mark.parametrize("kind", sorted(ROBOTS))
def test_every_rlinf_hardware_type_loads_and_plans(kind):
    spec = load(robot_config(kind, ROBOTS[kind]))
    (unit,) = spec.group("hw").hardware
    assert unit.type == kind and unit.node_rank == 1 and "node_rank" not in unit.config
    assert set(unit.config) <= set(REGISTRY[kind].config.fields)
    assert not spec.warnings
    (worker,) = plan(spec, parse_nodes("1x8,1x0")).workers
    assert worker.node_rank == 1


def test_hardware_of_every_type_is_listed_with_rlinfs_env_fallbacks():
    assert sorted(REGISTRY) == ["ADB", "DOSW1", "DualFranka", "Franka", "GimArm", "SO101", "Turtle2", "YAM"]
    assert dict(REGISTRY["Franka"].env_fallbacks) == {"robot_ip": "ROBOT_IP"}
    assert dict(REGISTRY["DualFranka"].env_fallbacks) == {
        "left_robot_ip": "LEFT_ROBOT_IP",
        "right_robot_ip": "RIGHT_ROBOT_IP",
    }


def test_a_hardware_type_rlinf_does_not_register_is_refused_with_the_known_types():
    with pytest.raises(ConfigError) as e:
        load(robot_config("Conveyor", "{node_rank: 1, speed: 3}"))
    (problem,) = e.value.problems
    assert problem.path == "cluster.node_groups[0].hardware.type"
    assert "unknown hardware type 'Conveyor': RLinf refuses" in problem.message
    assert "Known types: ADB, DOSW1, DualFranka, Franka, GimArm, SO101, Turtle2, YAM" in problem.message


def test_an_invalid_robot_entry_gets_one_error_not_a_second_misleading_one():
    text = robot_config("Franka", '{node_rank: 1, robot_ip: "10.0.0.300"}')
    with pytest.raises(ConfigError) as e:
        load(text)
    assert [p.path for p in e.value.problems] == ["cluster.node_groups[0].hardware.configs[0].robot_ip"]
    for broken in ('{robot_ip: "10.0.0.1"}', "{node_rank: one}", "just-text"):
        with pytest.raises(ConfigError) as e:
            load(robot_config("Franka", broken))
        assert len(e.value.problems) == 1 and "out of range" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        load(robot_config("Frank", "{node_rank: 1}"))
    assert len(e.value.problems) == 1


def test_two_configs_of_one_unit_are_an_error_per_type():
    text = robot_config(
        "YAM",
        "{node_rank: 1, left_ip: 10.1.0.1, right_ip: 10.1.0.2}, {node_rank: 1, left_ip: 10.1.0.1, right_ip: 10.1.0.2}",
    )
    with pytest.raises(ConfigError, match=r"this robot \(10.1.0.1, 10.1.0.2\) is already configured by configs\[0\]"):
        load(text)


def test_dosw1_takes_numeric_serials_as_written_with_a_warning():
    spec = load(robot_config("DOSW1", "{node_rank: 1, camera_serials: [0123, 42]}"))
    assert spec.group("hw").hardware[0].config["camera_serials"] == ("0123", "42")
    assert len(spec.warnings) == 2 and "quote it" in spec.warnings[0]


def test_hardware_type_without_hardware_block_is_a_robot_group_whose_units_come_from_the_nodes():
    spec = spec_of(
        "cluster:\n  num_nodes: 1\n  component_placement: {env: {node_group: g, placement: 0}}\n"
        "  node_groups:\n    - {label: g, node_ranks: 0, hardware_type: Franka}\n"
    )
    assert spec.warnings == () and spec.group("g").hardware_type == "Franka" and spec.group("g").hardware == ()


def test_a_role_model_with_keys_from_an_unset_variable_still_loads(monkeypatch):
    """RLinf's SFT and lingbot configs name checkpoints in `actor.model` from variables set only where the job runs
    (`${oc.env:PI05_BASE_CKPT}`); reading the model-parallel sizes there must not resolve them (four configs of
    RLinf's tree were refused when every node-groups config began reading `<role>.model`)."""
    monkeypatch.delenv("RLPLACE_TEST_UNSET_CKPT", raising=False)
    spec = spec_of(
        """\
        cluster:
          num_nodes: 1
          component_placement: {actor: 0-3}
        actor:
          model:
            model_path: ${oc.env:RLPLACE_TEST_UNSET_CKPT}
            tensor_model_parallel_size: 2
        """
    )
    assert spec.component("actor").model_parallel.groups == (
        ("tensor-parallel", 2, "actor.model.tensor_model_parallel_size: 2"),
    )
