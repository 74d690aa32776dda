"""Generated configurations for the explorer (docs/ray.md, "The simulation"): clusters the repository's examples
never describe, and node-groups configs placed on them.

A cluster is runs of nodes of one shape each (8, 4 or 2 GPUs of one of three models, or none; 8 to 32 CPUs), in
racks of 1 to 4 nodes (more on large clusters), zones of a few racks and NVLink domains of a node or a rack, all
as node labels (`rack`, `nvlink-domain`, `ray.io/availability-zone`); some CPU-only nodes carry robots. The config
places two to four components on it: on the GPUs of a model's group (one, two or a half process per GPU; two
components may share GPUs), on nodes (several processes each), on robots; some elastic, with room to grow. What
does not plan is drawn again. Each case also carries the shapes a schedule may join or hold as spares: those of
its nodes, and ones that do not match any (other GPU count, other model, fewer CPUs).

One config in three is written in the other dialect (`pools_config`, docs/config.md "Dialect pools"): worker
counts under an auto-mode strategy, half the time `default`, where rlplace leaves train, eval and env to Ray
(their workers agree on their rendezvous through the KV store: `rlplace.ray.exchange`); some components run in the
driver (`remote_<component>: false`, `rlplace.ray.local_group`); some elastic.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence
from typing import Any

from rlplace.errors import RlplaceError
from rlplace.inventory import Inventory, Node

MODELS = ("A800", "H100", "RTX4090")
RACK_LABEL, DOMAIN_LABEL, ZONE_LABEL = "rack", "nvlink-domain", "ray.io/availability-zone"
#: Tries before a cluster size gives up drawing a config that plans.
TRIES = 50


def cluster(rng: random.Random, size: int) -> Inventory:
    """`size` nodes in runs of one shape, in racks, zones and NVLink domains (labels); a few CPU-only nodes."""
    rack = rng.choice((1, 2, 2, 3, 4)) if size <= 16 else rng.choice((8, 16, 18))
    racks_per_zone = rng.choice((1, 2, 4))
    domain_is_rack = rng.random() < 0.5
    nodes: list[Node] = []
    while len(nodes) < size:
        run = min(
            size - len(nodes), rng.choice((1, 2, 2, 4, 8)) if size <= 16 else max(1, size // rng.choice((1, 2, 4)))
        )
        gpus = rng.choice((8, 8, 4, 2, 0)) if nodes else rng.choice((8, 4, 2))  # node 0 has GPUs
        model = rng.choice(MODELS) if gpus else None
        cpus = float(rng.choice((8, 16, 32)))
        for _ in range(run):
            r = len(nodes)
            labels = {
                RACK_LABEL: f"r{r // rack}",
                ZONE_LABEL: f"z{r // (rack * racks_per_zone)}",
                DOMAIN_LABEL: f"d{r // rack}" if domain_is_rack else f"d-n{r}",
            }
            nodes.append(Node(rank=r, num_gpus=gpus, gpu_model=model, num_cpus=cpus, labels=labels))
    return Inventory(tuple(nodes))


def config(rng: random.Random, inventory: Inventory) -> str:
    """A node-groups config for `inventory` (its YAML text, written as JSON): its groups by GPU model, robots on some
    CPU-only nodes, and two to four components placed on GPUs, nodes or robots, some elastic."""
    groups: list[dict[str, Any]] = []
    by_model: dict[str, list[int]] = {}
    for n in inventory.nodes:
        if n.num_gpus:
            by_model.setdefault(f"{n.gpu_model}x{n.num_gpus}", []).append(n.rank)
    for i, ranks in enumerate(by_model.values()):
        groups.append({"label": f"g{i}", "node_ranks": _ranks(ranks)})
    cpu_nodes = [n.rank for n in inventory.nodes if not n.num_gpus]
    robot_nodes = [r for r in cpu_nodes if rng.random() < 0.5][:4]
    if robot_nodes:
        robots = [
            {"robot_ip": f"10.{10 + r // 250}.{r % 250}.{k + 1}", "node_rank": r}
            for r in robot_nodes
            for k in range(rng.choice((1, 2)))
        ]
        groups.append(
            {"label": "robots", "node_ranks": _ranks(robot_nodes), "hardware": {"type": "Franka", "configs": robots}}
        )
    placement: dict[str, Any] = {}
    elastic: dict[str, Any] = {}
    names = iter(("actor", "rollout", "critic", "reward", "agent", "env"))
    gpu_groups = list(enumerate(by_model.values()))
    for _ in range(rng.randint(1, 3)):
        i, ranks = rng.choice(gpu_groups)
        per_node = inventory.node(ranks[0]).num_gpus
        total = per_node * len(ranks)
        first = rng.randrange(total)
        span = rng.randint(1, total - first)
        name = next(names)
        how = rng.choice(("one", "one", "two", "half"))
        if how == "two":
            text = f"{first}-{first + span - 1}:0-{2 * span - 1}"
        elif how == "half" and span % 2 == 0 and per_node % 2 == 0 and first % 2 == 0:
            text = f"{first}-{first + span - 1}:0-{span // 2 - 1}"
        else:
            text = f"{first}-{first + span - 1}" if span > 1 else str(first)
        placement[name] = {"node_group": f"g{i}", "placement": text, "num_cpus": rng.choice((1, 0.5))}
        if rng.random() < 0.5 and how == "one":
            room = total - first
            elastic[name] = {"min": rng.randint(1, span), "max": rng.randint(span, room)}
    if rng.random() < 0.5:
        nodes = sorted(rng.sample(range(len(inventory)), rng.randint(1, min(3, len(inventory)))))
        per = rng.choice((1, 2, 4))
        segments = [f"{r}:{k * per}-{k * per + per - 1}" if per > 1 else f"{r}:{k}" for k, r in enumerate(nodes)]
        placement["agent"] = {"node_group": "node", "placement": ",".join(segments), "num_cpus": 0.25}
        if rng.random() < 0.3:
            elastic["agent"] = {"min": 1}
    if robot_nodes:
        count = sum(len(g["hardware"]["configs"]) for g in groups if "hardware" in g)
        placement["env"] = {"node_group": "robots", "placement": f"0-{count - 1}" if count > 1 else "0"}
    section: dict[str, Any] = {
        "num_nodes": len(inventory),
        "node_groups": groups,
        "component_placement": placement,
    }
    if elastic:
        section["elastic"] = elastic
    return json.dumps({"cluster": section}, indent=2)  # YAML, as JSON is, and what a user would write


#: The pools dialect's components, as its keys name them (`storage` is the buffer's `remote_` key).
#: The `remote_<key>` switch of each pools-dialect component (the buffer's is RLightning's `remote_storage`).
REMOTE_KEYS = ("train", "eval", "env", "storage")


def pools_config(rng: random.Random, inventory: Inventory) -> str:
    """A pools-dialect config for `inventory` (as JSON): one to three train, eval and env workers each, under strategy
    `default` (Ray places them) half the time, else `disaggregate` or `colocate`; each component in the driver
    (`remote_<c>: false`) one time in four; some elastic."""
    gpus = sum(n.num_gpus for n in inventory.nodes)
    section: dict[str, Any] = {
        "train_worker_num": rng.randint(1, 3),
        "eval_worker_num": rng.randint(1, 3),
        "env_worker_num": rng.randint(1, 3),
        "buffer_worker_num": rng.choice(("auto", 1, 2)),
        "env_each_gpu_num": rng.choice((0, 0, 1)),
        "placement": {"mode": "auto", "strategy": rng.choice(("default", "default", "disaggregate", "colocate"))},
    }
    if gpus < 4 or rng.random() < 0.5:  # small clusters: fractions of GPUs
        section |= {"train_each_gpu_num": 0.5, "eval_each_gpu_num": 0.5}
    for key in REMOTE_KEYS:
        if rng.random() < 0.25:
            section[f"remote_{key}"] = False
    elastic: dict[str, Any] = {c: {"min": 1} for c in ("train", "eval") if rng.random() < 0.4}
    for c, bounds in elastic.items():
        if section.get(f"remote_{c}") is False:  # in the driver growth needs no resources: room for one more
            bounds["max"] = section[f"{c}_worker_num"] + 1
    if elastic:
        section["elastic"] = elastic
    return json.dumps({"cluster": section}, indent=2)


def shapes(inventory: Inventory) -> tuple[Node, ...]:
    """The node shapes a schedule may join or hold as spares: each distinct shape of the cluster, and for the
    first, shapes that match nothing (half the GPUs, another model, a quarter of the CPUs), rank -1."""
    seen: dict[tuple, Node] = {}
    for n in inventory.nodes:
        key = (n.num_gpus, n.gpu_model, n.num_cpus, tuple(sorted(n.resources.items())))
        seen.setdefault(key, dataclasses.replace(n, rank=-1, node_id=None, address=None))
    first = next(iter(seen.values()))
    odd = [
        dataclasses.replace(first, num_gpus=first.num_gpus // 2),
        dataclasses.replace(
            first, gpu_model=next(m for m in MODELS if m != first.gpu_model) if first.num_gpus else None
        ),
        dataclasses.replace(first, num_cpus=max(1.0, (first.num_cpus or 16) / 4)),
    ]
    return (*seen.values(), *odd)


def planned(rng: random.Random, size: int) -> tuple[str, Inventory, Any, Any] | None:
    """A generated cluster of `size` nodes and a config that plans on it: (config text, inventory, spec, plan);
    None when `TRIES` draws found none."""
    from rlplace.config import load
    from rlplace.planner import plan

    for _ in range(TRIES):
        inventory = cluster(rng, size)
        text = (pools_config if rng.random() < 1 / 3 else config)(rng, inventory)
        try:
            spec = load(text)
            made = plan(spec, inventory)
        except (RlplaceError, ValueError):
            continue
        if made.workers:
            return text, inventory, spec, made
    return None


def _ranks(ranks: Sequence[int]) -> str:
    """`0-3,6` for [0, 1, 2, 3, 6]."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(f"{start}-{r}" if r != start else str(r))
            start = None
    return ",".join(parts)
