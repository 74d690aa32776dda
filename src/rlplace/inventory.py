"""The nodes that exist: declared for offline planning, or read from a live Ray cluster.

This module imports no Ray. A live inventory is built by `rlplace.ray.join` and handed to the
planner as the same `Inventory` object.

Declared inventories are untrusted input like configs: an inventory file is read by the config's hardened
reader (`rlplace.config.files`: size, aliases, depth; a missing file is one line), and the node counts of
`--nodes` and of an inventory file are checked against `model.MAX_NODES` and `model.MAX_DEVICES_PER_NODE`
before a single node is built (`check_counts`), the same caps as the config's node counts, and their product
against `model.MAX_DEVICES`, which bounds what `placement: all` can ask for.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rlplace.errors import ConfigError, Problem
from rlplace.model import DEFAULT_TOPOLOGY, LABEL_KEY, MAX_DEVICES, MAX_DEVICES_PER_NODE, MAX_NODES


@dataclass(frozen=True)
class Node:
    """One node, identified by its rank (0..N-1)."""

    rank: int
    num_gpus: int = 0
    gpu_model: str | None = None
    #: None: not stated (`--nodes`, an inventory entry without `cpus`), so the plan's CPUs are not checked here.
    num_cpus: float | None = None
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    node_id: str | None = None  # Ray node id, for a live cluster
    address: str | None = None  # IP, for a live cluster
    resources: dict[str, float] = field(default_factory=dict, hash=False)  # custom resources (robots)
    #: The Ray resource name of this node's accelerators (`num_gpus` counts them): "GPU" for NVIDIA/AMD/Intel,
    #: "NPU" for Ascend, "HPU", ... Bundles on this node request accelerators under this name.
    accelerator_resource: str = "GPU"
    #: The environment the node was started with, as far as placement reads it: the variables RLinf's hardware
    #: types fill robot configs from (`ROBOT_IP`, `CAMERA_SERIALS`, `CAN_INTERFACE`, ...). Offline: the inventory
    #: file's `env:` or `--node-env`; live: what `rlplace start` published (rlplace.ray.labels).
    env: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Inventory:
    """Nodes in rank order; `nodes[i].rank == i`."""

    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        for i, node in enumerate(self.nodes):
            if node.rank != i:
                raise ValueError(f"inventory nodes must be in rank order 0..N-1; position {i} has rank {node.rank}")

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, rank: int) -> Node:
        return self.nodes[rank]

    @property
    def total_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)


_NODES_TERM = re.compile(
    r"^\s*(\d+)\s*x\s*(\d+)\s*(?::\s*([A-Za-z0-9_.\-]+))?\s*(?:@\s*([A-Za-z_][A-Za-z0-9_\-]*))?\s*((?:/[^/]*)*)$"
)
_NODES_FORM = (
    "COUNTxGPUS[:MODEL][@RESOURCE][/LEVEL=N...], one term per group of nodes, the terms separated by ',' (e.g. "
    "'2x8', '8x8:A800,2x0', '2x8:Ascend910B@NPU', '1026x4:GB200/rack=18/nvlink_domain=rack')"
)
_UNIT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.\-/]*)\s*=\s*([A-Za-z0-9_\-]+)\s*$")

#: Accelerator models whose Ray resource is not "GPU", recognised by name prefix so that `--nodes
#: 2x8:Ascend910B` plans what Ray will report (Ascend NPUs are "NPU", Intel Gaudi cards "HPU"); any other
#: model is a GPU unless `@RESOURCE` says otherwise.
MODEL_RESOURCES = (("ascend", "NPU"), ("gaudi", "HPU"))


def accelerator_resource(model: str | None, written: str | None = None) -> str:
    """The Ray resource name of a node's accelerators: as written, else from the model's name, else "GPU"."""
    if written:
        return written
    lowered = (model or "").lower()
    return next((res for prefix, res in MODEL_RESOURCES if lowered.startswith(prefix)), "GPU")


@dataclass(frozen=True)
class _Term:
    """One term of `--nodes` (or one inventory entry): `count` alike nodes, and how many consecutive ones share a
    unit of each topology label (`units`: label key -> nodes per unit), innermost level first."""

    count: int
    gpus: int
    model: str | None = None
    resource: str | None = None
    cpus: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)
    units: tuple[tuple[str, int], ...] = ()
    env: dict[str, str] = field(default_factory=dict)


class _Numbering:
    """Unit numbers per label key, counted on across terms: the second term's first rack follows the first's last."""

    def __init__(self) -> None:
        self.next: dict[str, int] = {}

    def values(self, key: str, count: int, per: int) -> list[str]:
        """The label value of each of `count` nodes, `per` consecutive nodes a unit: `rack-0` x per, `rack-1`, ..."""
        first = self.next.get(key, 0)
        self.next[key] = first + count // per
        prefix = _UNIT_PREFIX.get(key, key.rsplit("/", 1)[-1])
        return [f"{prefix}-{first + i // per}" for i in range(count)]


def _nodes(term: _Term, first_rank: int, numbering: _Numbering) -> list[Node]:
    columns = [numbering.values(key, term.count, per) for key, per in term.units]
    return [
        Node(
            rank=first_rank + i,
            num_gpus=term.gpus,
            gpu_model=term.model if term.gpus else None,
            num_cpus=term.cpus,
            labels={**term.labels, **{key: col[i] for (key, _), col in zip(term.units, columns, strict=True)}},
            resources=dict(term.resources),
            accelerator_resource=accelerator_resource(term.model, term.resource),
            env=dict(term.env),
        )
        for i in range(term.count)
    ]


def parse_nodes(spec: str, num_cpus: float | None = None) -> Inventory:
    """Parse `--nodes COUNTxGPUS[:MODEL][@RESOURCE][/LEVEL=N...],...`, groups in node-rank order.

    The form says nothing about CPUs: the nodes get `num_cpus` (default None, not stated, so not checked).

    ``"8x8:A800,8x8:RTX4090,2x0"`` is 8 nodes of 8 A800s, 8 of 8 RTX 4090s, then 2 CPU-only nodes.
    ``"2x8:Ascend910B@NPU"`` is 2 nodes of 8 Ascend NPUs, which Ray reports as resource "NPU" (the `@NPU`
    may be left out for Ascend and Gaudi models, see MODEL_RESOURCES); GPUS counts any accelerator.
    ``"1026x4:GB200/rack=18/nvlink_domain=rack"`` is 57 racks of 18 nodes of 4 GB200s, one NVLink domain per
    rack: each `/LEVEL=N` gives every N consecutive nodes one unit of that topology level (a level name, or a
    label key of a level the config names); N may name an inner level instead, for units that are the same.
    """
    check_counts(spec)
    nodes: list[Node] = []
    numbering = _Numbering()
    for i, text in enumerate(spec.split(",")):
        nodes.extend(_nodes(_term(text, f"--nodes[{i}]", num_cpus), len(nodes), numbering))
    return Inventory(tuple(nodes))


def _term(text: str, where: str, num_cpus: float | None) -> _Term:
    """One `--nodes` term, checked: ConfigError naming the term and what would be valid."""
    m = _NODES_TERM.match(text)
    if not m:
        raise ConfigError(Problem(path=where, value=text, message=f"{text.strip()!r} is not {_NODES_FORM}"))
    count, gpus, model, resource, levels = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4), m.group(5)
    if count == 0:
        raise ConfigError(Problem(path=where, value=text, message="node count must be at least 1"))
    written: dict[str, object] = {}
    for part in levels.split("/")[1:]:
        unit = _UNIT.match(part)
        if not unit:
            raise ConfigError(
                Problem(
                    path=where, value=text, message=f"'/{part}' is not /LEVEL=N (e.g. /rack=18, /nvlink_domain=rack)"
                )
            )
        written[unit.group(1)] = int(unit.group(2)) if unit.group(2).isdigit() else unit.group(2)
    return _Term(count, gpus, model, resource, num_cpus, units=topology_units(written, count, where))


def topology_units(written: Mapping[str, object], count: int, where: str) -> tuple[tuple[str, int], ...]:
    """(label key, nodes per unit) of each level `written` names for `count` nodes, innermost level first:
    a level name (nvlink_domain, rack, zone: its default label key) or a label key, to a number of consecutive
    nodes per unit or to an inner level's name (the same units). ConfigError for what cannot be read or nested."""
    per: dict[str, int] = {}
    for name, value in written.items():
        key = _LEVEL_KEYS.get(name, name)
        if name not in _LEVEL_KEYS:
            close = difflib.get_close_matches(name, _LEVEL_KEYS, n=1, cutoff=0.75)
            if close:
                raise ConfigError(
                    Problem(
                        path=f"{where}.{name}",
                        value=name,
                        message=f"unknown topology level; did you mean {close[0]!r}?",
                    )
                )
            if not LABEL_KEY.match(name):
                raise ConfigError(Problem(path=f"{where}.{name}", value=name, message="not a node label key"))
        if isinstance(value, str) and value in written and value != name:
            value = written[value]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            levels = ", ".join(n for n in written if n != name) or "none written"
            raise ConfigError(
                Problem(
                    path=f"{where}.{name}",
                    value=value,
                    message=f"must be a number of nodes per {name} (at least 1), or the name of another level of the "
                    f"same term whose units it shares ({levels})",
                )
            )
        if count % value:
            raise ConfigError(
                Problem(
                    path=f"{where}.{name}",
                    value=value,
                    message=f"{count} node(s) do not split into units of {value}: the last would hold {count % value}; "
                    f"give the last ones a term of their own (e.g. {count - count % value}x.../{name}={value},"
                    f"{count % value}x.../{name}={count % value})",
                )
            )
        per[key] = value
    nested = [(name, per[key]) for name, key in _LEVEL_KEYS.items() if key in per and name == _LEVEL_NAME[key]]
    for (inner, a), (outer, b) in itertools.pairwise(nested):
        if b % a:
            raise ConfigError(
                Problem(
                    path=f"{where}.{outer}",
                    value=b,
                    message=f"a {outer} of {b} nodes does not hold whole {inner} units of {a}: levels nest, innermost "
                    "first (nvlink_domain, rack, zone)",
                )
            )
    return tuple(per.items())


