"""The one model both config dialects normalise into (docs/decisions.md, "One model, two front doors").

A `JobSpec` is what the user asked for, checked and normalised, before any inventory is known. The
planner turns (JobSpec, Inventory) into a Plan. Nothing downstream of the config loader reads YAML or
knows key spellings; the only trace of the dialect is `JobSpec.dialect`, kept for messages and for the
one rule that differs (how worker counts meet resource ranks, see `ComponentSpec`).

All objects are frozen: a spec is data, shared by the planner, the CLI and the Ray layer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, get_args

#: `verl`: a verl trainer config, its resource pools as node groups of declared GPUs per node (config/verl).
Dialect = Literal["pools", "node_groups", "verl"]
Mode = Literal["auto", "manual"]
Strategy = Literal["default", "disaggregate", "colocate"]
EnvStrategy = Literal["default", "device-colocate", "node-affinity"]
#: Their values, in order (the config's choices: config/sections.py).
MODES: tuple[Mode, ...] = get_args(Mode)
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
ENV_STRATEGIES: tuple[EnvStrategy, ...] = get_args(EnvStrategy)

#: Node-group labels the scheduler owns; users cannot define them.
CLUSTER_GROUP = "cluster"  # every node, its detected accelerators are the resources
NODE_GROUP = "node"  # every node, the node itself is the resource, ranks are node ranks
RESERVED_LABELS = (CLUSTER_GROUP, NODE_GROUP)

#: The components of the placement dialect with worker counts and GPU ranges of their own (`<c>_worker_num`,
#: `<c>_each_gpu_num`, a range in a pool): what auto mode always places and an exported pool names. The buffer
#: follows train (its shards live on train's nodes), so it has none of these.
COUNTED_COMPONENTS = ("train", "eval", "env")
#: The component names of the placement dialect (docs/config.md, 'Dialect "pools"').
POOL_COMPONENTS = (*COUNTED_COMPONENTS, "buffer")

#: The most nodes a plan is made for: `--nodes`, inventory files and the config's node counts (`num_nodes`,
#: `num_node`) stop here, so that any accepted inventory plans in well under a second (16,384 x 8 GPUs: 0.5 s
#: parsed, planned and tabled; 1,000,000 x 8 took 6.8 s). Four times the largest cluster the benchmarks plan.
MAX_NODES = 16_384
#: The most accelerators one node may have (`--nodes 1xGPUS`, an inventory's `gpus`, a pool's `num_gpus`); real
#: nodes have 8 or 16, simulated ones a few more.
MAX_DEVICES_PER_NODE = 1_024
#: The most accelerators (or robots) an inventory holds in all: 16,384 nodes of 8. Every count checked alone let
#: `{count: 16384, gpus: 1024}` (38 bytes) through: 16.7 million accelerators, and `placement: all` over them built
#: as many workers until memory ran out. `all` over the most accepted plans in about 3 s on the loaded 2-core
#: machine (its table; 1,048,576 took 51 s and 2.6 GB as JSON).
MAX_DEVICES = MAX_NODES * 8
#: The most robots (hardware units, of every type) a plan is made for: those a config lists and those RLinf's
#: rule makes from a node's environment (one per comma-separated `ROBOT_IP` value, `count: 16384` nodes alike).
#: Each unit is a row of the table, a box of the picture: 16,384 took 15 s to plan and table; 1,024 take about 1 s.
MAX_HARDWARE_UNITS = 1_024


@dataclass(frozen=True)
class PlacementSettings:
    """The `placement` block and the flags beside it, exactly as the user wrote them.

    `None` means "not written": the planner derives the effective value (and says so in the plan's
    settings) rather than the loader silently filling it in.
    """

    mode: Mode = "auto"
    strategy: Strategy | None = None
    env_strategy: EnvStrategy | None = None
    is_colocated: bool | None = None
    enable_offload: bool | None = None
    buffer_worker_num: int | Literal["auto"] | None = None

    @property
    def auto_strategy(self) -> Strategy:
        """The strategy auto mode uses: as written, else colocate when `is_colocated: true`, else default."""
        return self.strategy or ("colocate" if self.is_colocated else "default")


@dataclass(frozen=True)
class Segment:
    """One comma-separated part of a placement: resource ranks, optionally with process ranks.

    `resources is None` means `all` (every resource of the groups). `processes is None` means one
    process per resource, numbered on from the previous segment. Ranks are kept in written order.
    """

    resources: tuple[int, ...] | None
    processes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Placement:
    """Where a component's workers go: ranks inside one or more node groups (or pools).

    With several groups, resource ranks count across the groups in the order listed.
    """

    groups: tuple[str, ...]
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class ProcessShape:
    """How many devices each process of a component spans, and with which stride, and where that came from.

    RLinf's reasoning configs give rollout processes `rollout.tensor_parallel_size` GPUs each: packed
    (stride 1), or strided by actor TP // rollout TP when collocated with a larger actor TP.
    """

    devices_per_process: int
    stride: int = 1
    origin: str = ""  # the keys and values it was read from, for the plan's explanation


@dataclass(frozen=True)
class ComponentSpec:
    """A logical component (train, eval, env, buffer, actor, rollout, agent, ...).

    Two ways to meet resources, one per dialect (docs/decisions.md, "Workers over resources"):
    - counted (`pools` dialect): `num_workers` workers of `gpus_per_worker` GPUs each (fractions allowed)
      are packed in index order onto the GPUs of `placement`; `num_workers is None` means "not written".
    - placement strings (`node_groups` dialect): `num_workers is None` and the segments' process ranks
      decide how many processes sit on which resources.
    `placement is None` leaves the component to the auto planner.
    """

    name: str
    placement: Placement | None = None
    num_workers: int | None = None
    gpus_per_worker: float = 1.0
    cpus_per_worker: float = 1.0
    path: str = ""  # key path of the definition, for messages
    #: False: the component runs in the driver process, not as Ray actors (RLightning's `remote_<c>: false`).
    remote: bool = True
    #: Devices per process taken from a whole training config (RLinf's model-parallel placement); None: as
    #: the placement or worker counts say.
    process_shape: ProcessShape | None = None
    #: Groups of consecutive ranks that must share an NVLink domain (RLinf's model-parallel sizes); None: none.
    model_parallel: ModelParallel | None = None
    #: The placement is rlplace's choice, not the user's (RLinf's AUTO mode widens the actor to every GPU): the
    #: planner may then leave GPUs idle to keep model-parallel groups inside NVLink domains.
    chosen: bool = False


@dataclass(frozen=True)
class EnvConfigSpec:
    """Software environment of a subset of a node group's nodes."""

    node_ranks: tuple[int, ...]
    env_vars: tuple[tuple[str, str], ...] = ()  # ordered (key, value) pairs, keys unique per node
    python: str | None = None  # absolute interpreter path
    path: str = ""


