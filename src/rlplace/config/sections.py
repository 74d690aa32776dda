"""Every key of both config dialects, declared once (checked by `fields`, exported by `rlplace schema`).

Dialect "pools" is RLightning's (worker counts, `placement`, `resource_pool`); dialect "node_groups" is RLinf's
(`num_nodes`, `node_groups`, `component_placement`); docs/config.md describes both.
Rules that relate several keys live in `pools.py` and `node_groups.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from rlplace.config.fields import (
    INVALID,
    Anything,
    Choice,
    Field,
    Flag,
    Integer,
    Invalid,
    JsonSchema,
    Kind,
    ListOf,
    MapOf,
    Maybe,
    Number,
    Parsed,
    Section,
    Switch,
)
from rlplace.config.hardware import TEXT, HardwareBlock
from rlplace.config.problems import Path, Reporter, show
from rlplace.config.profiling import Profiling
from rlplace.config.ranges import parse_placement, parse_ranks
from rlplace.config.sizes import SIZE_FORM, parse_size
from rlplace.model import (
    DEFAULT_TOPOLOGY,
    ENV_STRATEGIES,
    LABEL_KEY,
    MAX_DEVICES_PER_NODE,
    MAX_NODES,
    MODES,
    POOL_COMPONENTS,
    STRATEGIES,
)

_RANK_TERM = r"\s*[0-9]+\s*(-\s*[0-9]+\s*)?"
RANKS = Parsed(
    parse_ranks,
    {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": rf"^{_RANK_TERM}(,{_RANK_TERM})*$"},
            {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}},
        ]
    },
    "ranks like 0-7, '0-7, 8-15', 3 or [0, 1, '4-5']",
)
#: `node_ranks: all` (any case, as RLinf): every node of the cluster, or of the group for an env config.
ALL_RANKS = "all"


def _node_ranks(value: object) -> tuple[int, ...] | str:
    if isinstance(value, str) and value.strip().lower() == ALL_RANKS:
        return ALL_RANKS
    return parse_ranks(value)


NODE_RANKS = Parsed(
    _node_ranks,
    {"anyOf": [RANKS.json, {"const": ALL_RANKS}]},
    "ranks like 0-7, '0-7, 8-15', 3, [0, 1, '4-5'] or all",
)
PLACEMENT = Parsed(
    parse_placement,
    {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]},
    "a placement like 0-7, '0-1:0-199,2-3:200-399' or all",
)


def _label(value: object) -> str:
    """A node-group label. YAML reads `label: 4090` as a number; it means the text "4090"."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a label (text like a800 or 4090), got {show(value)}")
    if value != value.strip() or re.search(r"[\s,]", value):
        raise ValueError(f"label {value!r} may not contain spaces or commas (a comma separates labels)")
    return value


LABEL = Parsed(_label, {"type": ["string", "integer"]}, "a label like a800 or 4090")


def _labels(value: object) -> tuple[str, ...]:
    """`node_group: a800`, `node_group: "a800,4090"` (ranks count across the groups in order)."""
    if isinstance(value, str) and "," in value:
        return tuple(_label(part.strip()) for part in value.split(","))
    return (_label(value),)


