"""The driver of the placed PPO pipeline: launch the components, iterate rollout -> train -> sync.

This is the part users copy when they wire their own RL codebase into rlplace: every placement decision
is in the cluster YAML, so the loop below never mentions a node or a GPU. Per iteration:

1. rollout (phase "rollout": eval reloads its model before, offloads it after): every env worker steps
   its environments with actions from its eval worker and writes the experience to the buffer shards;
2. train (phase "train": train reloads parameters and optimizer before): every train worker samples
   its node's shard; gradients are averaged over train workers for every minibatch step: all-reduced
   by the train workers themselves with torch.distributed where torch is installed (their component
   group, one `init_component_group()` call each), else gathered and averaged by the driver (numpy);
3. sync (phase "sync": train offloads its optimizer before, its parameters after): train rank 0's
   weights go to every eval worker: broadcast over a torch.distributed group where torch is installed,
   else as one object-store object.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlplace.errors import ConfigError, Problem
from rlplace.examples.cartpole_ppo.budget import Budget
from rlplace.examples.cartpole_ppo.curve import RewardCurve
from rlplace.examples.cartpole_ppo.ppo import PPOConfig
from rlplace.examples.cartpole_ppo.workers import EnvWorker, EvalWorker, TrainWorker

__all__ = ["COMPONENTS", "Budget", "RunResult", "run_pipeline"]

#: The components this pipeline launches; a config must plan all four.
COMPONENTS = ("train", "eval", "env", "buffer")


@dataclass
class RunResult:
    curve: RewardCurve = field(default_factory=RewardCurve)
    placed: list[Any] = field(default_factory=list)  # rlplace.ray.worker.WorkerPlacement, train..buffer
    offload: dict[str, dict[str, int]] = field(default_factory=dict)  # "train:0" -> counts
    phase_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("rollout", "train", "sync"), 0.0))
    hook_calls: int = 0  # offload hook calls the phase engine made (0 with offload disabled)
    buffer_local_fraction: float = 1.0
    seconds: float = 0.0
    gradients: str = ""  # how gradients were averaged: "all-reduce (gloo)", "driver (numpy)", "one train worker"
    all_reduces: int = 0  # per train worker
    all_reduce_bytes: int = 0  # per train worker
    sync_transport: str = ""  # "collective (gloo)" or "object_store"
    syncs: int = 0
    sync_bytes: int = 0  # weight bytes every eval worker received, over all syncs

    @property
    def iterations(self) -> int:
        return len(self.curve.averages)


Progress = Callable[[int, RewardCurve], None]


def run_pipeline(
    job: Any, budget: Budget, progress: Progress | None = None, *, distributed: bool | None = None
) -> RunResult:
    """Train PPO on CartPole with the components of `job` (an `rlplace.connect` Job); returns the result.

    The job's plan must have the components train, eval, env and buffer. `distributed`: all-reduce the
    gradients and broadcast the weights with torch.distributed (default: where torch is installed).
    """
    from rlplace.runtime.buffer import BufferShard, ShardRouter
    from rlplace.runtime.phases import Phases
    from rlplace.runtime.sync import sync_weights

    missing = [c for c in COMPONENTS if not job.plan.by_component(c)]
    if missing:
        raise ConfigError(
            Problem(
                path="cluster",
                value=", ".join(job.plan.components),
                message=f"the CartPole pipeline needs components {', '.join(COMPONENTS)}; the plan lacks "
                f"{', '.join(missing)} (in the node-groups dialect, name them so in component_placement)",
            )
        )
    start = time.perf_counter()
    ppo = PPOConfig()
    ppo_args = asdict(ppo)
    n_env = len(job.plan.by_component("env"))
    envs_each = max(1, budget.total_envs // max(1, n_env))
    rows = n_env * envs_each * budget.steps  # experience per iteration
    train = job.launch("train", TrainWorker, ppo_args, budget.seed)
    evals = job.launch("eval", EvalWorker, ppo_args, budget.seed)
    envs = job.launch("env", EnvWorker, envs_each, budget.seed)
    n_shards = len(job.plan.by_component("buffer"))
    # Shards hold one iteration of experience (writers fill them evenly), so training stays on-policy.
    shards = job.launch("buffer", BufferShard, capacity=-(-rows // n_shards), seed=budget.seed)
    router = ShardRouter.from_group(shards)
    per_train = rows // len(train.workers)

    if distributed is None:
        distributed = importlib.util.find_spec("torch") is not None
    transport = "collective" if distributed else "object_store"
    phases = Phases.for_job(job)  # sees the groups launched above; hooks run only with offload enabled
    result = RunResult()
    result.placed = [p for group in (train, evals, envs, shards) for p in group.placements()]
    if distributed:
        (backend,) = set(train.call("init_group"))
        result.gradients = f"all-reduce ({backend})" if len(train.workers) > 1 else "one train worker"
    else:
        result.gradients = "driver (numpy)" if len(train.workers) > 1 else "one train worker"

    def sync() -> None:
        with phases.phase("sync"):
            report = sync_weights(train, [evals], transport=transport)
        result.sync_transport = f"collective ({report.backend})" if report.backend else report.transport
        result.syncs += 1
        result.sync_bytes += report.bytes

    sync()
    for it in range(budget.iterations):
        t0 = time.perf_counter()
        with phases.phase("rollout"):
            finished = envs.call("rollout", evals.actors, router, budget.steps, ppo.gamma, ppo.gae_lambda)
        t1 = time.perf_counter()
        with phases.phase("train"):
            _train_step(train, router, per_train, all_reduce=distributed)
        t2 = time.perf_counter()
        sync()
        t3 = time.perf_counter()
        for phase, seconds in zip(("rollout", "train", "sync"), (t1 - t0, t2 - t1, t3 - t2), strict=True):
            result.phase_seconds[phase] += seconds
        result.curve.add_iteration([r for returns in finished for r in returns])
        if progress:
            progress(it + 1, result.curve)
        if budget.stop_when_solved and result.curve.solved:
            break
    for group in (train, evals):
        for w, counts in zip(group.workers, group.call("offload_stats"), strict=True):
            result.offload[f"{w.component}:{w.rank}"] = counts
    if distributed and len(train.workers) > 1:
        comm = train.call("comm_stats", rank=0)
        result.all_reduces, result.all_reduce_bytes = comm["all_reduces"], comm["bytes"]
    result.hook_calls = len(phases.events)
    result.buffer_local_fraction = router.stats().local_fraction
    result.seconds = time.perf_counter() - start
    return result


def _train_step(train: Any, router: Any, per_train: int, *, all_reduce: bool) -> None:
    """One PPO update over all train workers; gradients averaged per minibatch step when there are several:
    all-reduced among the workers (`all_reduce`, their torch.distributed group), else by the driver."""
    steps = train.call("prepare", router, per_train)
    if not all(steps):
        return  # a shard was still empty (first iteration on a node no env writes to)
    if all_reduce or len(train.workers) == 1:
        train.call("update", min(steps))
        return
    for step in range(min(steps)):
        grads = [g for g, _ in train.call("grad", step)]
        train.call("apply", np.mean(grads, axis=0))
