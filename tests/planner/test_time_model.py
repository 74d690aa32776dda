"""The time model (planner/scaling, phase_order, timing): the seconds of one iteration of a plan, as a user reads
them under `rlplace plan --time`. Configs are written as users write them and planned by the real planner."""

from __future__ import annotations

import re
import textwrap

import pytest

from rlplace.config.loader import load_with
from rlplace.config.profile_file import load_profile
from rlplace.config.rlinf_profile import read_whole
from rlplace.errors import ConfigError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan, scaling
from rlplace.planner.figures import gpu_model
from rlplace.planner.phase_order import Block, blocks_of, iteration_seconds, side_by_side
from rlplace.planner.timing import predict
from rlplace.planner.workload import build_workload


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def predicted(tmp_path, config: str, nodes: str, profile: str | None = None):
    path = write(tmp_path, "job.yaml", config)
    spec, whole = load_with(path, read_whole)
    inventory = parse_nodes(nodes)
    planned = plan(spec, inventory)
    costs = load_profile(write(tmp_path, "profile.yaml", profile)) if profile else None
    workload = build_workload(spec, planned, inventory, whole.rlinf, costs)
    return predict(planned, workload, inventory), workload


# --- how a component's time scales -------------------------------------------------------------------------


def test_measured_points_are_kept_and_joined_linearly_in_one_over_gpus():
    curve = scaling.measured({8: 100.0, 32: 40.0})
    assert curve.seconds(8) == 100.0 and curve.seconds(32) == 40.0
    # t = a + b/n through both points: b = 60 / (1/8 - 1/32) = 640, a = 20
    assert curve.seconds(16) == pytest.approx(20 + 640 / 16)
    assert curve.seconds(64) == pytest.approx(20 + 640 / 64)  # beyond: the same line (Amdahl's serial part 20 s)
    assert curve.seconds(4) == pytest.approx(20 + 640 / 4)


def test_one_point_scales_perfectly_and_lines_that_would_break_physics_are_clamped():
    assert scaling.measured({8: 80.0}).seconds(16) == pytest.approx(40.0)
    slower_with_more = scaling.measured({8: 50.0, 16: 60.0})  # more GPUs measured slower: flat beyond, not worse
    assert slower_with_more.seconds(64) == pytest.approx(60.0)
    superlinear = scaling.measured({8: 100.0, 16: 40.0})  # a < 0: beyond, perfect scaling from the last point
    assert superlinear.seconds(32) == pytest.approx(20.0)


def test_rlinf_rules_give_rlinfs_numbers():
    # Megatron: 12 GPUs measured 60 s; at 6 GPUs scale 2 -> 60 x 2 / 1.2 = 100 s; counts not allowed: no time.
    curve = scaling.megatron(60.0, 12, {6, 3})
    assert curve.seconds(12) == 60.0 and curve.seconds(6) == pytest.approx(100.0)
    assert curve.seconds(3) == pytest.approx(60 * 4 / 1.4) and curve.seconds(4) is None
    # rollout: flat while 4-GPU engines x 50 requests hold 100 requests, linear below
    rollout = scaling.rollout(30.0, 12, 4, 50, 100)
    assert [rollout.seconds(n) for n in (12, 8, 4)] == [30.0, 30.0, 90.0]
    assert scaling.megatron_valid_counts(16, 2, group_size=4, batch=8, minibatches=2) == {2, 4, 8}
    # embodied: env_num 24 over n instances, seconds by envs per instance, interpolated, none above the largest
    env = scaling.embodied({6: 1.0, 12: 3.0}, 24, 4, 1, aligned=True)
    assert env.seconds(4) == 1.0 and env.seconds(2) == 3.0 and env.seconds(3) == pytest.approx(1 + 2 * 2 / 6)
    assert env.seconds(1) is None


def test_gpu_models_are_found_by_the_names_nodes_report():
    assert gpu_model("NVIDIA-A100-SXM4-40GB").memory_gb == 40
    assert gpu_model("A100").memory_gb == 80 and gpu_model("H100").speed > 3 * gpu_model("A800").speed
    assert gpu_model("RTX 4090").name == "RTX4090" and gpu_model("TPUv9").source == "assumed"


# --- the order of phases -----------------------------------------------------------------------------------


def test_blocks_take_turns_inside_and_stream_or_add_side_by_side():
    assert side_by_side([10.0, 4.0, 2.0], batches=4, streamed=True) == pytest.approx(10 + 6 / 4)
    assert side_by_side([10.0, 4.0], batches=4, streamed=False) == 14.0
    sets = {"env": frozenset({0}), "rollout": frozenset({1, 2}), "actor": frozenset({0, 1, 2})}
    roots = blocks_of(sets)
    assert roots == (Block(("actor",), (Block(("env",)), Block(("rollout",)))),)  # RLinf's embodied hybrid
    own = {"env": 8.0, "rollout": 4.0, "actor": 100.0}
    assert iteration_seconds(roots, own, 8, True) == pytest.approx(100 + 8 + 4 / 8)
    partial = blocks_of({"a": frozenset({0, 1}), "b": frozenset({1, 2})})  # overlap without nesting: turns
    assert partial == (Block(("a", "b")),)


# --- predict on plans ----------------------------------------------------------------------------------------

REASONING = """
    cluster:
      num_nodes: 2
      component_placement:
        {placement}
    runner: {{task_type: reasoning}}
    algorithm: {{group_size: 4, n_minibatches: 2, recompute_logprobs: true}}
    data: {{rollout_batch_size: 16}}
    rollout: {{max_running_requests: 32, tensor_parallel_size: 1}}
    actor: {{model: {{tensor_model_parallel_size: 2}}}}
    profile_data: {{actor_cost: 40, rollout_cost: 30, inference_cost: 6}}
"""


