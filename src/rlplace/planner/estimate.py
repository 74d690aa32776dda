"""What a plan costs: GPUs used and idle, and bytes crossing node boundaries per iteration.

Model (docs/planner.md): weight sync pushes the full model from the train workers to every node that
hosts eval workers; a node that also hosts a train worker is served locally, every other such node
pulls one copy (Ray's object store fetches an object once per node). Experience (`batch_bytes` per
iteration in total, produced evenly by the eval workers, or the env workers when there is no eval) goes
to a buffer shard: node-local when the producer's node has a shard, across nodes otherwise. Workers left
to Ray's scheduler (strategy default) have no known node, so their traffic is unknown (None); a plan
without the components is None too. RLinf's names count as the same roles: actor = train, rollout = eval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlplace.inventory import Inventory
from rlplace.plan import Plan


@dataclass(frozen=True)
class Estimate:
    gpus_used: int
    gpus_idle: int | None  # GPUs of the inventory (or of the plan's pools) that no worker uses
    weight_sync_bytes: int | None  # train -> eval, per iteration, crossing nodes
    experience_bytes: int | None  # eval/env -> buffer, per iteration, crossing nodes

    def to_dict(self) -> dict:
        return {
            "gpus_used": self.gpus_used,
            "gpus_idle": self.gpus_idle,
            "weight_sync_bytes": self.weight_sync_bytes,
            "experience_bytes": self.experience_bytes,
        }


def estimate(plan: Plan, model_bytes: int, batch_bytes: int, inventory: Inventory | None = None) -> Estimate:
    by: dict[str, list] = {}
    for w in plan.workers:
        by.setdefault(w.component, []).append(w)
    pinned = all(w.node_rank is not None for w in plan.workers)
    if pinned:
        used = len({(w.node_rank, g) for w in plan.workers for g in w.gpus})
    else:
        used = math.ceil(sum(w.num_gpus for w in plan.workers) - 1e-9)
    if inventory is not None:
        idle: int | None = inventory.total_gpus - used
    elif plan.groups and pinned:
        idle = sum(sum(g.gpus_per_node) for g in plan.groups) - used
    else:
        idle = None
    return Estimate(used, idle, _weight_sync(by, model_bytes), _experience(by, batch_bytes))


def _nodes(ws: list) -> set[int] | None:
    nodes = {w.node_rank for w in ws}
    return None if None in nodes else nodes


def _role(by: dict[str, list], *names: str) -> list:
    return next((by[n] for n in names if by.get(n)), [])


def _weight_sync(by: dict[str, list], model_bytes: int) -> int | None:
    train, evals = _role(by, "train", "actor"), _role(by, "eval", "rollout")
    if not train or not evals:
        return None
    train_nodes, eval_nodes = _nodes(train), _nodes(evals)
    if train_nodes is None or eval_nodes is None:
        return None
    return model_bytes * len(eval_nodes - train_nodes)


def _experience(by: dict[str, list], batch_bytes: int) -> int | None:
    producers = _role(by, "eval", "rollout", "env")
    shards = _nodes(by.get("buffer", []))
    if not producers or not shards or any(w.node_rank is None for w in producers):
        return None
    remote = sum(1 for w in producers if w.node_rank not in shards)
    return batch_bytes * remote // len(producers)
