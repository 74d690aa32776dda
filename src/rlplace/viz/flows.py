"""The data that crosses nodes in an RL pipeline, as the picture draws it.

Two streams matter for placement: weights from the trainers to the rollout workers after each update,
and experience from the rollout side into the replay buffer shards. A stream between workers on the
same node stays in that node's object store, so only cross-node streams are returned: they are what a
placement should minimise and what a user wants to see.

Routing mirrors rlplace's runtime (`rlplace.runtime.sync` and `rlplace.runtime.buffer`): weights go
from train rank 0 to every eval worker (Ray moves the object once per node, the arrow counts the eval
workers it serves); a producer writes experience to the buffer shard on its own node, or, on a node
without a shard, to every shard in turn (one arrow per shard node). Experience comes from env workers,
or from eval workers when the plan has none. Components are matched by role so both dialects work:
train/actor, eval/rollout, env, buffer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rlplace.plan import Worker

TRAIN_ROLES = ("train", "actor")
EVAL_ROLES = ("eval", "rollout")
ENV_ROLES = ("env",)
BUFFER_ROLES = ("buffer",)

WEIGHTS = "weights"
EXPERIENCE = "experience"


@dataclass(frozen=True)
class Flow:
    """`count` workers on node `dst` (weights) or `src` (experience) exchange data across two nodes."""

    kind: str  # WEIGHTS | EXPERIENCE
    src: int
    dst: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.kind} x{self.count}"


def cross_node_flows(workers: Sequence[Worker]) -> tuple[Flow, ...]:
    """Every cross-node weight-sync and experience stream, merged per (kind, src, dst), sorted."""
    nodes: dict[str, list[tuple[int, int]]] = {}  # role -> (rank, node) of its pinned workers
    for w in workers:
        if w.node_rank is not None:
            nodes.setdefault(_role(w.component), []).append((w.rank, w.node_rank))
    counts: Counter[tuple[str, int, int]] = Counter()
    trainers = sorted(nodes.get("train", []))
    if trainers:
        source = trainers[0][1]
        counts.update((WEIGHTS, source, node) for _, node in nodes.get("eval", []) if node != source)
    shard_nodes = {node for _, node in nodes.get("buffer", [])}
    shards = sorted(shard_nodes)
    for _, node in nodes.get("env") or nodes.get("eval", []):
        if node not in shard_nodes:
            counts.update((EXPERIENCE, node, shard) for shard in shards)
    return tuple(Flow(kind, src, dst, n) for (kind, src, dst), n in sorted(counts.items()))


def _role(component: str) -> str:
    for role, names in (("train", TRAIN_ROLES), ("eval", EVAL_ROLES), ("env", ENV_ROLES), ("buffer", BUFFER_ROLES)):
        if component in names:
            return role
    return "other"
