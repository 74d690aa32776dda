"""The pipeline's worker classes, launched by rlplace as components train, eval, env (and buffer shards).

- TrainWorker: the PPO learner. Samples its node's buffer shard, computes and applies gradients, serves
  its weights for sync. Where torch is installed the train workers form their component's
  torch.distributed group (`init_component_group`, Gloo here) and all-reduce every gradient among
  themselves; without torch the driver averages them (numpy).
- EvalWorker: the rollout policy. Receives the weights (by a torch.distributed broadcast where torch is
  installed, `weight_tensors()`; else through the object store, `set_weights()`), answers `act(obs)` for
  its paired env worker.
- EnvWorker: CartPole environments. Steps them with actions from its eval worker and writes the
  experience (with advantages) to the buffer shard on its node, or spreads it over the shards.

Offload: RLightning's hooks (`rlplace.phases`) are implemented for real on numpy state: offloading
moves a worker's arrays out of its process into Ray's object store and drops them; reloading brings them
back. A worker that touches offloaded state fails loudly, so a missing or misordered hook cannot go
unnoticed, and every move is counted (`offload_stats`). On a GPU the same hooks would move tensors to
pinned host memory (`rlplace.runtime.offload.Offloader`).

Node loss: train rank 0 writes a checkpoint (weights, Adam state and the minibatch RNG) after every iteration; a
TrainWorker that rlplace relaunches on a hot spare reloads it in `on_replaced`, before its first call, and the
pipeline restores every train worker from it to redo the interrupted iteration (`restore`). The redo replays the
iteration that was interrupted: env and eval workers go back to the episodes and action RNG they had at its start
(`rollout(..., iteration)`, `start_iteration`) and the driver puts the buffer shards' sampling RNG back. Why replay:
a redo that draws other random numbers sends PPO down another trajectory, and not every trajectory solves CartPole
within the demo's budget (one that a drain's redo happened to pick peaked near 195 and fell back to 119). When an
elastic train component changes size instead (a lost node without a spare, a node joining later), every train
worker, new ones included, reloads it in `on_resized` and re-forms the torch.distributed group at the new size
there; an env worker takes its new rank (which eval worker it uses).
"""

from __future__ import annotations

import copy
import io
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import ray

from rlplace.examples.cartpole_ppo.learner import Learner
from rlplace.examples.cartpole_ppo.ppo import Agent, PPOConfig
from rlplace.examples.cartpole_ppo.rollout import EnvPool
from rlplace.output_files import write_file


class Stash:
    """Named numpy arrays of an object moved to Ray's object store and back, counted.

    `owner` holds the arrays as attributes; `offload(name)` replaces one with None (its memory is freed
    once nothing else refers to it) and keeps an object-store reference; `reload(name)` restores it.
    Offloading an already offloaded array, or reloading a resident one, does nothing and is not counted.
    """

    def __init__(self, owner: object):
        self._owner = owner
        self._refs: dict[str, ray.ObjectRef] = {}
        self.counts = {"offloads": 0, "reloads": 0, "bytes_offloaded": 0, "bytes_reloaded": 0}

    def offload(self, *names: str) -> None:
        for name in names:
            array = getattr(self._owner, name)
            if array is None:
                continue
            self._refs[name] = ray.put(array)
            setattr(self._owner, name, None)
            self.counts["offloads"] += 1
            self.counts["bytes_offloaded"] += array.nbytes

    def reload(self, *names: str) -> None:
        for name in names:
            ref = self._refs.pop(name, None)
            if ref is None:
                continue
            array = ray.get(ref).copy()  # the object store's copy is read-only
            setattr(self._owner, name, array)
            self.counts["reloads"] += 1
            self.counts["bytes_reloaded"] += array.nbytes

    def replace(self, name: str, array: np.ndarray) -> None:
        """Set an array whether it is resident or offloaded (an offloaded one stays offloaded)."""
        if name in self._refs:
            self._refs[name] = ray.put(array)
        else:
            setattr(self._owner, name, array)

    def value(self, name: str) -> np.ndarray:
        """The array, resident or offloaded (a checkpoint reads it without moving it)."""
        return ray.get(self._refs[name]) if name in self._refs else self.resident(name)

    def resident(self, name: str) -> np.ndarray:
        array = getattr(self._owner, name)
        if array is None:
            raise RuntimeError(f"{name} is offloaded; the reload hook must run before it is used")
        return array


def _my_rank() -> int:
    """This worker's rank in its component, from the placement rlplace gave it."""
    from rlplace import worker_placement

    return worker_placement().rank


