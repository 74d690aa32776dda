"""What a live cluster still holds for a running job: its nodes minus what the job's plan reserves.

Incremental planning (`planner.resize`) places new workers only there, or in seats the plan's own bundles keep
free (a worker that left keeps its seat: Ray cannot shrink a placement group). Other jobs' use of a node is not
known here; the Ray layer's reservation reports it (a placement group that cannot be placed names its node).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from rlplace.inventory import Inventory
from rlplace.plan import Plan

EPS = 1e-9


@dataclass(frozen=True)
class NodeFree:
    """One live node's capacity outside the plan: local GPU indices no bundle holds, CPUs and custom resources
    no bundle or pinned worker takes (negative when the plan already asks for more than the node has)."""

    rank: int
    gpus: tuple[int, ...]
    cpus: float
    resources: dict[str, float] = field(default_factory=dict, hash=False)
    num_gpus: int = 0  # the node's accelerators, reserved or not
    accelerator: str = "GPU"


def free_capacity(plan: Plan, live: Inventory, down: Collection[int] = ()) -> dict[int, NodeFree]:
    """Per live node rank (nodes in `down`, e.g. lost and not yet replaced, left out): what the plan leaves free.

    Reserved: every bundle of the plan (a bundle holds its GPUs and CPUs whether or not its seats are taken),
    and the CPUs of workers pinned to a node without a bundle (buffer shards under strategy default). Workers
    left to Ray's scheduler have no node and take nothing here.
    """
    used_gpus: dict[int, set[int]] = {}
    used_cpus: dict[int, float] = {}
    used_res: dict[int, dict[str, float]] = {}
    for b in plan.bundles:
        used_gpus.setdefault(b.node_rank, set()).update(b.gpus)
        used_cpus[b.node_rank] = used_cpus.get(b.node_rank, 0.0) + b.num_cpus
        res = used_res.setdefault(b.node_rank, {})
        for k, v in b.resources.items():
            res[k] = res.get(k, 0.0) + v
    for w in plan.workers:
        if w.bundle is None and w.node_rank is not None:
            used_cpus[w.node_rank] = used_cpus.get(w.node_rank, 0.0) + w.num_cpus
    out = {}
    for n in live.nodes:
        if n.rank in down:
            continue
        taken = used_gpus.get(n.rank, set())
        res = used_res.get(n.rank, {})
        out[n.rank] = NodeFree(
            rank=n.rank,
            gpus=tuple(g for g in range(n.num_gpus) if g not in taken),
            cpus=n.num_cpus - used_cpus.get(n.rank, 0.0),
            resources={k: v - res.get(k, 0.0) for k, v in n.resources.items()},
            num_gpus=n.num_gpus,
            accelerator=n.accelerator_resource,
        )
    return out
