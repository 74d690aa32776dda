"""Buffer shards: CPU-only workers of component `buffer`, pinned to nodes.

Under pool strategies a shard lives on every node holding train workers, so `sample()` from a train
worker stays node-local (RLightning's alignment constraint); under strategy default one shard per GPU
node (at most one per train worker), pinned by node affinity rather than placement groups.
"""

from __future__ import annotations

from rlplace.inventory import Inventory
from rlplace.planner.builder import Block, PlanBuilder, gather

#: Where a buffer count may come from besides `buffer_worker_num` (RLightning's storage), as config key paths.
STORAGE_SOURCES = ("buffer.storage.type", "buffer.storage.num_shards")


def aligned(
    builder: PlanBuilder,
    train: Block | None,
    written: int | str | None,
    cpus: float,
    group: str | None,
    source: str = "",
) -> int:
    """One shard per node holding train workers; a different written count is overridden, with a warning that
    says where the count came from (`source`: a key of `STORAGE_SOURCES`, else buffer_worker_num itself)."""
    nodes = list(dict.fromkeys(gather(builder.slot_node, train.slots))) if train is not None else []
    if isinstance(written, int) and written != len(nodes):
        origin = f" (from {source}, as RLightning counts it)" if source in STORAGE_SOURCES else ""
        builder.warnings.append(
            f"buffer_worker_num: {written}{origin} overridden to {len(nodes)}: under pool strategies there is one "
            f"buffer shard per node holding train workers (nodes {', '.join(map(str, nodes)) or 'none'})"
        )
    _place(builder, nodes, cpus, group)
    return len(nodes)


def spread(builder: PlanBuilder, inventory: Inventory, written: int | str | None, train_count: int, cpus: float) -> int:
    """Strategy default: `auto` = one shard per node with GPUs (at most one per train worker); a written
    count is spread round-robin over those nodes."""
    gpu_nodes = [n.rank for n in inventory.nodes if n.num_gpus > 0] or [n.rank for n in inventory.nodes]
    count = written if isinstance(written, int) else min(len(gpu_nodes), max(train_count, 1))
    _place(builder, [gpu_nodes[i % len(gpu_nodes)] for i in range(count)], cpus, None)
    return count


def _place(builder: PlanBuilder, nodes: list[int], cpus: float, group: str | None) -> None:
    if nodes:
        slots = [builder.slot(("buffer", k), node, (), group) for k, node in enumerate(nodes)]
        builder.add(Block("buffer", slots, cpus, group))