#: Level names (and the spelling of the default domain key) -> the label key a compact form writes.
_LEVEL_KEYS = {
    **{level.name: level.labels[0] for level in DEFAULT_TOPOLOGY},
    "nvlink-domain": DEFAULT_TOPOLOGY[0].labels[0],
}
_LEVEL_NAME = {level.labels[0]: level.name for level in DEFAULT_TOPOLOGY}
#: Label values a compact form writes: `nvl-0`, `rack-3`, `zone-1`; other keys use their own name.
_UNIT_PREFIX = dict(zip((level.labels[0] for level in DEFAULT_TOPOLOGY), ("nvl", "rack", "zone"), strict=True))


#: COUNTxGPUS in a --nodes text, whatever else a term says (a model, a resource, a topology).
_COUNTS = re.compile(r"(?<![\w.])(\d+)\s*x\s*(\d+)")
_DIGITS = len(str(MAX_NODES * MAX_DEVICES_PER_NODE))


def check_counts(spec: str, where: str = "--nodes", file: str | None = None) -> None:
    """Refuse a `--nodes` text (or an inventory file's `nodes:` string, in `file`) whose nodes are more than
    MAX_NODES in all, have more than MAX_DEVICES_PER_NODE accelerators, or more than MAX_DEVICES together, before
    any node is built: `1000000000x8` would take minutes and all memory."""
    total = devices = 0
    for i, term in enumerate(spec.split(",")):
        for count, gpus in _COUNTS.findall(term):
            if len(gpus) > _DIGITS or int(gpus) > MAX_DEVICES_PER_NODE:
                raise ConfigError(Problem(f"{where}[{i}]", _too_many_devices(gpus), term, file))
            total += int(count) if len(count) <= _DIGITS else MAX_NODES + 1
            if total > MAX_NODES:
                raise ConfigError(Problem(f"{where}[{i}]", _too_many_nodes(), term, file))
            devices += int(count) * int(gpus)
            if devices > MAX_DEVICES:
                raise ConfigError(Problem(f"{where}[{i}]", _too_many_devices_in_all(devices), term, file))


