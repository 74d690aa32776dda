"""The PPO update, split into gradient and apply steps so several train workers can average gradients.

One train worker calls `update(batch)`. Data-parallel train workers each `prepare` their own node's
experience, then for every minibatch step the driver gathers `grad(k)` from all of them, averages, and
hands the mean to `apply` on every worker; identical starting weights plus identical applied
gradients keep the replicas identical without any weight broadcast between them.
"""

from __future__ import annotations

import numpy as np

from rlplace.examples.cartpole_ppo.ppo import Adam, Agent, PPOConfig, minibatches


class Learner:
    """An Agent, its Adam state, and the minibatch schedule of the current update."""

    def __init__(self, cfg: PPOConfig, seed: int):
        self.cfg = cfg
        self.agent = Agent(cfg.hidden, seed=seed)
        self.optim = Adam(len(self.agent.params), cfg.lr, cfg.max_grad_norm)
        self.rng = np.random.default_rng(seed + 1)  # the minibatch schedule's (checkpointed with the weights)
        self._batch: dict[str, np.ndarray] = {}
        self._schedule: list[np.ndarray] = []

    def prepare(self, batch: dict[str, np.ndarray]) -> int:
        """Take this update's experience; returns the number of minibatch steps (epochs x minibatches)."""
        n = len(batch["obs"])
        self._batch = batch
        self._schedule = [idx for _ in range(self.cfg.epochs) for idx in minibatches(n, self.cfg.minibatches, self.rng)]
        return len(self._schedule)

    def grad(self, step: int) -> tuple[np.ndarray, dict[str, float]]:
        idx = self._schedule[step]
        return self.agent.loss_and_grad({k: v[idx] for k, v in self._batch.items()}, self.cfg)

    def apply(self, grad: np.ndarray) -> None:
        self.optim.step(self.agent.params, grad)

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """A whole PPO update on this worker alone; returns the last minibatch's statistics."""
        stats: dict[str, float] = {}
        for step in range(self.prepare(batch)):
            grad, stats = self.grad(step)
            self.apply(grad)
        return stats
