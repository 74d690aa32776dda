"""Dialect "node_groups" (RLinf's; docs/config.md, 'Dialect "node groups"') -> the one model: node groups and
components.

The input is the structurally checked `cluster:` section (see `sections.NODE_GROUPS_SECTION`); here live
the rules that relate keys: reserved and unique labels, ranks inside num_nodes, env_configs inside their
group and not overlapping, hardware units on the group's nodes and one config per unit, placements
naming existing groups and staying inside groups whose size is known before any inventory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from rlplace.config.fields import INVALID, sections, written, written_as, written_list, written_section
from rlplace.config.hardware import kind_of, known_type
from rlplace.config.problems import Path, Reporter, did_you_mean, format_path
from rlplace.config.ranges import format_ranks
from rlplace.config.sections import ALL_RANKS, RLINF_EXTRAS
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
_STRAY_ENDS = re.compile(r"^[^A-Za-z0-9_.-]+|[^A-Za-z0-9_.-]+$")


def build(cluster: Mapping[str, object], base: Path, rep: Reporter) -> JobSpec:
    """The JobSpec of a node-groups section; problems go to `rep` (the caller raises)."""
    num_nodes = written_as(cluster, "num_nodes", int)
    groups: list[NodeGroupSpec] = []
    labels: dict[str, int] = {}  # every user label written, also of groups with other problems
    uncounted: set[str] = set()  # groups whose hardware units could not all be read: their size is unknown
    owners: dict[tuple[int, str], str] = {}  # (node, hardware type) -> the group configuring it
    for i, group in enumerate(sections(written_list(cluster, "node_groups"))):
        spec = _group(group, (*base, "node_groups", i), num_nodes, labels, owners, rep)
        label = written(group, "label")
        if isinstance(label, str) and label not in RESERVED_LABELS:
            labels.setdefault(label, i)
            if _hardware_incomplete(group):
                uncounted.add(label)
        if spec is not None:
            groups.append(spec)
    counted = {g.label: g for g in groups if g.label not in uncounted}
    components = _components(cluster, base, counted, [*labels, *RESERVED_LABELS], num_nodes, rep)
    extras = {k: cluster[k] for k in RLINF_EXTRAS if k in cluster and cluster[k] is not INVALID}
    return JobSpec("node_groups", PlacementSettings(), components, tuple(groups), num_nodes, extras=extras)


def _hardware_incomplete(group: Mapping[str, object]) -> bool:
    """A hardware block with a problem: its units cannot be counted, so placements through it are not checked."""
    block = group.get("hardware")
    if block is INVALID:
        return True
    if not isinstance(block, Mapping):
        return False
    configs = block.get("configs")
    return (
        block.get("type") is INVALID
        or configs is INVALID
        or any(c is INVALID or "node_rank" not in c or any(v is INVALID for v in c.values()) for c in configs or ())
    )


def _group(
    group: Mapping[str, object],
    path: Path,
    num_nodes: int | None,
    labels: dict[str, int],
    owners: dict[tuple[int, str], str],
    rep: Reporter,
) -> NodeGroupSpec | None:
    label = written(group, "label")
    ranks = _expand_all(_node_ranks(group), num_nodes, (*path, "node_ranks"), rep)
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
        _in_cluster(ranks, num_nodes, (*path, "node_ranks"), group.get("node_ranks"), rep)
    env_configs = _env_configs(group, path, ranks, rep)
    hardware_type, units = _hardware(group, path, ranks, num_nodes, rep)
    if isinstance(label, str):
        _one_group_per_unit(label, units, owners, rep)
    hardware_type = _hardware_type_key(group, path, hardware_type, rep)
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
        node_ranks=ranks,
        env_configs=env_configs,
        hardware_type=hardware_type,
        hardware=tuple(unit for unit, _ in units),
        ignore_hardware=ignore,
        path=format_path(path),
    )


def _one_group_per_unit(
    label: str, units: tuple[tuple[HardwareUnit, Path], ...], owners: dict[tuple[int, str], str], rep: Reporter
) -> None:
    """RLinf: hardware of one type on one node is configured by one node group only."""
    for unit, path in units:
        first = owners.setdefault((unit.node_rank, unit.type), label)
        if first != label:
            rep.add(
                path,
                f"{unit.type} hardware of node {unit.node_rank} is already configured by node group '{first}'; "
                "configure a node's hardware of one type in one group (groups may share nodes, not units)",
                unit.node_rank,
            )


def _node_ranks(section: Mapping[str, object]) -> tuple[int, ...] | str | None:
    """`node_ranks` as the schema read it (sections.NODE_RANKS): the ranks, or ALL_RANKS."""
    ranks = written(section, "node_ranks")
    assert ranks is None or isinstance(ranks, tuple | str), ranks
    return ranks


def _expand_all(
    ranks: tuple[int, ...] | str | None, universe: int | tuple[int, ...] | None, path: Path, rep: Reporter
) -> tuple[int, ...] | None:
    """`node_ranks: all` -> every node (a group: 0..num_nodes-1; an env config: its group's nodes), as RLinf."""
    if not isinstance(ranks, str):  # NODE_RANKS' only text is ALL_RANKS
        return ranks
    if universe is None:
        rep.add(
            path,
            "node_ranks: all needs num_nodes (all means ranks 0..num_nodes-1); write num_nodes or list the ranks",
            ALL_RANKS,
        )
        return None
    return tuple(range(universe)) if isinstance(universe, int) else universe


def _hardware_type_key(group: Mapping[str, object], path: Path, hardware_type: str | None, rep: Reporter) -> str | None:
    """RLinf's `hardware_type` without a hardware block: the group's units are found on its nodes, from each
    node's environment (`ROBOT_IP`, ...) when the plan is made, as RLinf enumerates them at start."""
    written_type = written_as(group, "hardware_type", str)
    if written_type is None:
        return hardware_type
    if group.get("hardware") is not None:
        rep.add(
            (*path, "hardware_type"),
            "hardware_type is taken from hardware.type when a hardware block is given (RLinf refuses both); "
            "remove hardware_type",
            written_type,
        )
        return hardware_type
    return written_type if known_type(written_type, (*path, "hardware_type"), rep) is not INVALID else None


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
    for j, entry in enumerate(sections(written_list(group, "env_configs"))):
        epath = (*path, "env_configs", j)
        written_sub = _node_ranks(entry)
        if written_sub == ALL_RANKS and ranks is None:
            continue  # the group's own ranks are already reported
        sub = _expand_all(written_sub, ranks, (*epath, "node_ranks"), rep)
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
                env_vars=written_as(entry, "env_vars", tuple) or (),
                python=written_as(entry, "python_interpreter_path", str),
                path=format_path(epath),
            )
        )
    return tuple(out)