class TrainWorker:
    """PPO learner replica. Every replica starts from the same seed and applies the same averaged
    gradients, so replicas stay identical without a weight broadcast between them."""

    def __init__(self, ppo: dict[str, Any], seed: int, checkpoint: str | None = None, distributed: bool = False):
        self.learner = Learner(PPOConfig(**ppo), seed)
        self.params: np.ndarray | None = self.learner.agent.params
        self.adam_m: np.ndarray | None = self.learner.optim.m
        self.adam_v: np.ndarray | None = self.learner.optim.v
        self.stash = Stash(self)
        self.world_size = 1  # train workers in the torch.distributed group (init_group)
        self.comm = {"all_reduces": 0, "bytes": 0}
        self.checkpoint = checkpoint  # a file every train worker can read (shared storage on a real cluster)
        self.distributed = distributed  # the train workers all-reduce over torch.distributed (init_group)
        self.replaced_by: str | None = None

    def init_group(self, master_addr: str | None = None, master_port: int | None = None) -> str:
        """Join the train component's torch.distributed group (one call: rlplace set the rendezvous). After a
        node loss moved rank 0, the survivors rejoin at the new master the driver passes in."""
        from rlplace.runtime import destroy_component_group, init_component_group

        destroy_component_group()  # nothing to do on the first call
        group = init_component_group(master_addr=master_addr, master_port=master_port)
        self.world_size = group.world_size
        return group.backend

    # Node loss (rlplace.ray.failover.watcher): checkpoint after each iteration, reload it when relaunched elsewhere.
    def save_checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        params, adam_m, adam_v = (self.stash.value(name) for name in ("params", "adam_m", "adam_v"))
        rng = json.dumps(self.learner.rng.bit_generator.state)  # every replica's: they draw alike
        saved = io.BytesIO()
        step = np.array(self.learner.optim.t)
        np.savez(saved, step=step, rng=np.array(rng), params=params, adam_m=adam_m, adam_v=adam_v)
        write_file(self.checkpoint, saved.getvalue())  # whole or not at all, never through a link

    def restore(self) -> bool:
        """Load the last checkpoint (False when there is none yet: the worker keeps its initial weights)."""
        if self.checkpoint is None or not os.path.exists(self.checkpoint):
            return False
        with np.load(self.checkpoint) as saved:
            for name in ("params", "adam_m", "adam_v"):
                self.stash.replace(name, saved[name].copy())
            self.learner.optim.t = int(saved["step"])
            self.learner.rng.bit_generator.state = json.loads(str(saved["rng"]))
        return True

    def on_replaced(self, event: Any) -> None:
        """rlplace relaunched this worker after its node was lost: carry on from the last checkpoint."""
        self.restore()
        self.replaced_by = f"{event.kind} {event.address}"

    def on_resized(self, event: Any) -> None:
        """The train component changed size (rlplace.ResizeEvent): every worker, new ones too, carries on from the
        last checkpoint, and the group is formed again at the new size (every rank calls this at once)."""
        self.restore()
        if self.distributed:
            self.init_group()

    def prepare(self, router: Any, n: int) -> int:
        """Sample `n` rows from this node's shard; returns the number of minibatch steps (0: no data yet)."""
        rows = router.sample(n)
        if not rows:
            return 0
        table = np.stack(rows)
        batch = {
            "obs": table[:, :4],
            "actions": table[:, 4].astype(np.int64),
            "logp": table[:, 5],
            "advantages": table[:, 6],
            "returns": table[:, 7],
        }
        return self.learner.prepare(batch)

    def grad(self, step: int) -> tuple[np.ndarray, dict[str, float]]:
        self._attach()
        return self.learner.grad(step)

    def apply(self, grad: np.ndarray) -> None:
        self._attach()
        self.learner.apply(grad)

    def update(self, steps: int) -> dict[str, float]:
        """All minibatch steps at once; with several train workers each gradient is all-reduced (mean) first."""
        stats: dict[str, float] = {}
        for step in range(steps):
            grad, stats = self.grad(step)
            if self.world_size > 1:
                self._all_reduce_mean(grad)
            self.apply(grad)
        return stats

    def _all_reduce_mean(self, grad: np.ndarray) -> None:
        import torch
        import torch.distributed as dist

        tensor = torch.from_numpy(grad)  # shares memory: the mean lands in `grad`
        dist.all_reduce(tensor)
        tensor /= self.world_size
        self.comm["all_reduces"] += 1
        self.comm["bytes"] += grad.nbytes

    def comm_stats(self) -> dict[str, int]:
        return dict(self.comm)

    def get_weights(self) -> np.ndarray:
        return self.stash.resident("params")

    def weight_tensors(self) -> list[Any]:
        """The weights as torch tensors sharing the arrays' memory (collective weight sync reads them)."""
        import torch

        return [torch.from_numpy(self.stash.resident("params"))]

    def _attach(self) -> None:
        """Point the learner at the resident arrays (a reload creates new ones)."""
        self.learner.agent.params = self.stash.resident("params")
        self.learner.optim.m = self.stash.resident("adam_m")
        self.learner.optim.v = self.stash.resident("adam_v")

    # Offload hooks (docs/runtime.md, "Phases and offload hooks"; called by job.phase when offload is enabled).
    def reload_model_param_and_grad(self, load_grad: bool = True, load_optimizer: bool = True) -> None:
        self.stash.reload("params", *(("adam_m", "adam_v") if load_optimizer else ()))

    def offload_model_optimizer(self) -> None:
        self.stash.offload("adam_m", "adam_v")

    def offload_model_param_and_grad(self, offload_grad: bool = True, offload_optimizer: bool = False) -> None:
        # Gradients are not kept between steps here, so there is nothing of theirs to move.
        self.stash.offload("params", *(("adam_m", "adam_v") if offload_optimizer else ()))

    def offload_stats(self) -> dict[str, int]:
        return dict(self.stash.counts)


