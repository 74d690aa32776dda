"""A buffer shard's sampling RNG can be put back (a driver redoing a training step after a node's workers moved):
the redone draws are the ones the step made, also on a shard relaunched elsewhere. No Ray needed."""

from __future__ import annotations

import pytest

from rlplace.runtime import buffer
from rlplace.runtime.buffer import BufferShard


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch):
    monkeypatch.setattr(buffer, "node_id", lambda: "node-a")


def test_a_redone_step_draws_what_the_step_drew():
    shard = BufferShard(capacity=8, seed=3)
    shard.add(list(range(8)))
    saved = shard.rng_state()
    first = shard.sample(16, "node-a")
    shard.set_rng_state(saved)
    assert shard.sample(16, "node-a") == first


def test_a_relaunched_shard_given_the_saved_state_draws_like_the_one_it_replaces():
    """A shard relaunched on a spare starts from its seed; given the state saved with the checkpoint it draws on as
    the lost one would have, not the draws the lost one made first."""
    lost = BufferShard(capacity=8, seed=3)
    lost.add(list(range(8)))
    lost.sample(16, "node-a")  # the iterations before the loss
    saved = lost.rng_state()
    expected = lost.sample(16, "node-a")
    spare = BufferShard(capacity=8, seed=3)
    spare.add(list(range(8)))
    assert spare.sample(16, "node-a") != expected  # from its seed: other items
    spare = BufferShard(capacity=8, seed=3)
    spare.add(list(range(8)))
    spare.set_rng_state(saved)
    assert spare.sample(16, "node-a") == expected