def _hardware(
    group: Mapping[str, object], path: Path, ranks: tuple[int, ...] | None, num_nodes: int | None, rep: Reporter
) -> tuple[str | None, tuple[tuple[HardwareUnit, Path], ...]]:
    """The group's hardware type and units (each with its key path), in node-rank order."""
    block = written_section(group, "hardware")
    kind_name = written_as(block, "type", str)
    if kind_name is None:
        return None, ()
    kind = kind_of(kind_name)
    units: list[tuple[HardwareUnit, Path]] = []
    seen: dict[object, int] = {}
    same: dict[str, int] = {}  # each config as written -> its index (RLinf refuses two equal configs)
    for k, config in enumerate(sections(written_list(block, "configs"))):
        cpath = (*path, "hardware", "configs", k)
        node = written_as(config, "node_rank", int)
        if node is not None and ranks is not None and node not in ranks:
            rep.add(
                (*cpath, "node_rank"),
                f"node_rank {node} is not in this group (its node_ranks are {format_ranks(ranks)}); a {kind.noun} "
                "must be attached to one of its group's nodes",
                node,
            )
        _controllers_in_cluster(config, cpath, num_nodes, rep)
        identity = kind.identity(config)
        if identity is not None and identity in seen:
            rep.add(
                cpath,
                f"this {kind.noun} ({_show_identity(identity)}) is already configured by configs[{seen[identity]}]; "
                f"one hardware config per {kind.noun}",
                _show_identity(identity),
            )
        seen.setdefault(identity, k)
        text = repr(sorted(config.items(), key=lambda kv: kv[0]))
        if identity is None and text in same:
            rep.add(
                cpath,
                f"this {kind.noun} config is the same as configs[{same[text]}] (RLinf refuses equal configs); write "
                f"one config per {kind.noun}, each with its own values",
            )
        same.setdefault(text, k)
        if node is None or any(v is INVALID for v in config.values()):
            continue
        fields = {key: tuple(v) if isinstance(v, list) else v for key, v in config.items() if key != "node_rank"}
        unit = HardwareUnit(type=kind.name, node_rank=node, config=fields, path=format_path(cpath))
        units.append((unit, cpath))
    units.sort(key=lambda u: u[0].node_rank)  # hardware ranks count units in node-rank order
    return kind.name, tuple(units)


