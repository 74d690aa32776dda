"""The Plan: pure data saying where every worker goes and what to reserve on every node.

It is the planner's output and the Ray layer's only input. It serialises to the JSON contract of the
planner issue (`Plan.to_dict`): top-level `workers`, `warnings`, `settings`, plus `bundles`, `nodes`
and `groups` for tools that want more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from rlplace.model import ProcessShape

#: The custom resources of a bundle without any: one dict shared by all of them (bundles are read-only).
NO_RESOURCES: dict[str, float] = {}

#: The env vars of a worker without any: one dict shared by all of them (workers are read-only).
NO_ENV: dict[str, str] = {}


@dataclass(frozen=True)
class EffectiveSettings:
    """The settings the plan was made with, every derived value filled in."""

    mode: str  # auto | manual
    strategy: str  # default | disaggregate | colocate | manual | node_groups
    env_strategy: str  # default | device-colocate | node-affinity
    is_colocated: bool
    enable_offload: bool
    buffer_worker_num: int
    dialect: str = "pools"


class Bundle(NamedTuple):
    """One reservation on one node: a device slot (or several devices), or CPU for CPU-only workers.

    Workers sharing a device share its bundle; each of the k co-residents takes `num_gpus = 1/k`.
    `resources` holds custom resources such as an exclusive robot.
    `seats` is that k, as planned: a seat stays the bundle's after its worker leaves (a shrink), so a later
    growth can take it at the same share. `reservation` says which placement groups hold the bundle: 0 the
    plan's own (one group per node), k the k-th resize step that reserved bundles (one group per node and step);
    Ray cannot shrink a group, so a bundle leaves the plan only with every other bundle of its group
    (docs/planner.md, "Incremental planning").
    A named tuple, as `Worker` is, for speed (a 4,096-node plan builds ~36k bundles): read-only.
    """

    index: int  # type: ignore[assignment]  # the bundle's index in the plan; tuple's index() is never called on one
    node_rank: int
    gpus: tuple[int, ...]  # node-local GPU indices this bundle stands for (empty: CPU-only)
    num_cpus: float
    resources: dict[str, float] = NO_RESOURCES
    group: str | None = None  # node group or pool it belongs to
    #: Ray resource name of the node's accelerators that `gpus` counts: "GPU", or "NPU", "HPU", ...
    accelerator: str = "GPU"
    seats: int = 1
    reservation: int = 0

    @property
    def num_gpus(self) -> int:
        return len(self.gpus)


#: Custom Ray resource standing for one exclusive hardware unit (a robot); the planner puts it in the
#: unit's bundle and the Ray layer registers it on the unit's node. Named here, in one place.
def hardware_resource_name(hw_type: str, index: int) -> str:
    """``hardware_resource_name("Franka", 0) == "rlplace/robot/franka/0"`` (index: rank in its node group)."""
    return f"rlplace/robot/{hw_type.lower()}/{index}"


class Worker(NamedTuple):
    """One worker process of a component.

    A named tuple, not a dataclass, for speed: a colocate plan of 4,096 x 8 GPUs builds ~100k workers, and the
    planner makes them at C speed (`tuple.__new__` over zipped columns, see `planner.builder`), 0.7x the time of
    a slotted dataclass's `__init__`. Read-only; `_replace` makes a changed copy. Workers of one node and group
    may share one `env_vars` dict.
    """

    component: str
    rank: int
    world_size: int
    node_rank: int | None  # None: not pinned (strategy default)
    gpus: tuple[int, ...]  # node-local GPU indices; empty for CPU-only workers or when unpinned
    gpu_fraction: float  # share of each GPU in `gpus` (1/k for k co-residents); requested GPUs if unpinned
    num_cpus: float
    group: str | None  # node group or pool placed through
    bundle: int | None = None  # index into Plan.bundles; None when no placement group is used
    local_rank: int = 0  # index among this component's workers on the same node
    env_vars: dict[str, str] = NO_ENV
    python: str | None = None
    hardware: dict[str, object] | None = None
    #: Placed through a robot group, `node`, or a group without accelerators on a node that has GPUs: the
    #: worker sees all of its node's GPUs without reserving any (RLinf semantics); launch must not hide them.
    sees_node_gpus: bool = False
    #: The devices the worker must see when Ray's own GPU assignment cannot say it (launch sets the visible
    #: devices to these): every GPU of its node when `sees_node_gpus`; its own `gpus` for a process spanning
    #: several GPUs that other processes also use (it asks Ray for none: each GPU is reserved once, in the
    #: bundle of that GPU). None: Ray's assignment is the truth.
    visible_gpus: tuple[int, ...] | None = None
    #: Runs in the driver process instead of as a Ray actor (RLightning's `remote_<component>: false`):
    #: no node, no bundle, nothing reserved.
    in_driver: bool = False
    #: The name the worker's actor was started with, where it is not `rlplace:<component>:<rank>`: a resize
    #: renumbered the worker (an actor keeps its name), or gave a new worker a rank whose name a renumbered one
    #: holds. None: the name follows the rank.
    actor_name: str | None = None

    @property
    def name(self) -> str:
        """The Ray actor name of this worker (driver-local workers use it as their name too)."""
        return self.actor_name or f"rlplace:{self.component}:{self.rank}"

    @property
    def hardware_units(self) -> list[dict[str, object]]:
        """The hardware units the worker owns: its record itself for one unit; for several (a process on robots
        `0-1:0`), the record is `{type, node_rank, units: [...]}` and each of `units` is one unit's record."""
        if not self.hardware:
            return []
        units = self.hardware.get("units")
        if not units:
            return [self.hardware]
        assert isinstance(units, list), units  # the records the planner lists (planner/node_groups._units_slot)
        return list(units)

    @property
    def num_gpus(self) -> float:
        """What to request from Ray for this worker."""
        if self.gpus:
            return self.gpu_fraction * len(self.gpus)
        return self.gpu_fraction if self.node_rank is None and not self.in_driver else 0.0


