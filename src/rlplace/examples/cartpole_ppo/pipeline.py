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

Node loss: train rank 0 checkpoints after every iteration. When a node is lost and a hot spare or a
replacement node takes over (rlplace relaunches the node's workers there; the train worker reloads the
checkpoint in `on_replaced`), the interrupted iteration is redone from that checkpoint on every train
worker, after the train workers rejoin their torch.distributed group (if any) and a fresh weight sync;
`RunResult.failover` says what happened and how many seconds it cost. Without a spare the job's
NodeLostError ends the run, unless the config makes the components on the lost node elastic
(`rlplace demo --elastic`, `elastic_spec`): then the job shrinks them instead (a call that was running on a
removed worker raises RanksRemovedError), every train worker reloads the checkpoint in `on_resized`, the
iteration is redone at the new size, and when a node joins later the components grow back (the same redo).
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlplace.errors import ConfigError, Problem, RanksRemovedError
from rlplace.examples.cartpole_ppo.budget import Budget
from rlplace.examples.cartpole_ppo.curve import RewardCurve
from rlplace.examples.cartpole_ppo.ppo import PPOConfig
from rlplace.examples.cartpole_ppo.workers import EnvWorker, EvalWorker, TrainWorker
from rlplace.lifecycle import EventKind
from rlplace.model import JobSpec

if TYPE_CHECKING:
    from rlplace.runtime.sync import Transport

__all__ = ["COMPONENTS", "Budget", "RunResult", "check_config", "elastic_spec", "run_pipeline"]

#: The components this pipeline launches; a config must plan all four.
COMPONENTS = ("train", "eval", "env", "buffer")


def elastic_spec(spec: JobSpec) -> JobSpec:
    """`spec` with every component of this pipeline that can change size on its own elastic, from 1 worker up to
    its planned size (`rlplace demo --elastic`): the pipeline runs at any size of each (train replicas are
    identical, an env worker uses eval worker `rank % n`, writes go to the shards there are). Ranges the config
    writes itself are kept; followers (an env on eval's GPUs, shards beside train) change with their leader."""
    from rlplace.config.elastic import extend, resizable

    return extend(spec, {c: {"min": 1} for c in resizable(spec) if c in COMPONENTS}, origin="--elastic")


def check_config(spec: JobSpec) -> None:
    """Refuse, before any cluster starts, a config that does not plan every component this pipeline launches.

    The pools dialect always does (buffer shards come with the train workers); a node-groups config must
    name its components train, eval, env and buffer.
    """
    names = [c.name for c in spec.components] + (["buffer"] if spec.dialect == "pools" else [])
    _require_components(names, source=spec.source)


def _require_components(names: list[str], *, source: str | None = None) -> None:
    missing = [c for c in COMPONENTS if c not in names]
    if missing:
        raise ConfigError(
            Problem(
                path="cluster.component_placement",
                value=", ".join(names),
                file=source,
                message=f"the CartPole pipeline needs components {', '.join(COMPONENTS)}; this config has "
                f"{', '.join(names) or 'none'} and lacks {', '.join(missing)}: name them so in component_placement "
                "(`rlplace demo --list-configs` lists configs that run as shipped)",
            )
        )