NODE_GROUP_REF = Switch(
    (
        ((str, int), Parsed(_labels, {"type": ["string", "integer"]}, "a label or a comma list of labels")),
        ((list, tuple), ListOf(LABEL)),
    )
)

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvVars(Kind[tuple[tuple[str, str], ...]]):
    """`env_vars`: a list of one-key dicts (`- KEY: value`), keys unique; values become strings."""

    def check(self, value: object, path: Path, rep: Reporter) -> tuple[tuple[str, str], ...] | Invalid:
        if isinstance(value, Mapping):
            first = next(iter(value), "KEY")
            rep.add(
                path,
                f"must be a list of one-key entries, got a mapping; perhaps a '-' is missing: write '- {first}: ...'",
                value,
            )
            return INVALID
        if not isinstance(value, list | tuple):
            rep.add(path, f"must be a list of one-key entries like '- GLOO_SOCKET_IFNAME: eth0', got {show(value)}")
            return INVALID
        pairs: list[tuple[str, str]] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(value):
            pair = self._entry(entry, (*path, i), rep)
            if pair is None:
                continue
            if pair[0] in seen:
                rep.add((*path, i), f"{pair[0]} is set twice (entries {seen[pair[0]]} and {i}); keep one", pair[0])
                continue
            seen[pair[0]] = i
            pairs.append(pair)
        return tuple(pairs) if len(pairs) == len(value) else INVALID

    @staticmethod
    def _entry(entry: object, path: Path, rep: Reporter) -> tuple[str, str] | None:
        if not isinstance(entry, Mapping) or len(entry) != 1:
            hint = ""
            if isinstance(entry, Mapping) and len(entry) > 1:
                second = list(entry)[1]
                hint = f"; perhaps a '-' is missing before {second}"
            elif isinstance(entry, str) and "=" in entry:
                hint = f"; write '{entry.split('=', 1)[0].strip()}: {entry.split('=', 1)[1].strip()}'"
            rep.add(path, f"each entry must hold exactly one KEY: value pair, got {show(entry)}{hint}", entry)
            return None
        ((key, val),) = entry.items()
        if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
            rep.add(path, f"{show(key)} is not an environment variable name (letters, digits, _)", key)
            return None
        if isinstance(val, bool):
            rep.add((*path, key), f'{key}: {val} is a boolean; quote it: {key}: "{str(val).lower()}"', val)
            return None
        if val is INVALID:
            return None  # already reported (an interpolation that did not resolve)
        if not isinstance(val, str | int | float):
            rep.add((*path, key), f'the value of {key} must be text, got {show(val)}; write {key}: "..."', val)
            return None
        return key, str(val)

    def schema(self) -> JsonSchema:
        return {
            "type": "array",
            "items": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": {"type": ["string", "number"]},
            },
        }

    def describe(self) -> str:
        return "a list of one-key entries like '- GLOO_SOCKET_IFNAME: eth0'"


def _interpreter(value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(
            f"must be an absolute path to a Python interpreter like /opt/venv/bin/python3, got {show(value)}"
        )
    return value


# --- both dialects ------------------------------------------------------------------------------------

ELASTIC_RANGE = Section(
    "an elastic range {min: N, max: M}",
    {
        "min": Field(Integer(1), "fewest workers the component may shrink to (default 1)"),
        "max": Field(Integer(1), "most workers it may grow to (default: its starting size, the written count)"),
    },
)
#: Keys of both dialects: they do not tell the dialect.
BOTH_DIALECTS = ("elastic", "topology", "model_bytes", "disaggregated_stages")
#: `cluster.elastic`: component -> {min, max}; the rules relating it to the components are in `elastic.py`.
ELASTIC = Field(
    Maybe(MapOf(Maybe(ELASTIC_RANGE), "component names to elastic ranges {min: N, max: M}")),
    "components that may change size while the job runs: component -> {min, max} (null: defaults)",
)


def _label_keys(value: object) -> tuple[str, ...]:
    """`rack: rack`, or a list of keys of which the first a node carries names its unit."""
    keys = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) and value else None
    if keys is None:
        raise ValueError(f"must be a node label key like rack or a list of them, got {show(value)}")
    for key in keys:
        if not isinstance(key, str) or not LABEL_KEY.match(key):
            raise ValueError(
                f"{show(key)} is not a node label key (like rack, nvlink-domain or example.com/rack: letters, digits "
                "and -_. , at most 63 characters after an optional prefix/)"
            )
    return tuple(keys)


