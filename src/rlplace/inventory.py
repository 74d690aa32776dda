"""The nodes that exist: declared for offline planning, or read from a live Ray cluster.

This module imports no Ray. A live inventory is built by `rlplace.ray.cluster` and handed to the
planner as the same `Inventory` object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from rlplace.errors import ConfigError, Problem


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


_NODE_KEYS = {
    "count": int,
    "gpus": int,
    "model": str,
    "accelerator": str,
    "cpus": (int, float),
    "labels": dict,
    "resources": dict,
    "env": dict,
}


def load_inventory(path: str) -> Inventory:
    """Read an inventory YAML for `rlplace plan --inventory FILE`.

    Either ``nodes: "8x8:A800,2x0"`` (the --nodes form) or a list in node-rank order, each entry
    ``{count: 1, gpus: 0, model: null, accelerator: GPU, cpus: 64, labels: {}, resources: {}, env: {}}`` (every
    key optional; `accelerator` is the Ray resource name of the `gpus`: GPU, NPU, HPU, ...; without `cpus` the
    node's CPUs are not stated, and the plan's CPUs there are not checked; `env` is the environment the node is
    started with, `{ROBOT_IP: "10.0.0.1,10.0.0.2"}`, from which robots are enumerated as RLinf does).
    """
    import yaml  # only this entry point needs it

    where = f"{path}: nodes"
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(Problem(path="--inventory", value=path, message=f"cannot read the inventory: {e}")) from e
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if isinstance(nodes, str):
        return parse_nodes(nodes)
    if not isinstance(nodes, list) or not nodes:
        raise ConfigError(
            Problem(path=where, value=nodes, message="expected `nodes:` with a COUNTxGPUS string or a list of nodes")
        )
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
        env = _env_entry(entry.get("env", {}), f"{where}[{i}].env")
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
                    env=dict(env),
                )
            )
    return Inventory(tuple(out))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NODE_SPAN = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
_NODE_ENV_FORM = "RANK[-RANK]:NAME=VALUE (e.g. '1:ROBOT_IP=10.0.0.1,10.0.0.2' or '0-3:CAN_INTERFACE=can0')"


def _env_entry(env: dict, where: str) -> dict[str, str]:
    """An inventory entry's `env:`: variable names to text (numbers are written as text, as the shell has them)."""
    out = {}
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise ConfigError(Problem(path=where, value=key, message="is not an environment variable name"))
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(
                Problem(path=f"{where}.{key}", value=value, message=f'must be text, as the shell has it: {key}: "..."')
            )
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