def _too_many_nodes() -> str:
    return f"that is more than {MAX_NODES} nodes in all, the most rlplace plans for"


def _too_many_devices(gpus: object) -> str:
    return f"{gpus} accelerators on a node is more than the {MAX_DEVICES_PER_NODE} rlplace plans for"


def _too_many_devices_in_all(devices: int) -> str:
    return (
        f"that is {devices} accelerators in all (nodes x accelerators so far), more than the {MAX_DEVICES} rlplace "
        f"plans for ({MAX_NODES} nodes of 8)"
    )


_NODE_KEYS: dict[str, type | tuple[type, ...]] = {
    "count": int,
    "gpus": int,
    "model": str,
    "accelerator": str,
    "cpus": (int, float),
    "labels": dict,
    "resources": dict,
    "topology": dict,
    "env": dict,
}


def load_inventory(path: str) -> Inventory:
    """Read an inventory YAML for `rlplace plan --inventory FILE`.

    Either ``nodes: "8x8:A800,2x0"`` (the --nodes form) or a list in node-rank order, each entry
    ``{count: 1, gpus: 0, model: null, accelerator: GPU, cpus: 64, labels: {}, resources: {}, topology: {},
    env: {}}`` (every key optional; `accelerator` is the Ray resource name of the `gpus`: GPU, NPU, HPU, ...;
    without `cpus` the node's CPUs are not stated, and the plan's CPUs there are not checked; `topology` gives the
    entry's nodes their racks and domains without one entry per node, as `/LEVEL=N` does in --nodes: `{rack: 18,
    nvlink_domain: rack}`; `env` is the environment the node is started with, `{ROBOT_IP: "10.0.0.1,10.0.0.2"}`,
    from which robots are enumerated as RLinf does). A problem names the file and line of the value.
    """
    from rlplace.config.files import load_yaml_file  # the config's hardened reader (only this entry point needs it)

    data, text = load_yaml_file(path, kind="inventory")
    where = _Where(path, text)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if isinstance(nodes, str):
        check_counts(nodes, "nodes", file=path)
        return parse_nodes(nodes)
    if not isinstance(nodes, list) or not nodes:
        raise where.error(("nodes",), nodes, "expected `nodes:` with a COUNTxGPUS string or a list of nodes")
    check_entries(nodes, where)
    out: list[Node] = []
    numbering = _Numbering()
    for i, entry in enumerate(nodes):
        out.extend(_nodes(_entry(entry, i, where), len(out), numbering))
    return Inventory(tuple(out))


