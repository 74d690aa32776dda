"""Plans built by hand, shaped like the spec's layouts, so the picture is tested without the planner.

Builders are cached: a plan is read-only data, and the 530-worker one is rebuilt often otherwise."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from rlplace.inventory import Inventory, parse_nodes
from rlplace.plan import EffectiveSettings, GroupSummary, Plan, Worker


def settings(strategy: str = "disaggregate", **kw: object) -> EffectiveSettings:
    base: dict[str, object] = dict(
        mode="auto",
        strategy=strategy,
        env_strategy="default",
        is_colocated=False,
        enable_offload=False,
        buffer_worker_num=1,
    )
    base.update(kw)
    return EffectiveSettings(**base)  # type: ignore[arg-type]


def workers(
    component: str,
    places: Iterable[tuple[int | None, tuple[int, ...]]],
    fraction: float = 1.0,
    group: str | None = None,
    hardware: list[dict[str, object]] | None = None,
) -> list[Worker]:
    """One worker per (node rank, GPUs) place, ranks 0..n-1 in order."""
    places = list(places)
    return [
        Worker(
            component=component,
            rank=r,
            world_size=len(places),
            node_rank=node,
            gpus=gpus,
            gpu_fraction=fraction,
            num_cpus=1.0,
            group=group,
            hardware=hardware[r] if hardware else None,
        )
        for r, (node, gpus) in enumerate(places)
    ]


@cache
def hetero() -> tuple[Plan, Inventory]:
    """The 18-node example: 64 actor on A800 nodes 0-7, 64 rollout on 4090 nodes 8-15, 2 robot envs, 400 agents."""
    robots = [
        {"type": "Franka", "robot_ip": "10.10.10.1", "camera_serials": ["322142001230", "322142001231"]},
        {"type": "Franka", "robot_ip": "10.10.10.2", "camera_serials": ["322142001232", "322142001233"]},
    ]
    ws = (
        workers("actor", ((r // 8, (r % 8,)) for r in range(64)), group="a800")
        + workers("rollout", ((8 + r // 8, (r % 8,)) for r in range(64)), group="4090")
        + workers("env", [(16, ()), (17, ())], group="franka", hardware=robots)
        + workers("agent", ((r // 100, ()) for r in range(400)), fraction=0.0, group="node")
    )
    groups = (
        GroupSummary("a800", tuple(range(8)), (8,) * 8, {"actor": tuple(range(64))}),
        GroupSummary("4090", tuple(range(8, 16)), (8,) * 8, {"rollout": tuple(range(64))}),
        GroupSummary("franka", (16, 17), (0, 0), {"env": (0, 1)}),
        GroupSummary("node", tuple(range(18)), (0,) * 18, {"agent": tuple(range(400))}),
    )
    plan = Plan(tuple(ws), (), settings("node_groups", dialect="node_groups", buffer_worker_num=0), groups)
    return plan, parse_nodes("8x8:A800,8x8:RTX4090,2x0")


@cache
def all_colocated() -> tuple[Plan, Inventory]:
    """3 nodes x 8 GPUs, every GPU hosting one train, one eval and one env worker (1/3 each)."""
    gpus = [(n, (g,)) for n in range(3) for g in range(8)]
    ws = [*workers("train", gpus, 1 / 3, "global_pool"), *workers("eval", gpus, 1 / 3, "global_pool")]
    ws += workers("env", gpus, 1 / 3, "global_pool") + workers("buffer", [(0, ()), (1, ()), (2, ())], 0.0)
    s = settings("colocate", mode="manual", is_colocated=True, enable_offload=True, buffer_worker_num=3)
    groups = (GroupSummary("global_pool", (0, 1, 2), (8, 8, 8)),)
    return Plan(tuple(ws), (), s, groups), parse_nodes("3x8")


@cache
def colocated_node() -> tuple[Plan, Inventory]:
    """1 node x 4 GPUs, every GPU hosting one train, one eval and one env worker (1/3 each), one buffer shard."""
    gpus = [(0, (g,)) for g in range(4)]
    ws = [*workers("train", gpus, 1 / 3, "global_pool"), *workers("eval", gpus, 1 / 3, "global_pool")]
    ws += workers("env", gpus, 1 / 3, "global_pool") + workers("buffer", [(0, ())], 0.0)
    s = settings("colocate", is_colocated=True, enable_offload=True)
    return Plan(tuple(ws), (), s, (GroupSummary("global_pool", (0,), (4,)),)), parse_nodes("1x4:A100")


@cache
def mixed() -> tuple[Plan, Inventory]:
    """Train 8 on node 0; eval 16 and env 16 sharing nodes 1-2 (1/2 each); 1 buffer shard on node 0."""
    rollout = [(n, (g,)) for n in (1, 2) for g in range(8)]
    ws = workers("train", [(0, (g,)) for g in range(8)], group="train_pool") + workers("buffer", [(0, ())], 0.0)
    ws += workers("eval", rollout, 0.5, "rollout_pool") + workers("env", rollout, 0.5, "rollout_pool")
    groups = (GroupSummary("train_pool", (0,), (8,)), GroupSummary("rollout_pool", (1, 2), (8, 8)))
    warn = ("pool 'train_pool' <reserves> & idles nothing",)
    return Plan(tuple(ws), (), settings("manual", mode="manual"), groups, warn), parse_nodes("3x8")


@cache
def default_strategy() -> tuple[Plan, Inventory]:
    """Strategy default: train/eval/env left to Ray, one buffer shard pinned to each GPU node."""
    free = [(None, ())] * 2
    ws = workers("train", free) + workers("eval", free) + workers("env", free)
    ws += workers("buffer", [(0, ()), (1, ())], 0.0)
    plan = Plan(tuple(ws), (), settings("default", buffer_worker_num=2), uses_placement_groups=False)
    return plan, parse_nodes("2x4")


PLANS = {
    "hetero": hetero,
    "all_colocated": all_colocated,
    "colocated_node": colocated_node,
    "mixed": mixed,
    "default": default_strategy,
}
