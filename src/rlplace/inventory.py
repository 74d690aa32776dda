"""The nodes that exist: declared for offline planning, or read from a live Ray cluster.

This module imports no Ray. A live inventory is built by `rlplace.ray.cluster` and handed to the
planner as the same `Inventory` object.

Declared inventories are untrusted input like configs: an inventory file is read by the config's hardened
reader (`rlplace.config.files`: size, aliases, depth; a missing file is one line), and the node counts of
`--nodes` and of an inventory file are checked against `model.MAX_NODES` and `model.MAX_DEVICES_PER_NODE`
before a single node is built (`check_counts`), the same caps as the config's node counts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rlplace.errors import ConfigError, Problem
from rlplace.model import MAX_DEVICES_PER_NODE, MAX_NODES


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
    r"^\s*(\d+)\s*x\s*(\d+)\s*(?::\s*([A-Za-z0-9_.\-]+))?\s*(?:@\s*([A-Za-z_][A-Za-z0-9_\-]*))?\s*$"
)
_NODES_FORM = "COUNTxGPUS[:MODEL][@RESOURCE] (e.g. '2x8', '8x8:A800', '2x8:Ascend910B@NPU', '2x0')"

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


def parse_nodes(spec: str, num_cpus: float | None = None) -> Inventory:
    """Parse `--nodes COUNTxGPUS[:MODEL][@RESOURCE],...`, groups in node-rank order.

    The form says nothing about CPUs: the nodes get `num_cpus` (default None, not stated, so not checked).

    ``"8x8:A800,8x8:RTX4090,2x0"`` is 8 nodes of 8 A800s, 8 of 8 RTX 4090s, then 2 CPU-only nodes.
    ``"2x8:Ascend910B@NPU"`` is 2 nodes of 8 Ascend NPUs, which Ray reports as resource "NPU" (the `@NPU`
    may be left out for Ascend and Gaudi models, see MODEL_RESOURCES); GPUS counts any accelerator.
    """
    check_counts(spec)
    nodes: list[Node] = []
    for i, term in enumerate(spec.split(",")):
        m = _NODES_TERM.match(term)
        if not m:
            raise ConfigError(
                Problem(path=f"--nodes[{i}]", value=term, message=f"{term.strip()!r} is not {_NODES_FORM}")
            )
        count, gpus, model, resource = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
        if count == 0:
            raise ConfigError(Problem(path=f"--nodes[{i}]", value=term, message="node count must be at least 1"))
        for _ in range(count):
            nodes.append(
                Node(
                    rank=len(nodes),
                    num_gpus=gpus,
                    gpu_model=model if gpus else None,
                    num_cpus=num_cpus,
                    accelerator_resource=accelerator_resource(model, resource),
                )
            )
    return Inventory(tuple(nodes))


#: COUNTxGPUS in a --nodes text, whatever else a term says (a model, a resource, a topology).
_COUNTS = re.compile(r"(?<![\w.])(\d+)\s*x\s*(\d+)")
_DIGITS = len(str(MAX_NODES * MAX_DEVICES_PER_NODE))


def check_counts(spec: str, where: str = "--nodes") -> None:
    """Refuse a `--nodes` text whose nodes are more than MAX_NODES in all, or whose nodes have more than
    MAX_DEVICES_PER_NODE accelerators, before any node is built: `1000000000x8` would take minutes and all memory."""
    total = 0
    for i, term in enumerate(spec.split(",")):
        for count, gpus in _COUNTS.findall(term):
            if len(gpus) > _DIGITS or int(gpus) > MAX_DEVICES_PER_NODE:
                raise ConfigError(Problem(path=f"{where}[{i}]", value=term, message=_too_many_devices(gpus)))
            total += int(count) if len(count) <= _DIGITS else MAX_NODES + 1
            if total > MAX_NODES:
                raise ConfigError(Problem(path=f"{where}[{i}]", value=term, message=_too_many_nodes()))


def _too_many_nodes() -> str:
    return f"that is more than {MAX_NODES} nodes in all, the most rlplace plans for"


def _too_many_devices(gpus: object) -> str:
    return f"{gpus} accelerators on a node is more than the {MAX_DEVICES_PER_NODE} rlplace plans for"


_NODE_KEYS = {
    "count": int,
    "gpus": int,
    "model": str,
    "accelerator": str,
    "cpus": (int, float),
    "labels": dict,
    "resources": dict,
}


def load_inventory(path: str) -> Inventory:
    """Read an inventory YAML for `rlplace plan --inventory FILE`.

    Either ``nodes: "8x8:A800,2x0"`` (the --nodes form) or a list in node-rank order, each entry
    ``{count: 1, gpus: 0, model: null, accelerator: GPU, cpus: 64, labels: {}, resources: {}}`` (every key
    optional; `accelerator` is the Ray resource name of the `gpus`: GPU, NPU, HPU, ...; without `cpus` the
    node's CPUs are not stated, and the plan's CPUs there are not checked).
    """
    from rlplace.config.files import load_yaml_file  # the config's hardened reader (only this entry point needs it)

    data = load_yaml_file(path, kind="inventory")
    where = f"{path}: nodes"
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if isinstance(nodes, str):
        check_counts(nodes, where)
        return parse_nodes(nodes)
    if not isinstance(nodes, list) or not nodes:
        raise ConfigError(
            Problem(path=where, value=nodes, message="expected `nodes:` with a COUNTxGPUS string or a list of nodes")
        )
    check_entries(nodes, where)
    out: list[Node] = []
    for i, entry in enumerate(nodes):
        if not isinstance(entry, dict):
            raise ConfigError(Problem(path=f"{where}[{i}]", value=entry, message="each node is a mapping"))
        for key, value in entry.items():
            want = _NODE_KEYS.get(key)
            if want is None or not isinstance(value, want) or isinstance(value, bool):
                valid = ", ".join(_NODE_KEYS)
                raise ConfigError(
                    Problem(path=f"{where}[{i}].{key}", value=value, message=f"invalid; valid keys: {valid}")
                )
        gpus = entry.get("gpus", 0)
        for _ in range(entry.get("count", 1)):
            out.append(
                Node(
                    rank=len(out),
                    num_gpus=gpus,
                    gpu_model=entry.get("model") if gpus else None,
                    num_cpus=float(entry["cpus"]) if "cpus" in entry else None,
                    labels={str(k): str(v) for k, v in entry.get("labels", {}).items()},
                    resources={str(k): float(v) for k, v in entry.get("resources", {}).items()},
                    accelerator_resource=accelerator_resource(entry.get("model"), entry.get("accelerator")),
                )
            )
    return Inventory(tuple(out))


def check_entries(nodes: list, where: str) -> None:
    """Refuse counts and amounts no node can have, before any node is built: a count below 1, more than MAX_NODES
    nodes in all, more than MAX_DEVICES_PER_NODE accelerators or fewer than none, CPUs or a resource that is not a
    finite number >= 0. (Values of the wrong type are the loop's to report, with the valid keys.)"""
    total = 0
    for i, entry in enumerate(nodes):
        if not isinstance(entry, dict):
            continue
        count, gpus, cpus = entry.get("count", 1), entry.get("gpus", 0), entry.get("cpus", 0)
        if _whole(count) and count < 1:
            raise ConfigError(Problem(path=f"{where}[{i}].count", value=count, message="must be at least 1"))
        if _whole(count):
            total += count
            if total > MAX_NODES:
                raise ConfigError(Problem(path=f"{where}[{i}].count", value=count, message=_too_many_nodes()))
        if _whole(gpus) and not 0 <= gpus <= MAX_DEVICES_PER_NODE:
            message = _too_many_devices(gpus) if gpus > 0 else "must be 0 or more"
            raise ConfigError(Problem(path=f"{where}[{i}].gpus", value=gpus, message=message))
        amounts = {"cpus": cpus, **{f"resources.{k}": v for k, v in _items(entry.get("resources"))}}
        for key, value in amounts.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value >= 0)
            ):
                raise ConfigError(
                    Problem(path=f"{where}[{i}].{key}", value=value, message="must be a number of 0 or more")
                )


def _amount(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _items(value: object) -> list[tuple[object, object]]:
    return list(value.items()) if isinstance(value, dict) else []
