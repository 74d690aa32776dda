"""CartPole environments stepped in lock-step, collecting one on-policy rollout at a time.

The policy is a callable, not an object: in a single process it is `Agent.act`, in the placed pipeline
it is a remote call to the eval worker this env worker is paired with. The env side does not care.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rlplace.examples.cartpole_ppo.ppo import gae

#: obs (n, 4) -> (actions, log-probs, values), each of length n.
Policy = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


class EnvPool:
    """`n_envs` CartPole-v1 environments; episodes run across rollouts, returns are tracked per env."""

    def __init__(self, n_envs: int, seed: int):
        self.envs = [gym.make("CartPole-v1") for _ in range(n_envs)]
        self.obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)])
        self._returns = np.zeros(n_envs)

    def collect(
        self, policy: Policy, steps: int, gamma: float, lam: float
    ) -> tuple[dict[str, np.ndarray], list[float]]:
        """Run `steps` steps in every env; returns (flat experience with advantages, finished episode returns)."""
        n = len(self.envs)
        obs = np.zeros((steps, n, self.obs.shape[1]))
        actions = np.zeros((steps, n), dtype=np.int64)
        logp, values, rewards, dones = (np.zeros((steps, n)) for _ in range(4))
        finished: list[float] = []
        for t in range(steps):
            obs[t] = self.obs
            actions[t], logp[t], values[t] = policy(self.obs)
            for i, env in enumerate(self.envs):
                o, r, terminated, truncated, _ = env.step(int(actions[t, i]))
                rewards[t, i] = r
                self._returns[i] += r
                if terminated or truncated:
                    dones[t, i] = 1.0
                    finished.append(float(self._returns[i]))
                    self._returns[i] = 0.0
                    o, _ = env.reset()
                self.obs[i] = o
        last_values = policy(self.obs)[2]
        adv, ret = gae(rewards, values, dones, last_values, gamma, lam)
        batch = {
            "obs": obs.reshape(steps * n, -1),
            "actions": actions.reshape(-1),
            "logp": logp.reshape(-1),
            "advantages": adv.reshape(-1),
            "returns": ret.reshape(-1),
        }
        return batch, finished

    def close(self) -> None:
        for env in self.envs:
            env.close()
