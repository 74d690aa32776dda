"""Replay-buffer shards beside their train workers, and the routing that keeps sampling node-local.

RLightning's reason for buffer shards: "Buffer shards must be collocated with their corresponding Train
workers to avoid unnecessary cross-node copies during sample()". The planner puts one shard (component
"buffer") on every node holding train workers under pool strategies; this module makes the traffic
follow: a reader samples from the shard on its own node, a writer writes to the shard on its node, or,
on a node without one (eval/env nodes when disaggregated), spreads its writes over the shards in turn.

Locality is measured, not assumed: every shard compares the reader's Ray node id with its own and counts
local and remote samples; `ShardRouter.stats()` adds them up.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rlplace.groups import Group
from rlplace.ray.worker import here, node_id


class BufferShard:
    """One shard: a bounded FIFO of experience items with uniform sampling (with replacement).

    Launched as the workers of component "buffer" (`job.launch("buffer", BufferShard, capacity=...)`).
    """

    def __init__(self, capacity: int = 100_000, seed: int = 0):
        if capacity <= 0:
            raise ValueError(f"BufferShard capacity must be positive, got {capacity}")
        self._items: deque[Any] = deque(maxlen=capacity)
        self._rng = random.Random(seed)
        self._node_id = node_id()
        self._counts = {"written": 0, "local": 0, "remote": 0}

    def node_id(self) -> str:
        return self._node_id

    def add(self, items: Sequence[Any]) -> int:
        """Append items (oldest dropped beyond capacity); returns the shard's size."""
        self._items.extend(items)
        self._counts["written"] += len(items)
        return len(self._items)

    def sample(self, n: int, reader_node_id: str) -> list[Any]:
        """`n` items drawn uniformly (empty while the shard is empty); counted local or remote."""
        if not self._items:
            return []
        batch = self._rng.choices(self._items, k=n)
        self._counts["local" if reader_node_id == self._node_id else "remote"] += len(batch)
        return batch

    def stats(self) -> dict[str, int]:
        return {**self._counts, "size": len(self._items)}

    def rng_state(self) -> tuple[object, ...]:
        """The state of the sampling RNG: a driver that redoes a training step keeps it with its checkpoint, so
        that the redone step draws what the step would have drawn (a shard relaunched elsewhere starts afresh)."""
        return self._rng.getstate()

    def set_rng_state(self, state: tuple[object, ...]) -> None:
        """Draw on from a state `rng_state()` returned (this shard's, or another's to replace it)."""
        self._rng.setstate(state)


#: Per process: the running turn for each set of shards. A router is unpickled afresh for every call it is
#: passed to, so the turn cannot live in the router.
_TURNS: dict[tuple[str, ...], Iterator[int]] = {}


def _turns(shards: Group) -> Iterator[int]:
    key = shards.actor_ids
    if key not in _TURNS:
        _TURNS[key] = itertools.count(_first_turn())
    return _TURNS[key]


def _first_turn() -> int:
    """Writer k of a component starts at shard k, so shard-less writers fill the shards evenly from the
    first write; a process that is not an rlplace worker (the driver) starts at a shard of its own."""
    from rlplace.errors import RlplaceError
    from rlplace.ray.worker import placement

    try:
        return placement().rank
    except RlplaceError:
        return zlib.crc32(here().worker_id.encode())


def _node_ids(group: Group) -> list[str]:
    """Where every shard of a launched "buffer" group runs (Ray node ids, rank order)."""
    if not group.actors:
        raise ValueError("a ShardRouter needs at least one buffer shard; the buffer group is empty")
    return group.get([group.cluster.call(a, "node_id") for a in group.actors], "node_id")


@dataclass(frozen=True)
class SampleStats:
    """Samples served across all shards, split by whether the reader was on the shard's node."""

    local: int
    remote: int
    written: int
    sizes: tuple[int, ...]

    @property
    def local_fraction(self) -> float:
        total = self.local + self.remote
        return self.local / total if total else 1.0


class ShardRouter:
    """Picks the shard for the calling process by its node. Picklable: hand it to workers as an argument.

    >>> router = ShardRouter.from_group(buffer_group)
    >>> evals.call("rollout", router)        # inside: router.write(transitions)
    >>> train.call("train_step", router)     # inside: batch = router.sample(256)

    Built from the group (`from_group`), it follows the group's shards: after the buffer changed size (an
    elastic train or buffer resize, a lost node's shrink) or a shard moved to a spare, the router the driver
    holds asks the new shards where they run before it is next handed to a worker or used.
    """

    def __init__(self, group: Group, node_ids: Sequence[str]):
        self.group = group
        self._by_node = {node: rank for rank, node in enumerate(node_ids)}
        self._ids = group.actor_ids  # the shards `node_ids` belong to

    @classmethod
    def from_group(cls, group: Group) -> ShardRouter:
        """Ask every shard of a launched "buffer" group where it runs."""
        return cls(group, _node_ids(group))

    def _follow(self) -> None:
        """The group's shards changed since the router last looked: ask the new ones where they run."""
        ids = self.group.actor_ids
        if ids != self._ids:
            self._by_node = {node: rank for rank, node in enumerate(_node_ids(self.group))}
            self._ids = ids

    def __getstate__(self) -> dict[str, Any]:
        self._follow()  # a worker gets the shards there are now
        return dict(self.__dict__)

    def _pick(self, node: str) -> int:
        """The rank of this node's shard, or of the next shard in turn when the node has none."""
        self._follow()
        rank = self._by_node.get(node)
        if rank is None:
            rank = next(_turns(self.group)) % len(self.group.actors)
        return rank

    def write(self, items: Sequence[Any]) -> int:
        """Add items to this node's shard (or the next in turn); returns that shard's size."""
        rank = self._pick(node_id())
        ref = self.group.cluster.call(self.group.actors[rank], "add", list(items))
        return self.group.get([ref], "add", ranks=[rank])[0]

    def sample(self, n: int) -> list[Any]:
        """`n` items from this node's shard (or the next in turn: counted remote)."""
        node = node_id()
        rank = self._pick(node)
        ref = self.group.cluster.call(self.group.actors[rank], "sample", n, node)
        return self.group.get([ref], "sample", ranks=[rank])[0]

    def stats(self) -> SampleStats:
        self._follow()
        counts = self.group.get([self.group.cluster.call(a, "stats") for a in self.group.actors], "stats")
        return SampleStats(
            local=sum(c["local"] for c in counts),
            remote=sum(c["remote"] for c in counts),
            written=sum(c["written"] for c in counts),
            sizes=tuple(c["size"] for c in counts),
        )
