"""JobSpecs built by hand, exactly as the config loader maps each dialect (brief / model.py), so the
planner is tested independently of the loader."""

from __future__ import annotations

from rlplace.model import (
    ComponentSpec,
    EnvConfigSpec,
    HardwareUnit,
    JobSpec,
    NodeGroupSpec,
    Placement,
    PlacementSettings,
    Segment,
)


def auto(strategy=None, env_strategy=None, buffer="auto", gpus=None, **counts) -> JobSpec:
    """Pools dialect, auto mode: train/eval/env always present, counts None when not written."""
    gpus = gpus or {}
    comps = [
        ComponentSpec(name=c, num_workers=counts.get(c), gpus_per_worker=gpus.get(c, 1.0))
        for c in ("train", "eval", "env")
    ]
    settings = PlacementSettings(strategy=strategy, env_strategy=env_strategy, buffer_worker_num=buffer)
    return JobSpec("pools", settings, tuple(comps))


def manual(pools: list[dict], counts: dict | None = None, buffer="auto", **settings) -> JobSpec:
    """Pools dialect, manual mode: each pool a NodeGroupSpec, each range a one-segment Placement."""
    counts = counts or {}
    groups, comps = [], {}
    first = 0
    for p in pools:
        per = p["num_gpus"] if isinstance(p["num_gpus"], list) else [p["num_gpus"]] * p["num_node"]
        groups.append(
            NodeGroupSpec(
                label=p["name"],
                node_ranks=tuple(range(first, first + len(per))),
                gpus_per_node=tuple(per),
                node_ids=tuple(p["node_ids"]) if "node_ids" in p else None,
            )
        )
        first += len(per)
        for c in ("train", "eval", "env", "buffer"):
            if c in p:
                comps[c] = ComponentSpec(
                    name=c,
                    placement=Placement((p["name"],), (Segment(tuple(p[c])),)),
                    num_workers=counts.get(c),
                    gpus_per_worker=counts.get(f"{c}_gpus", 1.0),
                )
    s = PlacementSettings(mode="manual", buffer_worker_num=buffer, **settings)
    return JobSpec("pools", s, tuple(comps.values()), tuple(groups))


def r(a: int, b: int) -> tuple[int, ...]:
    return tuple(range(a, b + 1))


def hetero() -> JobSpec:
    """The spec's 18-node example (heterogeneous-cluster), as the loader maps it."""
    robots = (
        HardwareUnit("Franka", 16, {"robot_ip": "10.10.10.1", "camera_serials": ["322142001230", "322142001231"]}),
        HardwareUnit("Franka", 17, {"robot_ip": "10.10.10.2", "camera_serials": ["322142001232", "322142001233"]}),
    )
    groups = (
        NodeGroupSpec(
            "a800",
            r(0, 7),
            env_configs=(EnvConfigSpec(r(0, 7), (("GLOO_SOCKET_IFNAME", "eth0"),), "/opt/venv/openpi/bin/python3"),),
        ),
        NodeGroupSpec("4090", r(8, 15), env_configs=(EnvConfigSpec(r(8, 15), (("GLOO_SOCKET_IFNAME", "eth1"),)),)),
        NodeGroupSpec("franka", r(16, 17), hardware_type="Franka", hardware=robots),
    )
    comps = (
        ComponentSpec("actor", Placement(("a800",), (Segment(r(0, 63)),))),
        ComponentSpec("rollout", Placement(("4090",), (Segment(r(0, 63)),))),
        ComponentSpec("env", Placement(("franka",), (Segment(r(0, 1)),))),
        ComponentSpec("agent", Placement(("node",), (Segment(r(0, 1), r(0, 199)), Segment(r(2, 3), r(200, 399))))),
    )
    return JobSpec("node_groups", PlacementSettings(mode="manual"), comps, groups, num_nodes=18)


def groups_spec(components: dict, groups=(), num_nodes=None) -> JobSpec:
    """Node-groups dialect from {name: (groups tuple, [(resources|None, processes|None), ...])}."""
    comps = tuple(
        ComponentSpec(name, Placement(tuple(g), tuple(Segment(res, pr) for res, pr in segs)))
        for name, (g, segs) in components.items()
    )
    return JobSpec("node_groups", PlacementSettings(mode="manual"), comps, tuple(groups), num_nodes=num_nodes)