@dataclass(frozen=True)
class GroupSummary:
    """A node group or pool as planned: its nodes and GPUs per node (for export and pictures)."""

    name: str
    node_ranks: tuple[int, ...]
    gpus_per_node: tuple[int, ...]
    components: dict[str, tuple[int, ...]] = field(default_factory=dict, hash=False)  # comp -> global ranks


@dataclass(frozen=True)
class SizeRange:
    """The sizes an elastic component may take (`cluster.elastic`): `min` to `max` workers, `start` as first
    planned (what growing back after a lost node aims for)."""

    min: int
    max: int
    start: int


@dataclass(frozen=True)
class PlanTopology:
    """The topology the plan was made with (docs/planner.md, "Topology"): for each level some node carries, innermost
    first, the label keys read and every node's unit, by node rank: the label value, or None for a node carrying
    none (a unit of its own: a node without an NVLink-domain label is its own domain). The Ray layer checks the
    live nodes' labels against these; the estimate counts the bytes crossing each level with them."""

    labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    units: dict[str, tuple[str | None, ...]] = field(default_factory=dict)

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(self.units)

    def unit(self, level: str, node: int) -> str | int:
        """The node's unit at `level`: its label value, or its rank when it carries none (a unit of its own), or
        is not one this topology was read from."""
        values = self.units[level]
        value = values[node] if node < len(values) else None
        return node if value is None else value

    def nearest(self, holders: Sequence[int]) -> Callable[[int, int], int]:
        """`nearest(node, default)`: `node` itself when it is one of `holders`, else the first of `holders` in its
        NVLink domain, else its rack, else its zone, else `default`. Where a node reads the weights from: the
        estimate counts weight sync so, and `sync_weights(source="nearest")` sends it so."""
        held = set(holders)
        first_in: list[dict[str | int, int]] = [{} for _ in self.levels]
        for i, level in enumerate(self.levels):
            for h in holders:
                first_in[i].setdefault(self.unit(level, h), h)

        def nearest(node: int, default: int) -> int:
            if node in held:
                return node
            for i, level in enumerate(self.levels):
                found = first_in[i].get(self.unit(level, node))
                if found is not None:
                    return found
            return default

        return nearest

    def to_dict(self) -> dict:
        return {
            "levels": [{"name": name, "labels": list(keys)} for name, keys in self.labels.items()],
            "nodes": {name: list(values) for name, values in self.units.items()},
        }

    @classmethod
    def from_dict(cls, d: dict) -> PlanTopology:
        return cls(
            {lv["name"]: tuple(lv["labels"]) for lv in d.get("levels", ())},
            {name: tuple(values) for name, values in d.get("nodes", {}).items()},
        )