LABEL_KEYS = Parsed(
    _label_keys,
    {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
    "a node label key or a list of them",
)
TOPOLOGY_SECTION = Section(
    "the topology",
    {
        level.name: Field(
            Maybe(LABEL_KEYS),
            f"node label(s) naming a node's {level.name.replace('_', ' ')} (default {', '.join(level.labels)}; "
            "null: topology-blind at this level)",
        )
        for level in DEFAULT_TOPOLOGY
    },
    doc="The cluster's topology levels, innermost first, and the node labels that name them (docs/config.md).",
)
#: `cluster.topology`: level -> label key(s); the rules relating it to the inventory are in `planner.topology`.
TOPOLOGY = Field(
    Maybe(TOPOLOGY_SECTION),
    "topology levels (nvlink_domain, rack, zone) -> the node label key(s) naming them (null or left out: defaults)",
)

# --- dialect "node_groups" (RLinf's) ----------------------------------------------------------------

# Unknown keys (docs/config.md, "Unknown keys"): where RLinf rejects them (node groups, env configs, hardware)
# they are errors; where it ignores them (the top of the section, a component's placement entry) only a near
# miss of a known key is an error and anything else is a warning.

ENV_CONFIG = Section(
    "an env config",
    {
        "node_ranks": Field(
            NODE_RANKS, "the nodes this entry applies to (a subset of the group's node_ranks; all: the group's)", True
        ),
        "env_vars": Field(Maybe(EnvVars()), "environment variables, a list of one-key entries"),
        "python_interpreter_path": Field(
            Maybe(Parsed(_interpreter, {"type": "string", "pattern": "^/"}, "an absolute path")),
            "absolute path of the Python interpreter on those nodes (null: unset)",
        ),
    },
)

NODE_GROUP = Section(
    "a node group",
    {
        "label": Field(LABEL, "unique, case-sensitive name of the group ('cluster' and 'node' are reserved)", True),
        "node_ranks": Field(NODE_RANKS, "global node ranks of the group's nodes (all: every node)", True),
        "env_configs": Field(
            Maybe(ListOf(ENV_CONFIG, min_items=0, hint="one entry per node subset")),
            "software environment per node subset",
        ),
        "hardware": Field(
            Maybe(HardwareBlock()), "non-accelerator hardware (robots); its units become the group's resources"
        ),
        "hardware_type": Field(
            Maybe(TEXT), "RLinf: the hardware type of the group's nodes when no hardware block lists the units"
        ),
        "ignore_hardware": Field(Maybe(Flag()), "treat the group as CPU-only: each node is one resource"),
    },
)

#: CPUs a worker reserves (Ray's num_cpus); fractions let several small workers share one CPU.
CPUS = Number(0.0)

COMPONENT_ENTRY = Section(
    "a component placement",
    {
        "node_group": Field(NODE_GROUP_REF, "label, comma list or list of labels (default: cluster)"),
        "placement": Field(PLACEMENT, "resource_ranks[:process_ranks](,segment)* inside the group(s), or all", True),
        "num_cpus": Field(CPUS, "CPUs each process of the component reserves (default 1; 0.5 = two per CPU)"),
    },
    lenient=True,
)

NODE_GROUPS_KEYS = ("num_nodes", "node_groups", "component_placement")
#: rlplace's own key, in both dialects (both frameworks' cluster sections let unknown keys through).
MODEL_BYTES = Field(
    Parsed(parse_size, {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}, SIZE_FORM),
    "rlplace: the model's size for the estimate of weight sync across nodes, e.g. 14G, 512M, 2.2MiB (unsaid: 14 "
    "GB, a 7B model in bf16, shown as assumed)",
)
#: rlplace's own key, in both dialects: how components on GPUs of their own run within an iteration, for the time
#: model (docs/guide.md, "Choosing a placement"; planner/phase_order.py).
STREAMED, SEQUENTIAL = "streamed", "sequential"
DISAGGREGATED_STAGES = Field(
    Choice((STREAMED, SEQUENTIAL)),
    "rlplace: how components on GPUs of their own run in an iteration, for the time model: streamed (each batch "
    "moves on as soon as it is done, RLinf's pipelined group batches: the default in the node-groups dialect) or "
    "sequential (a synchronous algorithm: each waits for the one before; the default in the pools dialect)",
)
#: Keys RLinf reads from its cluster section besides the placement: kept on JobSpec.extras for the app.
RLINF_SWITCHES = (
    "auto_scheduler",
    "use_pre_process_policy",
    "use_wait_before_last_iter_policy",
    "recreate_nccl_groups",
    "rollout_use_all_gpus",  # the auto scheduler's (dynamic reasoning configs)
    "fuse_rollout_inference_only",
)
RLINF_SETTINGS = ("profiling", "tracer", "net_emulation", "assign_policy")
RLINF_NUMBERS = ("monitor_interval", "preprocess_threshold", "migrate_out_max_bs")
RLINF_EXTRAS = (*RLINF_SETTINGS, *RLINF_SWITCHES, *RLINF_NUMBERS, "num_gpus_per_node")
_AS_WRITTEN_NUMBER = Switch(((int, Integer(0)), (float, Number(0.0))))  # extras keep 80 as 80, not 80.0

NODE_GROUPS_SECTION = Section(
    "the cluster section",
    {
        "num_nodes": Field(Integer(1, MAX_NODES), "number of nodes; node ranks are 0..num_nodes-1"),
        "node_groups": Field(
            Maybe(ListOf(NODE_GROUP, min_items=0, hint="one entry per group")), "labelled sets of nodes"
        ),
        "component_placement": Field(
            MapOf(Switch(((Mapping, COMPONENT_ENTRY), ((str, int), PLACEMENT))), "component placements"),
            "component name (or 'a,b' for several) -> placement, or {node_group, placement, num_cpus}",
            True,
        ),
        **{
            k: Field(Anything(), f"RLinf's {k} settings, kept for the application")
            for k in RLINF_SETTINGS
            if k != "profiling"
        },
        "profiling": Field(Maybe(Profiling()), "RLinf's profiler (backend nsight or rocprof_sys), checked as RLinf"),
        **{k: Field(Maybe(Flag()), f"RLinf's {k} switch, kept for the application") for k in RLINF_SWITCHES},
        **{k: Field(Maybe(_AS_WRITTEN_NUMBER), f"RLinf's auto scheduler {k}, kept as written") for k in RLINF_NUMBERS},
        "num_gpus_per_node": Field(
            Maybe(Integer(1, MAX_DEVICES_PER_NODE)),
            "older RLinf: GPUs per node (kept; rlplace reads GPU counts from the inventory)",
        ),
        "elastic": ELASTIC,
        "topology": TOPOLOGY,
        "model_bytes": MODEL_BYTES,
        "disaggregated_stages": DISAGGREGATED_STAGES,
    },
    doc="Heterogeneous cluster: node groups and component placement (RLinf's dialect; docs/config.md).",
    lenient=True,
)

# --- dialect "pools" (RLightning's) ------------------------------------------------------------------

_GPUS_PER_WORKER = Number(0.0, whole_above_one=True)

POOL = Section(
    "a resource pool",
    {
        "name": Field(LABEL, "unique name of the pool", True),
        "num_node": Field(Integer(1, MAX_NODES), "number of nodes in the pool (defaults to len(node_ids))"),
        "num_gpus": Field(
            Switch(
                ((int, Integer(1, MAX_DEVICES_PER_NODE)), ((list, tuple), ListOf(Integer(1, MAX_DEVICES_PER_NODE))))
            ),
            "GPUs per node: one number, or a list with one count per node_ids entry",
            True,
        ),
        "node_ids": Field(
            ListOf(Switch(((int, Integer(0)), (str, LABEL)))), "nodes of the pool, by node rank or node name"
        ),
        **{
            c: Field(RANKS, f"pool-global GPU indices of {c} (counted across the pool's nodes)")
            for c in POOL_COMPONENTS
        },
    },
    lenient=True,
)

PLACEMENT_BLOCK = Section(
    "placement",
    {
        "mode": Field(Choice(MODES), "auto (default): computed from worker counts; manual: resource_pool"),
        "strategy": Field(Choice(STRATEGIES), "how auto mode partitions the cluster"),
        "env_strategy": Field(Choice(ENV_STRATEGIES), "how env workers meet eval workers"),
    },
    lenient=True,  # RLightning's pydantic models keep unknown keys
)

RESOURCE_POOLS = ListOf(POOL, hint="one entry per pool")


def _ray_address(value: object) -> str:
    """RLightning's `ray_address`, handed to `ray.init`: auto, local, ray://HOST:PORT or HOST:PORT."""
    text = value.strip() if isinstance(value, str) else ""
    if text in ("auto", "local") or re.fullmatch(r"(ray://)?[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}", text):
        return text
    raise ValueError(f"must be auto, local, HOST:PORT or ray://HOST:PORT (a Ray cluster address), got {show(value)}")


#: RLightning's `remote_<key>` switches and the component each one moves into the driver (storage = buffer).
REMOTE_KEYS = {"remote_train": "train", "remote_eval": "eval", "remote_storage": "buffer", "remote_env": "env"}
#: Components with `<c>_each_cpu_num` (CPUs per worker, rlplace's key beside `<c>_each_gpu_num`).
CPU_KEYS = {f"{c}_each_cpu_num": c for c in POOL_COMPONENTS}


def _buffer_num(value: object) -> int | Literal["auto"]:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError(f"must be auto or an integer >= 0, got {show(value)}")


POOLS_SECTION = Section(
    "the cluster section",
    {
        "train_worker_num": Field(Integer(1), "number of train workers"),
        "eval_worker_num": Field(Integer(1), "number of eval (rollout) workers"),
        "env_worker_num": Field(Integer(1), "number of env workers (default: eval_worker_num)"),
        "buffer_worker_num": Field(
            Parsed(_buffer_num, {"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 0}]}, "auto or >= 0"),
            "replay buffer shards: auto (recommended) or a number",
        ),
        "train_each_gpu_num": Field(_GPUS_PER_WORKER, "GPUs per train worker (default 1; 0.5 = two per GPU)"),
        "eval_each_gpu_num": Field(_GPUS_PER_WORKER, "GPUs per eval worker (default 1)"),
        "env_each_gpu_num": Field(_GPUS_PER_WORKER, "GPUs per env worker (default 1; 0 = CPU-only)"),
        "is_colocated": Field(Flag(), "train and eval share GPUs (follows strategy: colocate when not written)"),
        "enable_offload": Field(Flag(), "offload weights between phases (follows is_colocated when not written)"),
        **{key: Field(CPUS, f"CPUs per {c} worker (default 1; fractions share a CPU)") for key, c in CPU_KEYS.items()},
        "placement": Field(PLACEMENT_BLOCK, "placement mode and strategies"),
        "resource_pool": Field(Maybe(RESOURCE_POOLS), "manual mode: pools of nodes and each component's GPU ranges"),
        "ray_address": Field(
            Parsed(_ray_address, {"type": "string"}, "auto or a Ray address"),
            "RLightning: the Ray cluster to connect to when none is passed (auto: the running one)",
        ),
        **{
            key: Field(Flag(), f"RLightning: false runs the {c} in the driver process instead of as Ray actors")
            for key, c in REMOTE_KEYS.items()
        },
        "rollout_env_interaction": Field(
            Maybe(Choice(("batched", "streaming"))), "RLightning: how rollout meets env, kept for the application"
        ),
        "elastic": ELASTIC,
        "topology": TOPOLOGY,
        "model_bytes": MODEL_BYTES,
        "disaggregated_stages": DISAGGREGATED_STAGES,
    },
    doc="Placement strategy: worker counts, placement mode/strategy, resource pools (RLightning's; docs/config.md).",
    lenient=True,
)


def config_schema() -> JsonSchema:
    """JSON Schema of a config file: a `cluster:` section in either dialect (other top-level keys free)."""
    cluster = {"anyOf": [POOLS_SECTION.schema(), NODE_GROUPS_SECTION.schema()]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rlplace cluster config",
        "type": "object",
        "properties": {
            "cluster": cluster,
            "resource_pool": {**RESOURCE_POOLS.schema(), "description": "pools, when written beside cluster"},
        },
    }