def test_collocated_rlinf_config_takes_the_sum_of_its_costs(tmp_path):
    p, workload = predicted(tmp_path, REASONING.format(placement="actor,rollout,reward: all"), "2x4")
    assert p.mode == "collocated" and p.seconds == pytest.approx(40 + 30 + 6)
    assert [s.name for s in workload.stages] == ["rollout", "inference", "actor"]
    assert {s.name: s.gpus for s in p.stages} == {"rollout": 8, "inference": 8, "actor": 8}  # inference on actor's
    assert any("model size 14 GB" in a for a in p.assumed)


def test_disaggregated_rlinf_config_streams_its_group_batches_and_pays_weight_sync(tmp_path):
    placement = "{actor: 0-3, rollout: 4-7, reward: all}"
    config = (
        REASONING.format(placement=placement)
        .replace("actor_cost: 40", "actor_cost: 40")
        .replace("num_nodes: 2", "num_nodes: 2\n      model_bytes: 10G")
    )
    p, _ = predicted(tmp_path, config, "2x4:H100")
    own = {s.name: s.compute for s in p.stages}
    # costs measured on the written GPUs; inference runs on the actor's (no inference placed): actor + inference
    # take turns, beside rollout; 16 group batches stream
    assert own == {"rollout": 30.0, "inference": 6.0, "actor": 40.0}
    assert p.compute == pytest.approx(46 + 30 / 16)
    # node 1 pulls 10 GB from node 0 over its 4 InfiniBand NICs (4 x 50 GB/s)
    assert p.weight_sync == pytest.approx(10 / 200) and p.seconds == pytest.approx(p.compute + 0.05)


def test_a_profile_file_rescales_by_gpu_speed_and_charges_offload_of_shared_gpus(tmp_path):
    config = """
        cluster:
          train_worker_num: 4
          eval_worker_num: 4
          env_each_gpu_num: 0
          placement: {strategy: colocate}
    """
    profile = """
        measured: {gpus: 4, gpu: A800}
        components:
          train: {seconds: 10, memory_gb: 24}
          eval: {seconds: 6, memory_gb: 12}
    """
    p, _ = predicted(tmp_path, config, "1x4:H100", profile)
    speed = gpu_model("A800").speed / gpu_model("H100").speed
    swap = {"train": 2 * 24 / 50, "eval": 2 * 12 / 50}  # offload + reload over PCIe Gen5 (50 GB/s)
    assert {s.name: s.compute for s in p.stages} == pytest.approx({"train": 10 * speed, "eval": 6 * speed})
    assert {s.name: s.swap for s in p.stages} == pytest.approx(swap)
    assert p.seconds == pytest.approx(16 * speed + sum(swap.values()))


def test_memory_that_does_not_fit_makes_the_plan_infeasible_naming_the_gpu(tmp_path):
    config = """
        cluster:
          train_worker_num: 2
          eval_worker_num: 2
          env_each_gpu_num: 0
          placement: {strategy: colocate}
          enable_offload: false
    """
    profile = """
        measured: {gpus: 2}
        components:
          train: {seconds: 10, memory_gb: 16}
          eval: {seconds: 6, memory_gb: 12}
    """
    p, _ = predicted(tmp_path, config, "1x2:RTX4090", profile)
    assert p.seconds is None
    assert p.problems == ("eval 12 GB + train 16 GB do not fit together in RTX4090's 24 GB (node 0) (offload off)",)


def test_a_count_the_rules_have_no_time_for_is_said(tmp_path):
    # the costs as RLinf profiles them, collocated on all 8 GPUs; then a plan of the actor on 6 GPUs: trainer batch
    # 16 x 4 / 2 = 32 takes data-parallel sizes dividing 8, so actor counts 2, 4, 8 (tensor parallel 2)
    _, workload = predicted(tmp_path, REASONING.format(placement="actor,rollout,reward: all"), "2x4")
    spec, _ = load_with(
        write(tmp_path, "six.yaml", REASONING.format(placement="{actor: 0-5, rollout: 6-7, reward: all}")), None
    )
    inventory = parse_nodes("2x4")
    p = predict(plan(spec, inventory), workload, inventory)
    assert p.seconds is None
    assert p.problems == (  # inference, not placed, runs on the actor's 6 GPUs too
        "inference on 6 GPU(s): no time for that count (profile_data.inference_cost: 6 on 8 GPUs (RLinf's Megatron "
        "rule); counts: 2, 4, 8)",
        "actor on 6 GPU(s): no time for that count (profile_data.actor_cost: 40 on 8 GPUs (RLinf's Megatron rule); "
        "counts: 2, 4, 8)",
    )


def test_rlinf_keys_its_tool_reads_are_required_and_checked(tmp_path):
    missing = REASONING.format(placement="actor,rollout,reward: all").replace("rollout_cost: 30, ", "")
    with pytest.raises(ConfigError, match=re.escape("profile_data.rollout_cost: RLinf's auto-placement tool reads")):
        predicted(tmp_path, missing, "2x4")
    negative = REASONING.format(placement="actor,rollout,reward: all").replace("actor_cost: 40", "actor_cost: -4")
    with pytest.raises(ConfigError, match=re.escape("profile_data.actor_cost: must be seconds, a number > 0, got -4")):
        predicted(tmp_path, negative, "2x4")
    indivisible = REASONING.format(placement="actor,rollout,reward: all").replace(
        "n_minibatches: 2", "n_minibatches: 3"
    )
    with pytest.raises(ConfigError, match=re.escape("must divide by algorithm.n_minibatches 3")):
        predicted(tmp_path, indivisible, "2x4")