@dataclass(frozen=True)
class MixedGroup:
    """A model-parallel group the plan places across NVLink domains (a written range that splits it, or a group
    larger than every domain): `component` ranks `ranks` of kind `kind` span the domains `domains`."""

    component: str
    kind: str
    ranks: tuple[int, ...]
    domains: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    workers: tuple[Worker, ...]
    bundles: tuple[Bundle, ...]
    settings: EffectiveSettings
    groups: tuple[GroupSummary, ...] = ()
    warnings: tuple[str, ...] = ()
    uses_placement_groups: bool = True
    #: Where this plan places differently from the framework the config comes from (RLightning, RLinf), said
    #: once per topic and only when it changes this plan; not problems (see docs/migrating.md).
    notes: tuple[str, ...] = ()
    #: Devices per process of components whose processes span several devices, with where that came from.
    process_shapes: dict[str, ProcessShape] = field(default_factory=dict, hash=False)
    #: Components that may change size while the job runs, with their ranges (`cluster.elastic`).
    elastic: dict[str, SizeRange] = field(default_factory=dict, hash=False)
    #: The levels of the cluster's topology and each node's unit at each (empty: topology-blind).
    topology: PlanTopology = field(default_factory=PlanTopology, hash=False)
    #: Model-parallel groups whose ranks span several NVLink domains (each named in a warning too).
    split_groups: tuple[MixedGroup, ...] = ()
    #: The model's size in bytes as the config writes it (`cluster.model_bytes`), for the estimate; None: unsaid.
    model_bytes: int | None = None

    def by_component(self, component: str) -> list[Worker]:
        return sorted((w for w in self.workers if w.component == component), key=lambda w: w.rank)

    @property
    def components(self) -> list[str]:
        seen: dict[str, None] = {}
        for w in self.workers:
            seen.setdefault(w.component, None)
        return list(seen)

    @classmethod
    def from_dict(cls, d: dict) -> Plan:
        """Rebuild a plan from `to_dict()` output (e.g. a saved `rlplace plan --format json`); equal to
        the plan that wrote it. Extra keys (`estimate`, `compare`) are ignored; a plan saved before bundles
        carried `seats` gets its residents' count."""
        seats = Counter(w["bundle"] for w in d["workers"] if w["bundle"] is not None)
        return cls(
            workers=tuple(
                Worker(
                    w["component"],
                    w["rank"],
                    w["world_size"],
                    w["node_rank"],
                    tuple(w["gpus"]),
                    w["gpu_fraction"],
                    w["num_cpus"],
                    w["group"],
                    w["bundle"],
                    w["local_rank"],
                    dict(w["env_vars"]),
                    w["python"],
                    w["hardware"],
                    w.get("sees_node_gpus", False),
                    None if w.get("visible_gpus") is None else tuple(w["visible_gpus"]),
                    w.get("in_driver", False),
                    w.get("actor_name"),
                )
                for w in d["workers"]
            ),
            bundles=tuple(
                Bundle(
                    b["index"],
                    b["node_rank"],
                    tuple(b["gpus"]),
                    b["num_cpus"],
                    dict(b["resources"]),
                    b["group"],
                    b.get("accelerator", "GPU"),
                    b.get("seats", seats.get(b["index"], 1)),
                    b.get("reservation", 0),
                )
                for b in d["bundles"]
            ),
            settings=EffectiveSettings(**d["settings"]),
            groups=tuple(
                GroupSummary(
                    g["name"],
                    tuple(g["node_ranks"]),
                    tuple(g["gpus_per_node"]),
                    {c: tuple(r) for c, r in g["components"].items()},
                )
                for g in d["groups"]
            ),
            warnings=tuple(d["warnings"]),
            uses_placement_groups=d["uses_placement_groups"],
            notes=tuple(d.get("notes", ())),
            process_shapes={c: ProcessShape(**p) for c, p in d.get("process_shapes", {}).items()},
            elastic={c: SizeRange(**r) for c, r in d.get("elastic", {}).items()},
            topology=PlanTopology.from_dict(d.get("topology", {})),
            split_groups=tuple(
                MixedGroup(g["component"], g["kind"], tuple(g["ranks"]), tuple(g["domains"]))
                for g in d.get("split_groups", ())
            ),
            model_bytes=d.get("model_bytes"),
        )

    def to_dict(self) -> dict:
        """The JSON contract of `rlplace plan --format json`."""
        return {
            "settings": asdict(self.settings),
            "uses_placement_groups": self.uses_placement_groups,
            "workers": [_worker_dict(w) for w in self.workers],
            "bundles": [
                {
                    "index": b.index,
                    "node_rank": b.node_rank,
                    "gpus": list(b.gpus),
                    "num_cpus": b.num_cpus,
                    "resources": dict(b.resources),
                    "group": b.group,
                    "accelerator": b.accelerator,
                    "seats": b.seats,
                    "reservation": b.reservation,
                }
                for b in self.bundles
            ],
            "groups": [
                {
                    "name": g.name,
                    "node_ranks": list(g.node_ranks),
                    "gpus_per_node": list(g.gpus_per_node),
                    "components": {c: list(r) for c, r in g.components.items()},
                }
                for g in self.groups
            ],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "process_shapes": {c: asdict(p) for c, p in self.process_shapes.items()},
            "elastic": {c: asdict(r) for c, r in self.elastic.items()},
            "topology": self.topology.to_dict(),
            "split_groups": [asdict(g) for g in self.split_groups],
            "model_bytes": self.model_bytes,
        }


def _worker_dict(w: Worker) -> dict:
    return {
        "component": w.component,
        "rank": w.rank,
        "world_size": w.world_size,
        "node_rank": w.node_rank,
        "local_rank": w.local_rank,
        "gpus": list(w.gpus),
        "gpu_fraction": w.gpu_fraction,
        "num_cpus": w.num_cpus,
        "group": w.group,
        "bundle": w.bundle,
        "env_vars": dict(w.env_vars),
        "python": w.python,
        "hardware": w.hardware,
        "sees_node_gpus": w.sees_node_gpus,
        "visible_gpus": None if w.visible_gpus is None else list(w.visible_gpus),
        "in_driver": w.in_driver,
        "actor_name": w.actor_name,
    }