@dataclass
class RunResult:
    curve: RewardCurve = field(default_factory=RewardCurve)
    placed: list[Any] = field(default_factory=list)  # rlplace.ray.worker.WorkerPlacement, train..buffer
    offload: dict[str, dict[str, int]] = field(default_factory=dict)  # "train:0" -> counts
    phase_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("rollout", "train", "sync"), 0.0))
    hook_calls: int = 0  # offload hook calls the phase engine made (0 with offload disabled)
    buffer_local_fraction: float = 1.0
    seconds: float = 0.0
    stopped: bool = False  # ended by run_pipeline's `stop` before its budget
    failover: list[str] = field(default_factory=list)  # what the job's node events meant for training
    seconds_lost: float = 0.0  # wall time of iterations thrown away by node losses, recovery included
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
    job: Any,
    budget: Budget,
    progress: Progress | None = None,
    checkpoint_dir: str | None = None,
    on_start: Callable[[], None] | None = None,
    *,
    distributed: bool | None = None,
    may_stop: Callable[[], bool] | None = None,
    stop: Callable[[], bool] | None = None,
) -> RunResult:
    """Train PPO on CartPole with the components of `job` (an `rlplace.connect` Job); returns the result.

    The job's plan must have the components train, eval, env and buffer. `checkpoint_dir` must be readable
    from every train node (shared storage on a real cluster; default: a temporary directory, enough for a
    single machine). `on_start` is called when the first iteration starts. `distributed`: all-reduce the
    gradients and broadcast the weights with torch.distributed (default: where torch is installed).
    `may_stop`: asked before stopping early once solved (`rlplace demo --kill-node` holds the run until its
    node is gone, so the loss is shown even when training is quick). `stop`: asked after each finished iteration;
    True ends the run there, solved or not (`rlplace demo --stop-when-handled`: once the job has dealt with the node).
    """
    _require_components(job.plan.components)
    start = time.perf_counter()
    if distributed is None:
        distributed = importlib.util.find_spec("torch") is not None
    folder = checkpoint_dir or tempfile.mkdtemp(prefix="rlplace-ckpt-")
    scratch = None if checkpoint_dir else folder  # removed afterwards
    checkpoint = str(Path(folder) / "train.npz")
    try:
        return _run(job, budget, progress, checkpoint, on_start, start, distributed, may_stop, stop)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(
    job: Any,
    budget: Budget,
    progress: Progress | None,
    checkpoint: str,
    on_start: Callable[[], None] | None,
    start: float,
    distributed: bool,
    may_stop: Callable[[], bool] | None,
    stop: Callable[[], bool] | None,
) -> RunResult:
    from rlplace.runtime import BufferShard, Phases, ShardRouter, sync_weights

    ppo = PPOConfig()
    ppo_args = asdict(ppo)
    n_env = len(job.plan.by_component("env"))
    envs_each = max(1, budget.total_envs // max(1, n_env))
    rows = n_env * envs_each * budget.steps  # experience per iteration
    train = job.launch("train", TrainWorker, ppo_args, budget.seed, checkpoint, distributed)
    evals = job.launch("eval", EvalWorker, ppo_args, budget.seed)
    envs = job.launch("env", EnvWorker, envs_each, budget.seed)
    n_shards = len(job.plan.by_component("buffer"))
    # Shards hold one iteration of experience (writers fill them evenly), so training stays on-policy.
    shards = job.launch("buffer", BufferShard, capacity=-(-rows // n_shards), seed=budget.seed)
    router = ShardRouter.from_group(shards)  # follows the shards when the buffer changes size

    transport: Transport = "collective" if distributed else "object_store"
    phases = Phases.for_job(job)  # sees the groups launched above; hooks run only with offload enabled
    result = RunResult()
    result.placed = [p for group in (train, evals, envs, shards) for p in group.placements()]
    transport = "collective" if distributed else "object_store"
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
    train.call("save_checkpoint", rank=0)
    draws = shards.call("rng_state")  # the shards' sampling RNG at the checkpoint
    if on_start:
        on_start()
    it = reported = resized = 0
    # Node events and resizes up to here are dealt with. Counted at the check, not when the next iteration starts:
    # a takeover that lands between the two (during the checkpoint) is handled by the next iteration's check.
    seen, sizes = len(job.events), len(job.resizes)
    while it < budget.iterations:
        t0 = time.perf_counter()
        removed: RanksRemovedError | None = None
        try:
            with phases.phase("rollout"):
                evals.call("start_iteration", it)
                finished = envs.call(
                    "rollout", evals.actors, router, budget.steps, ppo.gamma, ppo.gae_lambda, iteration=it
                )
            t1 = time.perf_counter()
            with phases.phase("train"):
                per_train = len(envs.workers) * envs_each * budget.steps // len(train.workers)
                _train_step(train, router, per_train, all_reduce=distributed)
            t2 = time.perf_counter()
            sync()
            # The shards' sampling RNG after this iteration's draws (read before the check below: a shard relaunched
            # on a spare after it would answer with its seed's, not the state the redo must start from).
            drawn = shards.call("rng_state")
        except Exception as e:
            if isinstance(e, RanksRemovedError):
                removed = e  # calls ran on workers a shrink took out: their part of the iteration is missing
            elif len(job.events) == seen and not job.check_nodes():
                raise  # nothing happened to the job's nodes: a real error
            job.wait_for_takeovers()  # a worker called a lost worker: NodeLostError unless one was replaced
            if not _handled(job, seen, sizes):
                raise
        if _handled(job, seen, sizes):  # workers changed mid-iteration: redo it from the checkpoint
            router = _recover(job, train, envs, shards, draws, distributed, moved=_taken_over(job, seen))
            seen, sizes = len(job.events), len(job.resizes)
            sync()
            lost = time.perf_counter() - t0
            result.seconds_lost += lost
            result.failover += [str(e) for e in job.events[reported:]]
            result.failover += [str(e) for e in job.resizes[resized:]]
            reported, resized = len(job.events), len(job.resizes)
            if removed is not None:
                result.failover.append(f"calls lost on removed workers: {', '.join(removed.removed)}")
            result.failover.append(f"iteration {it + 1} redone from the last checkpoint: {lost:.1f} s of training lost")
            continue
        seen, sizes = len(job.events), len(job.resizes)
        t3 = time.perf_counter()
        train.call("save_checkpoint", rank=0)
        draws = drawn
        for phase, seconds in zip(("rollout", "train", "sync"), (t1 - t0, t2 - t1, t3 - t2), strict=True):
            result.phase_seconds[phase] += seconds
        result.curve.add_iteration([r for returns in finished for r in returns])
        it += 1
        if progress:
            progress(it, result.curve)
        if budget.stop_when_solved and result.curve.solved and (may_stop is None or may_stop()):
            break
        if stop is not None and stop():
            result.stopped = it < budget.iterations
            break
    if result.failover:  # workers moved: where they run now
        result.placed = [p for group in (train, evals, envs, shards) for p in group.placements()]
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


def _taken_over(job: Any, seen: int) -> bool:
    """Did a spare or replacement node take over one of the job's nodes since event number `seen`?"""
    return any(e.kind in (EventKind.SPARE, EventKind.REPLACEMENT) for e in job.events[seen:])


def _handled(job: Any, seen: int, sizes: int) -> bool:
    """Did the job's workers change since event number `seen` and resize number `sizes`: a takeover, or an
    elastic component shrinking off a lost node or growing back?"""
    return _taken_over(job, seen) or len(job.resizes) > sizes


def _recover(job: Any, train: Any, envs: Any, shards: Any, draws: list[Any], distributed: bool, *, moved: bool) -> Any:
    """After a takeover (`moved`) or a resize, before the interrupted iteration is redone as a replay:

    - the interrupted rollouts end first (a call that failed on one env worker leaves the others stepping, acting
      and writing: left running, they would write into the redo's shards and draw from the eval workers' RNG
      after it was put back);
    - every train worker goes back to the last checkpoint, its minibatch RNG included (after a resize their
      `on_resized` did it, and re-formed their torch.distributed group at the new size; after a takeover they
      rejoin one group here: the relaunched worker is a new process, and rank 0 may have moved);
    - every buffer shard's sampling RNG goes back to the checkpoint's (`draws`, by rank: a shard relaunched on a
      spare would start from its seed; a grown one takes a survivor's);
    - a new router (a shard may now live on the spare) is returned.

    The caller re-syncs the eval workers; env and eval workers rewind to the iteration's start themselves when
    it starts again."""
    from rlplace.ray.launch import answer
    from rlplace.runtime import ShardRouter

    envs.call("__ray_call__", answer)  # an actor runs its calls in order: this returns after the interrupted ones
    train.call("restore")  # after the interrupted train calls, for the same reason (they may sample the shards)
    shards.call_sharded("set_rng_state", [draws[rank % len(draws)] for rank in range(len(shards.workers))])
    if distributed and moved:
        master = job.master("train")
        train.call("init_group", master.address if master else None, master.port if master else None)
    return ShardRouter.from_group(shards)


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
