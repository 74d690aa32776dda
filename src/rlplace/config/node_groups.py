"""Dialect "node_groups" (spec/heterogeneous-cluster.*) -> the one model: node groups and components.

The input is the structurally checked `cluster:` section (see `sections.NODE_GROUPS_SECTION`); here live
the rules that relate keys: reserved and unique labels, ranks inside num_nodes, env_configs inside their
group and not overlapping, hardware units on the group's nodes and one config per unit, placements
naming existing groups and staying inside groups whose size is known before any inventory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from rlplace.config.fields import INVALID, written
from rlplace.config.hardware import REGISTRY
from rlplace.config.problems import Path, Reporter, did_you_mean, format_path
from rlplace.config.ranges import format_ranks
from rlplace.model import (
    CLUSTER_GROUP,
    NODE_GROUP,
    RESERVED_LABELS,
    ComponentSpec,
    EnvConfigSpec,
    HardwareUnit,
    JobSpec,
    NodeGroupSpec,
    Placement,
    PlacementSettings,
    Segment,
)

_COMPONENT_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def build(cluster: Mapping[str, object], base: Path, rep: Reporter) -> JobSpec:
    """The JobSpec of a node-groups section; problems go to `rep` (the caller raises)."""
    num_nodes = written(cluster, "num_nodes")
    groups: list[NodeGroupSpec] = []
    labels: dict[str, int] = {}  # every user label written, also of groups with other problems
    for i, group in enumerate(written(cluster, "node_groups") or ()):  # type: ignore[arg-type]
        spec = _group(group, (*base, "node_groups", i), num_nodes, labels, rep)  # type: ignore[arg-type]
        label = written(group, "label")  # type: ignore[arg-type]
        if isinstance(label, str) and label not in RESERVED_LABELS:
            labels.setdefault(label, i)
        if spec is not None:
            groups.append(spec)
    complete = {g.label: g for g in groups}
    components = _components(cluster, base, complete, [*labels, *RESERVED_LABELS], num_nodes, rep)  # type: ignore[arg-type]
    return JobSpec("node_groups", PlacementSettings(), components, tuple(groups), num_nodes)  # type: ignore[arg-type]


def _group(
    group: Mapping[str, object], path: Path, num_nodes: int | None, labels: dict[str, int], rep: Reporter
) -> NodeGroupSpec | None:
    label = written(group, "label")
    ranks = written(group, "node_ranks")
    if isinstance(label, str):
        if label in RESERVED_LABELS:
            meaning = "every node, its accelerators" if label == CLUSTER_GROUP else "every node, hardware ignored"
            rep.add(
                (*path, "label"),
                f"label '{label}' is reserved by the scheduler ({meaning}); choose another label",
                label,
            )
            label = None
        elif label in labels:
            rep.add(
                (*path, "label"),
                f"label '{label}' is already used by node_groups[{labels[label]}]; labels must be unique "
                "(they are case-sensitive)",
                label,
            )
            label = None
    if ranks is not None:
        _in_cluster(ranks, num_nodes, (*path, "node_ranks"), group.get("node_ranks"), rep)  # type: ignore[arg-type]
    env_configs = _env_configs(group, path, ranks, rep)  # type: ignore[arg-type]
    hardware_type, units = _hardware(group, path, ranks, rep)  # type: ignore[arg-type]
    ignore = written(group, "ignore_hardware") is True
    if ignore and hardware_type is not None:
        rep.add(
            (*path, "ignore_hardware"),
            "ignore_hardware: true contradicts the hardware block of this group; remove one of them",
            True,
        )
    if not isinstance(label, str) or ranks is None:
        return None
    return NodeGroupSpec(
        label=label,
        node_ranks=ranks,  # type: ignore[arg-type]
        env_configs=env_configs,
        hardware_type=hardware_type,
        hardware=units,
        ignore_hardware=ignore,
        path=format_path(path),
    )


def _in_cluster(ranks: Sequence[int], num_nodes: int | None, path: Path, value: object, rep: Reporter) -> None:
    if num_nodes is None:
        return
    beyond = [r for r in ranks if r >= num_nodes]
    if beyond:
        rep.add(
            path,
            f"node rank {beyond[0]} is outside the cluster: num_nodes is {num_nodes}, so ranks run 0-{num_nodes - 1}",
            value,
        )


def _env_configs(
    group: Mapping[str, object], path: Path, ranks: tuple[int, ...] | None, rep: Reporter
) -> tuple[EnvConfigSpec, ...]:
    out: list[EnvConfigSpec] = []
    owner: dict[int, int] = {}  # node rank -> index of the env config that set it
    for j, entry in enumerate(written(group, "env_configs") or ()):  # type: ignore[arg-type]
        epath = (*path, "env_configs", j)
        sub = written(entry, "node_ranks")
        if sub is None:
            continue
        if ranks is not None:
            outside = [r for r in sub if r not in set(ranks)]
            if outside:
                rep.add(
                    (*epath, "node_ranks"),
                    f"node ranks {format_ranks(outside)} are not in this group (its node_ranks are "
                    f"{format_ranks(ranks)}); an env config applies to a subset of its group's nodes",
                    entry.get("node_ranks"),
                )
        shared = [r for r in sub if r in owner]
        if shared:
            rep.add(
                (*epath, "node_ranks"),
                f"node ranks {format_ranks(shared)} are already configured by env_configs[{owner[shared[0]]}]; "
                "env configs of one group must not overlap (merge their env_vars)",
                entry.get("node_ranks"),
            )
        owner.update({r: j for r in sub if r not in owner})
        if entry.get("env_vars") is INVALID or entry.get("python_interpreter_path") is INVALID:
            continue
        out.append(
            EnvConfigSpec(
                node_ranks=sub,
                env_vars=written(entry, "env_vars") or (),  # type: ignore[arg-type]
                python=written(entry, "python_interpreter_path"),  # type: ignore[arg-type]
                path=format_path(epath),
            )
        )
    return tuple(out)


def _hardware(
    group: Mapping[str, object], path: Path, ranks: tuple[int, ...] | None, rep: Reporter
) -> tuple[str | None, tuple[HardwareUnit, ...]]:
    block = written(group, "hardware")
    kind_name = written(block, "type") if isinstance(block, Mapping) else None
    if kind_name is None:
        return None, ()
    kind = REGISTRY[kind_name]  # type: ignore[index]
    units: list[HardwareUnit] = []
    seen: dict[object, int] = {}
    for k, config in enumerate(written(block, "configs") or ()):  # type: ignore[arg-type]
        cpath = (*path, "hardware", "configs", k)
        node = written(config, "node_rank")
        if node is not None and ranks is not None and node not in ranks:
            rep.add(
                (*cpath, "node_rank"),
                f"node_rank {node} is not in this group (its node_ranks are {format_ranks(ranks)}); a {kind.noun} "
                "must be attached to one of its group's nodes",
                node,
            )
        identity = kind.identity(config)
        if identity is not None and identity in seen:
            rep.add(
                cpath,
                f"this {kind.noun} ({identity}) is already configured by configs[{seen[identity]}]; one hardware "
                f"config per {kind.noun}",
                str(identity),
            )
        seen.setdefault(identity, k)
        if node is None or any(v is INVALID for v in config.values()):
            continue
        fields = {key: tuple(v) if isinstance(v, list) else v for key, v in config.items() if key != "node_rank"}
        units.append(HardwareUnit(type=kind.name, node_rank=node, config=fields, path=format_path(cpath)))  # type: ignore[arg-type]
    units.sort(key=lambda u: u.node_rank)  # hardware ranks count units in node-rank order
    return kind.name, tuple(units)


def _components(
    cluster: Mapping[str, object],
    base: Path,
    groups: dict[str, NodeGroupSpec],
    known: list[str],
    num_nodes: int | None,
    rep: Reporter,
) -> tuple[ComponentSpec, ...]:
    placements = written(cluster, "component_placement")
    if not isinstance(placements, Mapping):
        return ()
    out: list[ComponentSpec] = []
    defined: dict[str, str] = {}  # component -> the key that placed it
    for key, entry in placements.items():
        path = (*base, "component_placement", str(key))
        names = [n for n in _component_names(key, path, rep) if _first_definition(n, str(key), defined, path, rep)]
        if entry is INVALID:
            continue
        if isinstance(entry, Mapping):
            labels = written(entry, "node_group") or (CLUSTER_GROUP,)
            segments, place_path = written(entry, "placement"), (*path, "placement")
            if entry.get("node_group") is INVALID:
                continue
        else:
            labels, segments, place_path = (CLUSTER_GROUP,), entry, path
        if not _groups_exist(labels, known, (*path, "node_group"), rep) or segments is None:  # type: ignore[arg-type]
            continue
        _check_placement(segments, labels, groups, num_nodes, place_path, rep)  # type: ignore[arg-type]
        placement = Placement(groups=tuple(labels), segments=segments)  # type: ignore[arg-type]
        out.extend(ComponentSpec(name=name, placement=placement, path=format_path(path)) for name in names)
    return tuple(out)


def _first_definition(name: str, key: str, defined: dict[str, str], path: Path, rep: Reporter) -> bool:
    if name in defined:
        rep.add(path, f"component '{name}' is already placed by '{defined[name]}'; place each component once", name)
        return False
    defined[name] = key
    return True


def _component_names(key: object, path: Path, rep: Reporter) -> tuple[str, ...]:
    """`actor` or the short form `"actor,rollout"` (each listed component is placed the same way)."""
    if not isinstance(key, str):
        rep.add(path, f"component name {key!r} must be text like actor or 'actor,rollout'", key)
        return ()
    names = tuple(n.strip() for n in key.split(","))
    bad = [n for n in names if not _COMPONENT_NAME.fullmatch(n)]
    if bad:
        rep.add(
            path,
            f"'{key}' is not a component name or a comma list of names (letters, digits, '_', '-', '.')",
            key,
        )
        return ()
    if len(set(names)) != len(names):
        rep.add(path, f"'{key}' lists a component twice", key)
        return ()
    return names


def _groups_exist(labels: tuple[str, ...], known: list[str], path: Path, rep: Reporter) -> bool:
    missing = [label for label in labels if label not in known]
    for label in missing:
        rep.add(
            path,
            f"node group '{label}' is not defined{did_you_mean(label, known)} Defined groups: {', '.join(known)}",
            label,
        )
    return not missing


def _group_size(label: str, groups: dict[str, NodeGroupSpec], num_nodes: int | None) -> tuple[int, str] | None:
    """(resource count, noun) of a group when it is known without an inventory, else None."""
    if label == NODE_GROUP:
        return (num_nodes, "nodes") if num_nodes is not None else None
    group = groups.get(label)
    if group is None or label == CLUSTER_GROUP:
        return None
    if group.hardware_type is not None:
        return len(group.hardware), f"{REGISTRY[group.hardware_type].noun}s ({group.hardware_type})"
    if group.ignore_hardware:
        return len(group.node_ranks), "nodes (ignore_hardware)"
    return None  # accelerators: counted from the inventory by the planner


def _check_placement(
    segments: tuple[Segment, ...],
    labels: tuple[str, ...],
    groups: dict[str, NodeGroupSpec],
    num_nodes: int | None,
    path: Path,
    rep: Reporter,
) -> None:
    sizes = [_group_size(label, groups, num_nodes) for label in labels]
    if all(s is not None for s in sizes):
        total = sum(s[0] for s in sizes)  # type: ignore[index]
        beyond = [r for seg in segments for r in seg.resources or () if r >= total]
        if beyond:
            what = " + ".join(f"'{label}' has {s[0]} {s[1]}" for label, s in zip(labels, sizes, strict=True))  # type: ignore[index]
            span = f"ranks run 0-{total - 1}" if total else "it has no resources"
            rep.add(path, f"resource rank {beyond[0]} is out of range: {what}, so {span}", beyond[0])
    nodes_are_resources = all(
        label == NODE_GROUP or (label in groups and groups[label].ignore_hardware) for label in labels
    )
    for seg in segments:
        if nodes_are_resources and seg.resources and seg.processes and len(seg.resources) > len(seg.processes):
            rep.add(
                path,
                f"{len(seg.processes)} process(es) on {len(seg.resources)} nodes would make one process span several "
                "nodes; give each node at least one process (e.g. "
                f"{format_ranks(seg.resources)}:{seg.processes[0]}-{seg.processes[0] + len(seg.resources) - 1})",
            )
