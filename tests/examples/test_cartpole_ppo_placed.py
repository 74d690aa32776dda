"""The demo pipeline under every shipped strategy config, on the session's simulated cluster (short budget).

Each config runs as shipped (the session cluster has the demo's shape), and every worker must report
from inside Ray that it ran on the node and GPUs its plan gave it. Placement does not depend on how gradients and
weights travel, so the configs run the numpy path (driver average, object store: half the CPU, no worker imports
torch), except colocate-offload, where offload moves the very tensors the collective sync reads: it runs the default
path (torch.distributed where torch is installed). The demo's own config runs in test_cartpole_ppo_distributed.py
(`make test-long`), twice (the torch path against the numpy path, result for result), and is checked there the same
way; the disaggregated config runs through `rlplace run --address` in test_cli_profile_out.py, which checks the
table it prints of where each worker ran. The default and manual-pools configs run in `make test-long`: that
workers land where a plan says, pools and GPU sharing included, is test_ray_strategies.py's in `make test`.
"""

from __future__ import annotations

import pytest

import rlplace
from rlplace.examples.cartpole_ppo import CONFIGS, DEMO_CONFIG, DEMO_NODES, config_names
from rlplace.examples.cartpole_ppo.pipeline import Budget, RunResult, run_pipeline
from rlplace.inventory import parse_nodes
from rlplace.plan import Plan

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ITERATIONS = 2


def test_demo_cluster_has_the_session_cluster_shape(ray_cluster):
    """The configs are sized for the demo's cluster; testing them here is only honest if the shapes agree."""
    demo = parse_nodes(DEMO_NODES)
    assert [(n.num_gpus, n.gpu_model) for n in demo.nodes] == [
        (n.num_gpus, n.gpu_model) for n in ray_cluster.inventory.nodes
    ]


#: Run in `make test-long` only (the module docstring says why).
LONG = ("default", "manual-pools")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.long] if name in LONG else [])
        for name in config_names()
        if name not in (DEMO_CONFIG.stem, "disaggregate")
    ],
)
def test_pipeline_runs_where_the_plan_says(ray_cluster, name):
    with rlplace.connect(CONFIGS / f"{name}.yaml", export_path=None) as job:
        plan = job.plan
        distributed = None if plan.settings.enable_offload else False  # None: torch.distributed where installed
        result = run_pipeline(job, Budget(iterations=ITERATIONS, stop_when_solved=False), distributed=distributed)

    assert result.iterations == ITERATIONS
    assert_ran_where_planned(plan, result)


def assert_ran_where_planned(plan: Plan, result: RunResult) -> None:
    """Every planned worker ran, on its node and GPUs, with its node group's env vars; train sampled its own node's
    buffer shard; offload moved what it should around every phase, or nothing where it is off."""
    assert result.curve.returns, "no episode finished: the env workers did not step"
    placed = {(p.component, p.rank): p for p in result.placed}
    assert sorted(placed) == sorted((w.component, w.rank) for w in plan.workers), "every planned worker ran"
    for w in plan.workers:
        p = placed[(w.component, w.rank)]
        assert p.mismatch is None, p.mismatch
        if w.node_rank is not None:
            assert (p.node_rank, sorted(p.gpus)) == (w.node_rank, sorted(w.gpus)), w.name
        assert p.env_vars == w.env_vars, f"{w.name} did not get its node group's env vars"
    if all(w.node_rank is not None for w in plan.by_component("train")):
        assert result.buffer_local_fraction == 1.0, "train workers must sample their own node's shard"
    if plan.settings.enable_offload:
        _assert_offloaded_around_every_phase(result.offload)
    else:
        assert result.hook_calls == 0
        assert all(c["offloads"] == c["reloads"] == 0 for c in result.offload.values())


def _assert_offloaded_around_every_phase(offload: dict[str, dict[str, int]]) -> None:
    """Eval is offloaded after each rollout; train's optimizer and parameters around each sync, reloaded
    before each train phase. (A worker touching offloaded state fails the run, so order is checked too.)"""
    syncs = ITERATIONS + 1  # one before the first rollout
    assert {k.split(":")[0] for k in offload} == {"train", "eval"}
    for key, counts in offload.items():
        if key.startswith("eval:"):
            assert counts["offloads"] == ITERATIONS, (key, counts)
            assert counts["reloads"] == ITERATIONS - 1, (key, counts)  # nothing to reload before the first
        else:
            assert counts["offloads"] == 3 * syncs, (key, counts)  # adam m and v before, params after
            assert counts["reloads"] == 3 * ITERATIONS, (key, counts)


def test_a_config_without_the_pipelines_components_is_refused_before_launching(ray_cluster):
    config = {"cluster": {"component_placement": {"actor": {"node_group": "cluster", "placement": "0-1"}}}}
    with rlplace.connect(config, export_path=None) as job:
        with pytest.raises(rlplace.ConfigError, match="lacks train, eval, env, buffer"):
            run_pipeline(job, Budget(iterations=1))
        assert job.groups == {}
