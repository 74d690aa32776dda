"""A tiny but real PPO in numpy: actor and critic MLPs, GAE, the clipped objective, Adam.

Why numpy and not torch: the demo must install in well under two minutes on a fresh machine and run on
two CPU cores; CartPole needs a 4-64-64-2 network, which numpy trains in seconds. Every parameter of
both networks lives in ONE flat float64 vector (`Agent.params`); the layer matrices are views into it.
That makes the distributed parts trivial and honest: weight sync ships one array, gradient averaging
across train workers adds arrays, and offloading a worker's state moves whole arrays off and back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OBS_DIM = 4  # CartPole-v1 observation size
N_ACTIONS = 2


@dataclass(frozen=True)
class PPOConfig:
    """Hyper-parameters; the defaults solve CartPole-v1 (see tests/examples/test_ppo_core.py)."""

    hidden: int = 64
    lr: float = 1e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    epochs: int = 6
    minibatches: int = 4
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


def _layer_shapes(hidden: int, out: int) -> list[tuple[int, ...]]:
    return [(OBS_DIM, hidden), (hidden,), (hidden, hidden), (hidden,), (hidden, out), (out,)]


def parameter_bytes(hidden: int = PPOConfig.hidden) -> int:
    """The bytes of the actor's and critic's parameters (one float64 vector): what each weight sync ships."""
    shapes = _layer_shapes(hidden, N_ACTIONS) + _layer_shapes(hidden, 1)
    return sum(int(np.prod(s)) for s in shapes) * np.dtype(np.float64).itemsize


class Agent:
    """Actor (logits over actions) and critic (state value), two tanh MLPs over one flat parameter vector."""

    def __init__(self, hidden: int = 64, seed: int = 0):
        self.hidden = hidden
        self._shapes = _layer_shapes(hidden, N_ACTIONS) + _layer_shapes(hidden, 1)
        self.params = np.zeros(sum(int(np.prod(s)) for s in self._shapes))
        rng = np.random.default_rng(seed)
        gains = (np.sqrt(2), np.sqrt(2), 0.01) * 2  # small policy head: start near uniform
        for i, w in enumerate(self.weights()):
            if w.ndim == 2:
                w[...] = _orthogonal(rng, w.shape, gains[i // 2])

    def weights(self, params: np.ndarray | None = None) -> list[np.ndarray]:
        """Views of `params` (default: this agent's) shaped as the 12 layer tensors, actor first."""
        flat = self.params if params is None else params
        out, at = [], 0
        for shape in self._shapes:
            n = int(np.prod(shape))
            out.append(flat[at : at + n].reshape(shape))
            at += n
        return out

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions for a batch of observations; returns (actions, their log-probs, values)."""
        w = self.weights()
        logits = _mlp(obs, w[:6])[0]
        logp_all = _log_softmax(logits)
        u = rng.random(len(obs))
        actions = (np.exp(logp_all).cumsum(axis=1) < u[:, None]).sum(axis=1).clip(0, N_ACTIONS - 1)
        return actions, logp_all[np.arange(len(obs)), actions], self.value(obs)

    def value(self, obs: np.ndarray) -> np.ndarray:
        return _mlp(obs, self.weights()[6:])[0][:, 0]

    def loss_and_grad(self, batch: dict[str, np.ndarray], cfg: PPOConfig) -> tuple[np.ndarray, dict[str, float]]:
        """The PPO loss gradient (flat, like `params`) on one minibatch, and a few statistics.

        batch: obs, actions, logp (at collection time), advantages, returns.
        """
        obs, actions, n = batch["obs"], batch["actions"], len(batch["obs"])
        adv = batch["advantages"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        grad = np.zeros_like(self.params)
        w, g = self.weights(), self.weights(grad)

        logits, cache = _mlp(obs, w[:6])
        logp_all = _log_softmax(logits)
        probs = np.exp(logp_all)
        logp = logp_all[np.arange(n), actions]
        ratio = np.exp(logp - batch["logp"])
        clipped = np.clip(ratio, 1 - cfg.clip, 1 + cfg.clip)
        # d(-min(r*A, clip(r)*A))/dlogp: flows only where the unclipped term is the minimum.
        active = ratio * adv <= clipped * adv
        dlogp = -(active * adv * ratio) / n
        dlogits = dlogp[:, None] * (np.eye(N_ACTIONS)[actions] - probs)
        entropy = -(probs * logp_all).sum(axis=1)
        dlogits += cfg.ent_coef * probs * (logp_all + entropy[:, None]) / n  # -c * dH/dlogits
        _mlp_backward(cache, w[:6], dlogits, g[:6])

        values, vcache = _mlp(obs, w[6:])
        err = values[:, 0] - batch["returns"]
        _mlp_backward(vcache, w[6:], (cfg.vf_coef * err / n)[:, None], g[6:])

        stats = {
            "policy_loss": float(-np.minimum(ratio * adv, clipped * adv).mean()),
            "value_loss": float(0.5 * (err**2).mean()),
            "entropy": float(entropy.mean()),
            "clip_frac": float((np.abs(ratio - 1) > cfg.clip).mean()),
        }
        return grad, stats


class Adam:
    """Adam over a flat vector, with global gradient-norm clipping (PPO's usual 0.5)."""

    def __init__(self, size: int, lr: float, max_grad_norm: float, betas: tuple[float, float] = (0.9, 0.999)):
        self.lr, self.max_grad_norm, self.betas = lr, max_grad_norm, betas
        self.m, self.v, self.t = np.zeros(size), np.zeros(size), 0

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        norm = float(np.linalg.norm(grad))
        if norm > self.max_grad_norm:
            grad = grad * (self.max_grad_norm / norm)
        b1, b2 = self.betas
        self.t += 1
        # In place: the train worker's offload stash holds these very arrays (a rebinding would be lost).
        self.m *= b1
        self.m += (1 - b1) * grad
        self.v *= b2
        self.v += (1 - b2) * grad**2
        m_hat, v_hat = self.m / (1 - b1**self.t), self.v / (1 - b2**self.t)
        params -= self.lr * m_hat / (np.sqrt(v_hat) + 1e-8)


def gae(
    rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_values: np.ndarray, gamma: float, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over a (T, n_envs) rollout; returns (advantages, returns).

    `dones[t]` is True when the episode ended at step t (terminated; truncation is treated the same,
    which costs CartPole nothing at these returns).
    """
    adv = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[1])
    for t in reversed(range(len(rewards))):
        next_v = last_values if t == len(rewards) - 1 else values[t + 1]
        live = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_v * live - values[t]
        running = delta + gamma * lam * live * running
        adv[t] = running
    return adv, adv + values


def minibatches(n: int, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """`count` disjoint random index sets covering range(n) (sizes differ by at most one)."""
    return np.array_split(rng.permutation(n), count)


def _orthogonal(rng: np.random.Generator, shape: tuple[int, ...], gain: float) -> np.ndarray:
    a = rng.standard_normal((max(shape), min(shape)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    return gain * (q if shape[0] >= shape[1] else q.T)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _mlp(x: np.ndarray, w: list[np.ndarray]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    h1 = np.tanh(x @ w[0] + w[1])
    h2 = np.tanh(h1 @ w[2] + w[3])
    return h2 @ w[4] + w[5], (x, h1, h2)


def _mlp_backward(cache: tuple[np.ndarray, ...], w: list[np.ndarray], dout: np.ndarray, g: list[np.ndarray]) -> None:
    """Accumulate d(loss)/d(weights) into the views `g`, given d(loss)/d(output)."""
    x, h1, h2 = cache
    g[4] += h2.T @ dout
    g[5] += dout.sum(axis=0)
    dh2 = (dout @ w[4].T) * (1 - h2**2)
    g[2] += h1.T @ dh2
    g[3] += dh2.sum(axis=0)
    dh1 = (dh2 @ w[2].T) * (1 - h1**2)
    g[0] += x.T @ dh1
    g[1] += dh1.sum(axis=0)
