"""The demo's workers replay an iteration that is redone after a node's workers moved (a drain, a loss): the train
checkpoint brings the minibatch schedule back, the eval and env workers their action draws and episodes. Without
it the redo drew other random numbers and PPO went down another trajectory, one of which ended the demo's drain run
unsolved. No Ray needed (the workers' Ray calls are stood in for)."""

from __future__ import annotations

import numpy as np
import pytest

from rlplace.examples.cartpole_ppo import workers
from rlplace.examples.cartpole_ppo.ppo import PPOConfig
from rlplace.examples.cartpole_ppo.workers import EnvWorker, EvalWorker, TrainWorker

PPO = vars(PPOConfig())


def _batch(n: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "obs": rng.normal(size=(n, 4)),
        "actions": rng.integers(0, 2, n),
        "logp": np.full(n, np.log(0.5)),
        "advantages": rng.normal(size=n),
        "returns": rng.normal(size=n),
    }


def test_a_train_worker_restored_from_the_checkpoint_draws_the_same_minibatches(tmp_path):
    """Also a worker relaunched elsewhere, which starts from its seed: it draws on from the checkpoint's state."""
    worker = TrainWorker(PPO, 0, str(tmp_path / "train.npz"))
    worker.learner.prepare(_batch())  # the iterations before the checkpoint
    worker.save_checkpoint()
    worker.learner.prepare(_batch())  # the interrupted iteration
    expected = [idx.copy() for idx in worker.learner._schedule]
    worker.restore()
    worker.learner.prepare(_batch())
    assert all(np.array_equal(a, b) for a, b in zip(worker.learner._schedule, expected, strict=True))
    relaunched = TrainWorker(PPO, 0, str(tmp_path / "train.npz"))
    relaunched.restore()
    relaunched.learner.prepare(_batch())
    assert all(np.array_equal(a, b) for a, b in zip(relaunched.learner._schedule, expected, strict=True))


class _Remote:
    """An eval worker as an env worker calls it (`policy.act.remote(obs)`), in this process."""

    def __init__(self, worker: EvalWorker):
        self.act = self
        self._worker = worker

    def remote(self, obs: np.ndarray):
        return self._worker.act(obs)


class _Router:
    def __init__(self):
        self.written: list[np.ndarray] = []

    def write(self, rows: list[np.ndarray]) -> None:
        self.written.append(np.stack(rows))


@pytest.fixture
def env_and_eval(monkeypatch):
    monkeypatch.setattr(workers, "_my_rank", lambda: 0)
    monkeypatch.setattr(workers.ray, "get", lambda value: value)
    return EnvWorker(4, 0), EvalWorker(PPO, 0)


def _iteration(env: EnvWorker, policy: EvalWorker, iteration: int) -> tuple[list[float], np.ndarray]:
    router = _Router()
    policy.start_iteration(iteration)
    finished = env.rollout([_Remote(policy)], router, 64, 0.99, 0.95, iteration=iteration)
    return finished, router.written[0]


def test_a_redone_rollout_replays_the_episodes_and_actions_of_the_first(env_and_eval):
    env, policy = env_and_eval
    _iteration(env, policy, 0)
    finished, rows = _iteration(env, policy, 1)  # interrupted: the redo must not go on from where it got
    again, replayed = _iteration(env, policy, 1)
    assert again == finished and np.array_equal(replayed, rows)
    _, after = _iteration(env, policy, 2)  # the next iteration goes on from the redo's end
    assert not np.array_equal(after, rows)
