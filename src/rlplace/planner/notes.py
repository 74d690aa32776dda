"""Notes for users migrating from RLightning: where this plan places differently from RLightning's planner.

Each note is written only when the difference changes *this* plan (not as a general disclaimer), once per
topic, and points at docs/migrating.md. Notes are not warnings: the plan is what rlplace means to do.
The `resource_pool` dialect is RLightning's (docs/config.md, 'Dialect "pools"'), so these notes concern it only;
for node-groups configs rlplace places as RLinf does.
"""

from __future__ import annotations

import math

from rlplace.inventory import Inventory
from rlplace.planner.builder import PlanBuilder
from rlplace.planner.pools import Pool
from rlplace.planner.ranges import format_ranks
from rlplace.planner.settings import Counted

_SEE = " (docs/migrating.md)"


def counts_left_out(notes: list[str], filled: dict[str, int]) -> None:
    """Manual mode, `train_worker_num` / `eval_worker_num` not written: rlplace fills each range, RLightning
    starts its default of 1 (env workers are not counted this way in RLightning: they come from `env:`)."""
    more = {name: n for name, n in filled.items() if n > 1 and name in ("train", "eval")}
    if more:
        keys = " and ".join(f"{name}_worker_num" for name in more)
        got = ", ".join(f"{name} {n}" for name, n in more.items())
        notes.append(
            f"{keys} not written: rlplace starts one worker per GPU of the range ({got}); RLightning would start 1 "
            f"(its default). Write {' and '.join(f'{k}: 1' for k in keys.split(' and '))} for RLightning's "
            f"counts{_SEE}"
        )


def default_buffer(
    builder: PlanBuilder, written: int | str | None, counts: dict[str, Counted], inventory: Inventory, shards: int
) -> None:
    """Strategy default, `buffer_worker_num: auto`: RLightning makes ceil(train GPUs / GPUs of the first node)
    shards on the first nodes in Ray's order; rlplace one per GPU node (at most one per train worker)."""
    if written != "auto":
        return
    first = inventory.node(0).num_gpus
    train = counts["train"]
    theirs = math.ceil(train.count * train.gpus / first) if first else None
    if theirs is not None and theirs != shards:
        builder.notes.append(
            f"buffer_worker_num: auto gives {shards} shard(s), one per GPU node (at most one per train worker); "
            f"RLightning would make {theirs} = ceil(train GPUs {train.count * train.gpus:g} / GPUs of the first "
            f"node {first}). Write buffer_worker_num: {theirs} for RLightning's count{_SEE}"
        )


def disaggregate_leftover(builder: PlanBuilder, pools: list[Pool]) -> None:
    """RLightning fills the idle GPUs of the last train node with eval/env workers; rlplace keeps the pools on
    disjoint nodes when the inventory allows (the train node's idle GPUs stay idle)."""
    train = next((p for p in pools if p.name == "train_pool"), None)
    rollout = next((p for p in pools if p.name == "rollout_pool"), None)
    if train is None or rollout is None or not train.nodes:
        return
    last = train.nodes[-1]
    idle = sum(train.num_gpus) - len(train.ranges.get("train", ()))
    if idle > 0:
        nodes = f"node{'s' if len(rollout.nodes) > 1 else ''} {format_ranks(rollout.nodes)}"
        builder.notes.append(
            f"strategy disaggregate: train node {last} keeps {idle} GPU(s) idle, and eval/env run on {nodes}; "
            f"RLightning would put eval/env workers on those idle GPUs of node "
            f"{last} too. rlplace keeps train_pool and rollout_pool on separate nodes so that rollout cannot slow "
            f"training; placement.mode: manual with a resource_pool gives RLightning's layout{_SEE}"
        )


def driver_reservation(builder: PlanBuilder, in_driver: set[str]) -> None:
    """Components run in the driver: rlplace reserves nothing for them, RLightning still reserves their GPUs."""
    if in_driver:
        names = ", ".join(f"remote_{_remote_key(c)}: false" for c in sorted(in_driver))
        builder.notes.append(
            f"{names}: those workers run in the driver process and rlplace reserves no GPU for them; RLightning's "
            f"planner would still reserve their GPUs in its placement groups{_SEE}"
        )


def _remote_key(component: str) -> str:
    """RLightning names the buffer's switch after its storage (`remote_storage`)."""
    return "storage" if component == "buffer" else component
