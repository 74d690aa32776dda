"""A placement `rlplace tune` found, written back in the config's own dialect, so that `rlplace plan` (and the
framework) read it and plan it as tune did.

- Node groups (RLinf): `component_placement` with each timed component's range of resource ranks in the group it
  was placed through (`all` for every one of them); components placed together get one key (`actor,rollout:
  0-7`); components tune does not time (reward, robots' env, ...) keep their entries as written; RLinf's
  `inference` on exactly the actor's GPUs is left out (its actor then computes the log-probabilities, as RLinf's
  collocated mode requires).
- Pools (RLightning): `placement.mode: manual` and one pool, `tuned`, over the GPUs tuned (`num_node` x
  `num_gpus`, or `node_ids` with a `num_gpus` list where nodes differ), each timed component's range in its
  pool-global GPU indices and `<c>_worker_num` for its GPUs at its `<c>_each_gpu_num`; a pool component without
  a cost (env, stepping with eval) gets eval's range and keeps its count; `is_colocated` is left out (it follows
  the ranges), everything else stays as written.

The rest of the document (a whole training config, composed) is kept as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from rlplace.config.model_parallel import TRAIN_TASKS
from rlplace.model import CLUSTER_GROUP, JobSpec
from rlplace.planner.phase_order import Block
from rlplace.planner.workload import HOSTS, Workload

POOL_NAME = "tuned"


def document_with(
    spec: JobSpec,
    document: object,
    ranges: dict[str, tuple[int, int]],
    line_nodes: list[tuple[int, int]],
    workload: Workload,
) -> dict:
    """`document` with its cluster section placing the stages on `ranges` of the line (whose nodes, and each
    one's GPUs tuned, are `line_nodes`)."""
    doc = copy.deepcopy(dict(document)) if isinstance(document, Mapping) else {}
    inside = "cluster" in doc
    section = dict(doc["cluster"]) if inside else doc
    if spec.dialect == "node_groups":
        section = _node_groups(section, spec, ranges, sum(n for _, n in line_nodes), workload)
    else:
        section = _pools(section, spec, ranges, line_nodes)
        doc.pop("resource_pool", None)
    if inside:
        doc["cluster"] = section
        return doc
    return section


def section_of(document: dict) -> dict:
    return document.get("cluster", document) if isinstance(document.get("cluster"), Mapping) else document


def _text(lo: int, hi: int, whole: int) -> str:
    if lo == 0 and hi == whole:
        return "all"
    return f"{lo}" if hi - lo == 1 else f"{lo}-{hi - 1}"


def _node_groups(
    section: dict, spec: JobSpec, ranges: dict[str, tuple[int, int]], whole: int, workload: Workload
) -> dict:
    written = section.get("component_placement") or {}
    timed = {s.name for s in workload.stages}
    out: dict[str, object] = {}
    for key, value in written.items():
        names = [n.strip() for n in str(key).split(",")]
        kept = [n for n in names if n not in timed]
        if kept:
            out[",".join(kept)] = value
    entries: dict[tuple[int, int], list[str]] = {}
    for s in workload.stages:
        host = HOSTS.get(s.name)
        if host is not None and ranges.get(host) == ranges[s.name]:
            continue  # RLinf's actor computes it
        entries.setdefault(ranges[s.name], []).append(s.name)
    for (lo, hi), names in entries.items():
        text = _text(lo, hi, whole)
        template = _entry(written, names[0])
        out[",".join(names)] = {**template, "placement": text} if isinstance(template, Mapping) else text
    section["component_placement"] = out
    return section


def _entry(written: Mapping, name: str) -> object:
    """A component's written entry (a mapping with node_group and num_cpus, or a placement string)."""
    for key, value in written.items():
        if name in [n.strip() for n in str(key).split(",")]:
            return value
    return None


def _pools(section: dict, spec: JobSpec, ranges: dict[str, tuple[int, int]], line_nodes: list[tuple[int, int]]) -> dict:
    section.pop("resource_pool", None)
    section.pop("is_colocated", None)
    placement = dict(section.get("placement") or {})
    placement["mode"] = "manual"
    placement.pop("strategy", None)
    section["placement"] = placement
    sizes = [n for _, n in line_nodes]
    pool: dict[str, object] = {"name": POOL_NAME}
    if len(set(sizes)) == 1:  # the line is every GPU node in rank order: what a pool without node_ids binds
        pool.update(num_node=len(sizes), num_gpus=sizes[0])
    else:
        pool.update(node_ids=[node for node, _ in line_nodes], num_gpus=sizes)
    for name, (lo, hi) in ranges.items():
        pool[name] = _pool_range(lo, hi)
        c = spec.component(name)
        per = c.gpus_per_worker if c is not None and c.gpus_per_worker > 0 else 1.0
        section[f"{name}_worker_num"] = round((hi - lo) / per)
    beside = ranges.get("eval") or ranges.get("train") or (0, sum(sizes))
    for c in spec.components:
        if c.name in POOL_RANGED and c.name not in ranges:
            pool[c.name] = _pool_range(*beside)  # untimed: beside eval (env steps with it), its count as written
    section["resource_pool"] = [pool]
    return section


#: The components a pool gives a range (the buffer follows the train workers).
POOL_RANGED = ("train", "eval", "env")


def _pool_range(lo: int, hi: int) -> str:
    return f"{lo}-{hi - 1}" if hi - lo > 1 else str(lo)


def structure_allowed(spec: JobSpec, document: object):
    """The structures the config's framework can run: RLinf's model-parallel placement (reasoning and online coding
    tasks) takes every component on the same GPUs (collocated, no inference) or each on GPUs of its own, the actor
    computing inference itself when none is placed; anything else nests or shares as it likes."""
    runner = document.get("runner") if isinstance(document, Mapping) else None
    task = runner.get("task_type") if isinstance(runner, Mapping) else None
    if spec.dialect != "node_groups" or task not in TRAIN_TASKS:
        return None

    def allowed(roots: tuple[Block, ...]) -> bool:
        if any(b.children for b in roots):
            return False
        if len(roots) == 1:
            return True
        return all(len(b.members) == 1 or set(b.members) <= {"actor", "inference"} for b in roots)

    return allowed


def offload_rule(spec: JobSpec):
    """Whether the written candidate's plan offloads (`Plan.settings.enable_offload`), by its structure: in the
    node-groups dialect whenever components share GPUs (it follows is_colocated); in the pools dialect as written,
    else when train and eval share GPUs."""
    written = spec.settings.enable_offload
    if spec.dialect == "node_groups":
        return lambda roots: True
    if written is not None:
        return lambda roots: written

    def train_and_eval(roots: tuple[Block, ...]) -> bool:
        def holds(block: Block, name: str) -> bool:
            return name in block.stages

        def shares(block: Block) -> bool:
            if ("train" in block.members and holds(block, "eval")) or (
                "eval" in block.members and holds(block, "train")
            ):
                return True
            return any(shares(c) for c in block.children)

        return any(shares(b) for b in roots)

    return train_and_eval


def tuned_group(spec: JobSpec, workload: Workload) -> str:
    """The node group (or pool) whose GPUs tune distributes: the one every placed stage is placed through."""
    if spec.dialect != "node_groups":
        return POOL_NAME
    labels = {c.placement.groups for c in spec.components if c.placement and workload.stage(c.name)}
    if len(labels) == 1:
        (groups,) = labels
        if len(groups) == 1:
            return groups[0]
    return CLUSTER_GROUP if not labels else ""