def _show_identity(identity: object) -> str:
    parts = identity if isinstance(identity, tuple) else (identity,)
    return ", ".join(str(p) for p in parts if p is not None)


def _controllers_in_cluster(config: Mapping[str, object], path: Path, num_nodes: int | None, rep: Reporter) -> None:
    """`controller_node_rank` (and left_/right_) name a node of the cluster."""
    for key, value in config.items():
        if key.endswith("controller_node_rank") and isinstance(value, int) and num_nodes is not None:
            _in_cluster((value,), num_nodes, (*path, key), value, rep)


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
        cpus = 1.0
        if isinstance(entry, Mapping):
            labels = _node_group_labels(entry)
            segments, place_path = written_as(entry, "placement", tuple), (*path, "placement")
            written_cpus = written_as(entry, "num_cpus", float)
            cpus = cpus if written_cpus is None else written_cpus
            if entry.get("node_group") is INVALID:
                continue
        else:
            labels, segments, place_path = (CLUSTER_GROUP,), entry, path
        if not _groups_exist(labels, known, (*path, "node_group"), rep) or segments is None:
            continue
        _check_placement(segments, labels, groups, num_nodes, place_path, rep)
        placement = Placement(groups=labels, segments=segments)
        out.extend(
            ComponentSpec(name=name, placement=placement, cpus_per_worker=cpus, path=format_path(path))
            for name in names
        )
    return tuple(out)


def _node_group_labels(entry: Mapping[str, object]) -> tuple[str, ...]:
    """An entry's `node_group` as the schema read it (sections.NODE_GROUP_REF: a tuple or a list of labels), or
    the cluster's group when not written."""
    labels = written(entry, "node_group")
    assert labels is None or isinstance(labels, tuple | list), labels
    return tuple(labels or (CLUSTER_GROUP,))


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
            f"'{key}' is not a component name or a comma list of names (letters, digits, '_', '-', '.')"
            + _without_strays(names),
            key,
        )
        return ()
    if len(set(names)) != len(names):
        rep.add(path, f"'{key}' lists a component twice", key)
        return ()
    return names


def _without_strays(names: tuple[str, ...]) -> str:
    """A did-you-mean for names that only carry stray characters at their ends (`actor,env,rollout:` from
    `rollout::`, a typo RLinf takes as a component called 'rollout:'), or nothing when they need more."""
    cleaned = [_STRAY_ENDS.sub("", n) for n in names]
    if not all(_COMPONENT_NAME.fullmatch(n) for n in cleaned):
        return ""
    strays = sorted({ch for n, c in zip(names, cleaned, strict=True) for ch in n.replace(c, "", 1)})
    return f"; did you mean '{','.join(cleaned)}' (without {' '.join(repr(c) for c in strays)})?"


def _groups_exist(labels: tuple[str, ...], known: list[str], path: Path, rep: Reporter) -> bool:
    missing = [label for label in labels if label not in known]
    for label in missing:
        guess = did_you_mean(label, known) or "."
        rep.add(path, f"node group '{label}' is not defined{guess} Defined groups: {', '.join(known)}", label)
    return not missing


def _group_size(label: str, groups: dict[str, NodeGroupSpec], num_nodes: int | None) -> tuple[int, str] | None:
    """(resource count, noun) of a group when it is known without an inventory, else None."""
    if label == NODE_GROUP:
        return (num_nodes, "nodes") if num_nodes is not None else None
    group = groups.get(label)
    if group is None or label == CLUSTER_GROUP:
        return None
    if group.hardware_type is not None:
        kind = kind_of(group.hardware_type)
        listed = {u.node_rank for u in group.hardware}
        if kind.count_keys and any(n not in listed for n in group.node_ranks):
            return None  # a node listing none gets its units from its environment: counted by the planner
        return len(group.hardware), f"{kind.noun}s ({group.hardware_type})"
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
    sizes = [size for label in labels if (size := _group_size(label, groups, num_nodes)) is not None]
    if len(sizes) == len(labels):  # every group's size is known
        total = sum(count for count, _ in sizes)
        beyond = [r for seg in segments for r in seg.resources or () if r >= total]
        if beyond:
            what = " + ".join(f"'{label}' has {n} {noun}" for label, (n, noun) in zip(labels, sizes, strict=True))
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
