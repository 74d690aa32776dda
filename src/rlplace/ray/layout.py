"""A pinned component's layout: from the node each rank runs on, each rank's local index, each node's count and its
index among the component's nodes, and so the torch.distributed variables of every rank (docs/runtime.md,
"torch.distributed rendezvous"). Pure: the driver's rendezvous (`rlplace.ray.rendezvous`) computes them from the
job's state, a worker Ray restarted from the job's record (`rlplace.ray.launch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """A pinned component's shape: per rank its local index; per node its count and its index among the
    component's nodes (node-rank order)."""

    local_rank: dict[int, int]
    per_node: dict[int, tuple[int, int]]  # node rank -> (workers there, group rank)

    @classmethod
    def of(cls, node_ranks: Sequence[int | None]) -> Layout | None:
        """The layout of a component whose rank r runs on node `node_ranks[r]` (None: Ray places some rank)."""
        by_node: dict[int, list[int]] = {}
        for rank, node in enumerate(node_ranks):
            if node is None:
                return None
            by_node.setdefault(node, []).append(rank)
        local = {rank: i for ranks in by_node.values() for i, rank in enumerate(ranks)}
        return cls(local, {n: (len(by_node[n]), g) for g, n in enumerate(sorted(by_node))})

    def variables(self, rank: int, world_size: int, node_rank: int, address: str, port: int) -> dict[str, str]:
        """The rendezvous variables of rank `rank` on node `node_rank`, its master at `address`:`port`."""
        count, group_rank = self.per_node[node_rank]
        return {
            "RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(self.local_rank[rank]),
            "LOCAL_WORLD_SIZE": str(count),
            "NODE_RANK": str(node_rank),
            "GROUP_RANK": str(group_rank),
            "GROUP_WORLD_SIZE": str(len(self.per_node)),
            "MASTER_ADDR": address,
            "MASTER_PORT": str(port),
        }