class EvalWorker:
    """The rollout policy: a copy of the agent that only acts, refreshed by weight sync."""

    def __init__(self, ppo: dict[str, Any], seed: int):
        self.agent = Agent(PPOConfig(**ppo).hidden, seed=seed)
        self.params: np.ndarray | None = self.agent.params
        self.rng = np.random.default_rng(seed)
        self.stash = Stash(self)
        self._incoming: np.ndarray | None = None
        self._start: tuple[int, Mapping[str, Any]] | None = None  # (iteration, action RNG state at its start)

    def start_iteration(self, iteration: int) -> None:
        """Before `iteration`'s rollout: remember the action RNG; when the iteration is redone (a node's workers
        moved meanwhile), draw its actions again from where it started."""
        if self._start is not None and self._start[0] == iteration:
            self.rng.bit_generator.state = self._start[1]
        else:
            self._start = (iteration, self.rng.bit_generator.state)

    def set_weights(self, params: np.ndarray) -> None:
        self.stash.replace("params", np.array(params))

    def weight_tensors(self) -> list[Any]:
        """Where collective weight sync writes: the resident parameters in place, or, while they are
        offloaded, a fresh array that `weights_updated()` then hands to the stash."""
        import torch

        if self.params is None:
            self._incoming = np.empty(self.agent.params.shape)
            return [torch.from_numpy(self._incoming)]
        return [torch.from_numpy(self.params)]

    def weights_updated(self) -> None:
        if self._incoming is not None:
            self.stash.replace("params", self._incoming)
            self._incoming = None

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.agent.params = self.stash.resident("params")
        return self.agent.act(obs, self.rng)

    def reload_eval_model(self) -> None:
        self.stash.reload("params")

    def offload_eval_model(self) -> None:
        self.stash.offload("params")

    def offload_stats(self) -> dict[str, int]:
        return dict(self.stash.counts)


class EnvWorker:
    """`n_envs` CartPole environments driven by one eval worker; experience goes to the buffer shards."""

    def __init__(self, n_envs: int, seed: int):
        self.rank = _my_rank()
        self.pool = EnvPool(n_envs, seed + 1000 * self.rank)  # every worker its own episodes
        self._start: tuple[int, EnvPool] | None = None  # (iteration, the environments at its start)

    def on_resized(self, event: Any) -> None:
        """The env component changed size: the rank (which eval worker to use) may be another now."""
        self.rank = _my_rank()

    def rollout(
        self, policies: list[Any], router: Any, steps: int, gamma: float, lam: float, iteration: int | None = None
    ) -> list[float]:
        """One rollout with the eval worker `policies[rank % len]`; returns the returns of finished episodes.

        `iteration`: the pipeline's iteration; a second rollout for the same one (the iteration is redone after a
        node's workers moved) starts from the environments as they were at its first, so the redo replays it."""
        if iteration is not None:
            if self._start is not None and self._start[0] == iteration:
                self.pool = copy.deepcopy(self._start[1])
            else:
                self._start = (iteration, copy.deepcopy(self.pool))
        policy = policies[self.rank % len(policies)]
        batch, finished = self.pool.collect(lambda obs: ray.get(policy.act.remote(obs)), steps, gamma, lam)
        table = np.column_stack([batch["obs"], batch["actions"], batch["logp"], batch["advantages"], batch["returns"]])
        router.write(list(table))
        return finished