@dataclass(frozen=True)
class HardwareUnit:
    """One unit of non-accelerator hardware (a robot), attached to one node.

    `config` holds the typed fields of its `type` (Franka: robot_ip, camera_serials, ...), as written.
    """

    type: str
    node_rank: int
    config: dict[str, object] = field(default_factory=dict, hash=False)
    path: str = ""


@dataclass(frozen=True)
class NodeGroupSpec:
    """A labelled set of node ranks and what counts as one resource in it.

    Resource kind: `hardware` given -> those units (ranks in node-rank order); else the nodes'
    accelerators (known only from the inventory); else, or with `ignore_hardware`, the nodes themselves.
    In the `pools` dialect a manual pool is a node group too: `gpus_per_node` is its declared
    `num_gpus` (one entry per node) and its resource ranks are pool-global GPU indices.
    """

    label: str
    node_ranks: tuple[int, ...]
    env_configs: tuple[EnvConfigSpec, ...] = ()
    hardware_type: str | None = None
    hardware: tuple[HardwareUnit, ...] = ()
    ignore_hardware: bool = False
    gpus_per_node: tuple[int, ...] | None = None  # declared by a pool; None = read from the inventory
    node_ids: tuple[int | str, ...] | None = None  # pools bound to named nodes (node_ids), as written
    path: str = ""


@dataclass(frozen=True)
class ElasticRange:
    """`cluster.elastic.<component>`: the sizes a component may take while the job runs (docs/guide.md, "Elastic
    components").

    The written worker count is the starting size; `max is None` means "not written": the starting size, known
    once the planner counts the workers. `path`, `file` and `line` locate the entry for errors the planner finds.
    """

    component: str
    min: int = 1
    max: int | None = None
    path: str = ""
    file: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TopologyLevel:
    """One level of the cluster's topology (`cluster.topology`, docs/config.md "Topology"): its name and the node label
    keys that name a node's unit at that level, the first one a node carries winning. `written` says the config
    named the level, so a level no node carries is worth a warning (the plan is topology-blind there)."""

    name: str
    labels: tuple[str, ...]
    written: bool = False
    path: str = ""
    file: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)