def _entry(entry: object, i: int, where: _Where) -> _Term:
    """One inventory entry, checked: ConfigError with the file and line of the bad value."""
    if not isinstance(entry, dict):
        raise where.error(("nodes", i), entry, "each node is a mapping")
    for key, value in entry.items():
        want = _NODE_KEYS.get(key)
        if want is None or not isinstance(value, want) or isinstance(value, bool):
            raise where.error(("nodes", i, key), value, f"invalid; valid keys: {', '.join(_NODE_KEYS)}")
    for key in ("labels", "resources"):
        for name in entry.get(key, {}):
            if not isinstance(name, str):
                raise where.error(("nodes", i, key, name), name, f"a {key[:-1]} name must be text")
    for name, value in entry.get("labels", {}).items():
        if not isinstance(value, str):
            raise where.error(
                ("nodes", i, "labels", name),
                value,
                f'a label value must be text, as Ray\'s node labels are: write {name}: "{value}"',
            )
    for name, value in entry.get("resources", {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise where.error(("nodes", i, "resources", name), value, "a resource amount must be a number")
    count = entry.get("count", 1)
    try:
        units = topology_units(entry.get("topology", {}), count, f"nodes[{i}].topology")
    except ConfigError as e:
        (problem,) = e.problems
        level = problem.path.rsplit(".", 1)[-1]
        raise where.error(("nodes", i, "topology", level), problem.value, problem.message) from None
    return _Term(
        count,
        entry.get("gpus", 0),
        entry.get("model"),
        entry.get("accelerator"),
        float(entry["cpus"]) if "cpus" in entry else None,
        dict(entry.get("labels", {})),
        {k: float(v) for k, v in entry.get("resources", {}).items()},
        units,
        _env_entry(entry.get("env", {}), i, where),
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NODE_SPAN = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
_NODE_ENV_FORM = "RANK[-RANK]:NAME=VALUE (e.g. '1:ROBOT_IP=10.0.0.1,10.0.0.2' or '0-3:CAN_INTERFACE=can0')"


def _env_entry(env: dict, i: int, where: _Where) -> dict[str, str]:
    """An inventory entry's `env:`: variable names to text (numbers are written as text, as the shell has them)."""
    out = {}
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise where.error(("nodes", i, "env", key), key, "is not an environment variable name")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise where.error(("nodes", i, "env", key), value, f'must be text, as the shell has it: {key}: "..."')
        out[key] = str(value)
    return out


def with_node_env(inventory: Inventory, terms: list[str]) -> Inventory:
    """`--node-env RANKS:NAME=VALUE` (repeatable): the environment nodes are started with, for offline plans.

    A later term for the same node and name wins; the value is everything after the first `=`, commas included
    (`1:ROBOT_IP=10.0.0.1,10.0.0.2`: two robots on node 1)."""
    env = [dict(n.env) for n in inventory.nodes]
    for term in terms:
        ranks_text, colon, assignment = term.partition(":")
        name, equals, value = assignment.partition("=")
        span = _NODE_SPAN.fullmatch(ranks_text)
        if not colon or not equals or not span or not _ENV_NAME.fullmatch(name.strip()):
            raise ConfigError(Problem(path="--node-env", value=term, message=f"{term!r} is not {_NODE_ENV_FORM}"))
        first, last = int(span.group(1)), int(span.group(2) or span.group(1))
        if last < first:
            raise ConfigError(Problem(path="--node-env", value=term, message=f"{ranks_text!r} runs backwards"))
        if last >= len(inventory):
            raise ConfigError(
                Problem(
                    path="--node-env",
                    value=term,
                    message=f"node {max(first, len(inventory))} is not in the inventory (nodes 0-{len(inventory) - 1})",
                )
            )
        for r in range(first, last + 1):
            env[r][name.strip()] = value
    return Inventory(tuple(replace(n, env=e) for n, e in zip(inventory.nodes, env, strict=True)))


class _Where:
    """Where a value of the inventory file is written: `nodes.yaml:4`, found only when there is a problem."""

    def __init__(self, file: str, text: str) -> None:
        self.file, self.text = file, text

    def error(self, path: tuple, value: object, message: str) -> ConfigError:
        shown = "nodes" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path[1:])
        return ConfigError(Problem(path=shown, value=value, message=message, file=self.file, line=self._line(path)))

    def _line(self, path: tuple) -> int | None:
        """The 1-based line of the key (or list item) at `path`, or of its nearest ancestor found."""
        import yaml

        try:
            node = yaml.compose(self.text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            return None
        line = None
        for key in path:
            if isinstance(node, yaml.MappingNode):
                found = next(((k, v) for k, v in node.value if k.value == str(key)), None)
                if found is None:
                    break
                line, node = found[0].start_mark.line + 1, found[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                node = node.value[key]
                line = node.start_mark.line + 1
            else:
                break
        return line


def check_entries(nodes: list, where: _Where) -> None:
    """Refuse counts and amounts no node can have, before any node is built: a count below 1, more than MAX_NODES
    nodes in all, more than MAX_DEVICES_PER_NODE accelerators or fewer than none, CPUs or a resource that is not a
    finite number >= 0. (Values of the wrong type are `_entry`'s to report, with the valid keys.)"""
    total = devices = 0
    for i, entry in enumerate(nodes):
        if not isinstance(entry, dict):
            continue
        count, gpus = entry.get("count", 1), entry.get("gpus", 0)
        if _whole(count) and count < 1:
            raise where.error(("nodes", i, "count"), count, "must be at least 1")
        if _whole(count):
            total += count
            if total > MAX_NODES:
                raise where.error(("nodes", i, "count"), count, _too_many_nodes())
        if _whole(gpus) and not 0 <= gpus <= MAX_DEVICES_PER_NODE:
            raise where.error(("nodes", i, "gpus"), gpus, _too_many_devices(gpus) if gpus > 0 else "must be 0 or more")
        if _whole(count) and _whole(gpus):
            devices += count * gpus
            if devices > MAX_DEVICES:
                raise where.error(("nodes", i, "gpus"), gpus, _too_many_devices_in_all(devices))
        amounts: dict[tuple[object, ...], object] = {
            ("cpus",): entry.get("cpus", 0),
            **{("resources", k): v for k, v in _items(entry.get("resources"))},
        }
        for key, value in amounts.items():
            if not _amount(value):
                raise where.error(("nodes", i, *key), value, "must be a number of 0 or more")


def _amount(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _items(value: object) -> list[tuple[object, object]]:
    return list(value.items()) if isinstance(value, dict) else []
