"""The Ray options launch_ray_actor derives from a plan's Worker row (pure: no cluster needed)."""

from __future__ import annotations

import pytest

from rlplace.errors import ConfigError, PlacementError
from rlplace.plan import Worker
from rlplace.ray.launch import actor_options


def worker(**kw) -> Worker:
    base = dict(component="eval", rank=1, world_size=2, node_rank=1, gpus=(2,), gpu_fraction=1 / 3, num_cpus=0.5,
                group="global_pool", bundle=4)  # fmt: skip
    return Worker(**{**base, **kw})


def test_colocated_worker_takes_its_share_with_explicit_cpus_and_name():
    opts = actor_options(worker(), namespace="ns", scheduling_strategy="STRATEGY")
    assert opts == {
        "name": "rlplace:eval:1",
        "namespace": "ns",
        "num_cpus": 0.5,
        "num_gpus": pytest.approx(1 / 3),
        "max_restarts": 0,
        "scheduling_strategy": "STRATEGY",
    }  # no runtime_env: it would cost a fresh worker process


def test_group_env_vars_and_interpreter_go_into_runtime_env():
    opts = actor_options(
        worker(env_vars={"GLOO_SOCKET_IFNAME": "eth0"}, python="/opt/venv/openpi/bin/python3"),
        namespace="ns",
        scheduling_strategy=None,
        max_restarts=3,
        max_task_retries=-1,
    )
    assert opts["runtime_env"] == {
        "py_executable": "/opt/venv/openpi/bin/python3",
        "env_vars": {"GLOO_SOCKET_IFNAME": "eth0"},
    }
    assert (opts["max_restarts"], opts["max_task_retries"]) == (3, -1)
    assert "scheduling_strategy" not in opts


def test_gpu_less_worker_with_an_env_also_hides_the_gpus():
    opts = actor_options(
        worker(gpus=(), gpu_fraction=0.0, env_vars={"A": "1"}), namespace="ns", scheduling_strategy=None
    )
    assert opts["num_gpus"] == 0
    assert opts["runtime_env"]["env_vars"] == {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "1", "A": "1"}


def test_unpinned_worker_requests_its_gpus_without_a_strategy():
    opts = actor_options(worker(node_rank=None, gpus=(), gpu_fraction=1.0, bundle=None), namespace="ns",
                         scheduling_strategy=None)  # fmt: skip
    assert opts["num_gpus"] == 1.0 and "scheduling_strategy" not in opts


def test_multi_gpu_worker_owns_whole_gpus_and_a_shared_multi_gpu_slot_is_refused():
    assert (
        actor_options(worker(gpus=(0, 1), gpu_fraction=1.0), namespace="n", scheduling_strategy=None)["num_gpus"] == 2.0
    )
    with pytest.raises(PlacementError, match=r"0.5 of each of GPUs \[0, 1\]"):
        actor_options(worker(gpus=(0, 1), gpu_fraction=0.5), namespace="n", scheduling_strategy=None)


def test_extra_options_pass_but_cannot_override_the_plan():
    opts = actor_options(worker(), namespace="n", scheduling_strategy=None, options={"max_concurrency": 4})
    assert opts["max_concurrency"] == 4
    with pytest.raises(ConfigError, match=r"num_gpus, scheduling_strategy come from the plan"):
        actor_options(
            worker(), namespace="n", scheduling_strategy=None, options={"num_gpus": 1, "scheduling_strategy": 1}
        )
