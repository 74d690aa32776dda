"""The demo's two communication paths: torch.distributed (all-reduce among the train workers, collective weight
sync) where torch is installed, and the numpy path (driver averages, object store) without it. These are also the
demo config's runs of test_cartpole_ppo_placed.py: every worker where its plan put it.

`make test-long` runs it (about 18 s of CPU, the longest test of `make test`'s Ray half). `make test` checks the
parts on their own: the demo's torch path and where its workers ran (tests/docs/test_demo_output.py, on the
demo's cluster), the all-reduce bit for bit (tests/runtime/test_resize_on_ray.py), the collective sync against
the object store (tests/runtime/test_collective_on_ray.py) and every other config's placement
(test_cartpole_ppo_placed.py)."""

from __future__ import annotations

import pytest
from tests.examples.test_cartpole_ppo_placed import assert_ran_where_planned

import rlplace
from rlplace.examples.cartpole_ppo import DEMO_CONFIG
from rlplace.examples.cartpole_ppo.pipeline import Budget, RunResult, run_pipeline
from rlplace.examples.cartpole_ppo.ppo import Agent, PPOConfig
from rlplace.examples.cartpole_ppo.report import communication

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long]


def _run(distributed: bool) -> RunResult:
    with rlplace.connect(DEMO_CONFIG, export_path=None) as job:
        result = run_pipeline(job, Budget(iterations=3, stop_when_solved=False), distributed=distributed)
    assert_ran_where_planned(job.plan, result)
    return result


def test_all_reduce_path_trains_exactly_like_the_driver_average(ray_cluster):
    """8-25 s (up to 44 s under load): the demo config twice, three iterations each."""
    by_numpy = _run(distributed=False)  # first: the demo config's placement is checked with or without torch
    pytest.importorskip("torch")
    by_torch = _run(distributed=True)

    assert (by_torch.gradients, by_torch.sync_transport) == ("all-reduce (gloo)", "collective (gloo)")
    assert (by_numpy.gradients, by_numpy.sync_transport) == ("driver (numpy)", "object_store")
    assert by_torch.all_reduces > 0 and by_torch.all_reduce_bytes > 0 and by_numpy.all_reduces == 0
    assert by_torch.syncs == by_numpy.syncs == 4  # one before the first rollout, one per iteration
    params = Agent(PPOConfig().hidden).params.nbytes
    assert by_torch.sync_bytes == by_torch.syncs * params  # the float64 parameters, once per eval worker
    # Two train workers: the all-reduced mean (a + b) / 2 is bit for bit numpy's, so training is identical.
    assert by_torch.curve.returns == by_numpy.curve.returns and by_torch.curve.returns
    assert "all-reduce (gloo) among the train workers" in communication(by_torch)
    assert "weight sync: object_store, 4 syncs" in communication(by_numpy)