#: The levels, innermost first, and their default label keys. Ray refuses custom `--labels` keys under `ray.io/`,
#: so the domain's own key is `nvlink-domain`; `ray.io/gpu-domain` is read too, where a platform sets it. Ray sets
#: `ray.io/availability-zone` itself (from RAY_NODE_ZONE). A node without a domain label is its own domain.
NVLINK_DOMAIN, RACK, ZONE = "nvlink_domain", "rack", "zone"
DEFAULT_TOPOLOGY = (
    TopologyLevel(NVLINK_DOMAIN, ("nvlink-domain", "ray.io/gpu-domain")),
    TopologyLevel(RACK, ("rack",)),
    TopologyLevel(ZONE, ("ray.io/availability-zone",)),
)
TOPOLOGY_LEVELS = tuple(level.name for level in DEFAULT_TOPOLOGY)
#: A node label key as Ray takes it: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters,
#: alphanumeric at both ends with `-_.` inside (Kubernetes' rule, which `ray start --labels` enforces).
LABEL_KEY = re.compile(r"^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class ModelParallel:
    """Groups of consecutive ranks of a component that talk over NVLink every step (RLinf's Megatron
    tensor/context-parallel and expert-parallel groups): rank r is in group r // size of each kind. The planner
    keeps each group inside one NVLink domain where it chooses the GPUs and warns where the ranks are written."""

    #: (kind, ranks per group, the keys it was read from), e.g. ("tensor-parallel", 4, "actor.model....: 4").
    groups: tuple[tuple[str, int, str], ...]

    @property
    def size(self) -> int:
        """Consecutive ranks a layout must keep together so that every group of every kind stays in one domain."""
        return math.lcm(*(size for _, size, _ in self.groups)) if self.groups else 1


@dataclass(frozen=True)
class EnvValue:
    """A config value that came from the environment (`${oc.env:VAR}`): outputs show it as written, not its value,
    unless the user asks (`--show-env`), since such variables often hold secrets (an API key in `env_vars`)."""

    path: str  # its key path, `cluster.node_groups[0].env_configs[0].env_vars.WANDB_API_KEY`
    written: str  # as written: `${oc.env:WANDB_API_KEY}`, `${oc.env:HOME}/ckpt`
    value: str = field(repr=False)  # what it resolved to
    variables: tuple[str, ...] = ()  # the environment variables read


@dataclass(frozen=True)
class JobSpec:
    """A whole, validated `cluster:` section."""

    dialect: Dialect
    settings: PlacementSettings
    components: tuple[ComponentSpec, ...]
    node_groups: tuple[NodeGroupSpec, ...] = ()
    num_nodes: int | None = None
    source: str | None = None  # file the config came from, for messages
    #: Keys the frameworks declare that rlplace keeps for the application, as written (`profiling`,
    #: `rollout_env_interaction`, `remote_train`, ...), by key path relative to the cluster section.
    extras: dict[str, object] = field(default_factory=dict, hash=False, compare=False)
    #: RLightning's `ray_address` ("auto" or HOST:PORT); used by connect/run when no address is passed.
    ray_address: str | None = None
    #: Things the loader noticed that are not errors (an unknown key, defaults applied); the plan repeats them.
    warnings: tuple[str, ...] = ()
    #: Components that may change size while the job runs (`cluster.elastic`), in written order.
    elastic: tuple[ElasticRange, ...] = ()
    #: The model's size in bytes where the config says it (`cluster.model_bytes`), for the estimate of weight sync.
    model_bytes: int | None = None
    #: `cluster.disaggregated_stages` as written (streamed | sequential), for the time model; None: unsaid (the
    #: dialect's default, planner/workload.py).
    disaggregated_stages: str | None = None
    #: Where keys the planner names in its messages were written (`{"num_nodes": "job.yaml:3",
    #: "component_placement.actor": "job.yaml:5"}`), by key path relative to the cluster section; empty for a dict.
    locations: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    #: The topology levels, innermost first, and the node labels naming them (`cluster.topology`).
    topology: tuple[TopologyLevel, ...] = DEFAULT_TOPOLOGY
    #: The values that came from the environment, for outputs to show as written (`rlplace.config.from_env`).
    from_env: tuple[EnvValue, ...] = field(default=(), compare=False)

    def component(self, name: str) -> ComponentSpec | None:
        return next((c for c in self.components if c.name == name), None)

    def written_at(self, path: str) -> str | None:
        """`file:line` of the key at `path` (as problems name it: `cluster.component_placement.rollout`), where
        `locations` knows it; else the config's file."""
        return self.locations.get(path.removeprefix("cluster."), self.source)

    def group(self, label: str) -> NodeGroupSpec | None:
        return next((g for g in self.node_groups if g.label == label), None)

    def elastic_range(self, component: str) -> ElasticRange | None:
        return next((e for e in self.elastic if e.component == component), None)
