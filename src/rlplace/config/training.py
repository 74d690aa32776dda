"""Whole training configs: what the rest of a framework's config says about the workers of the cluster section.

A cluster section alone keeps its own meaning. When the document is a whole training config, the
framework launches workers from other keys too, and rlplace reads them the same way:

- RLightning (a pools-dialect `cluster:` beside `env:`, `buffer:`, `policy:` and `train:`, its MainConfig):
  env workers come from the `env:` groups (one mapping or a list; `num_workers`, `num_gpus`, `num_cpus`
  each, defaults 1, 0.0, 1), the buffer from `buffer.storage` (`unified`: one buffer worker; `sharded`:
  `buffer_worker_num` shards, or `storage.num_shards`), and GPUs per train/eval worker from
  `policy.train_num_gpus` / `policy.eval_num_gpus` when the cluster section does not say
  (rlightning/utils/placement/scheduling.py).
- RLinf configs (a node-groups `cluster:` beside `actor:`, `critic:`, ...): the Megatron model-parallel groups
  of each `<role>.model` (tensor x context-parallel, expert-parallel), whatever else the config has, which the
  planner keeps inside NVLink domains.
- RLinf reasoning configs (a node-groups `cluster:` placing actor and rollout, no env, beside `actor:` and
  `rollout:`): each rollout process spans `rollout.tensor_parallel_size` GPUs as RLinf's model-parallel
  placement does (rlinf/utils/placement.py): collocated with the actor (same GPUs), packed with a stride of
  actor TP / rollout TP when the actor's is larger; disaggregated, GPUs per rollout data-parallel rank.
  With `cluster.auto_scheduler: true` (RLinf's AUTO mode) the actor spans every GPU and, with
  `use_pre_process_policy`, rollout starts on the actor's GPUs too, as RLinf creates them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Literal

from rlplace.config import model_parallel
from rlplace.config.fields import INVALID, Choice, Integer, Invalid, Kind, Number, checked, written, written_as
from rlplace.config.model_parallel import size
from rlplace.config.problems import Path, Reporter, format_path
from rlplace.config.ranges import format_ranks
from rlplace.config.values import Values
from rlplace.model import ComponentSpec, JobSpec, ModelParallel, Placement, PlacementSettings, ProcessShape, Segment

#: The keys RLightning's MainConfig requires beside `cluster`: their presence makes a whole training config.
RLIGHTNING_KEYS = ("env", "buffer", "policy", "train")

_ENV_KEYS: dict[str, tuple[Kind[float], float]] = {
    "num_workers": (Integer(0), 1),
    "num_gpus": (Number(0.0, whole_above_one=True), 0.0),
    "num_cpus": (Number(0.0), 1.0),
}


def apply(
    spec: JobSpec, top: object, cluster: Mapping[str, object], base: Path, values: Values, rep: Reporter
) -> JobSpec:
    """`spec` (from the cluster section at `base`) completed from the rest of the whole config `top`."""
    if not isinstance(top, Mapping) or base != ("cluster",):
        return spec
    if spec.dialect == "pools" and all(values.present((k,)) for k in RLIGHTNING_KEYS):
        return _rlightning(spec, cluster, values, rep)
    if spec.dialect == "node_groups":
        model_parallel.check(spec, values, rep)
        spec = _model_parallel(spec, values, rep)  # every config: the groups do not depend on a rollout section
        if values.present(("rollout",)) and isinstance(top.get("rollout"), Mapping):
            return _rlinf_reasoning(spec, values, rep)
    return spec


# --- RLightning ---------------------------------------------------------------------------------------


def _rlightning(spec: JobSpec, cluster: Mapping[str, object], values: Values, rep: Reporter) -> JobSpec:
    components = {c.name: c for c in spec.components}
    env = _env_groups(values, rep)
    if env is not None:
        components = _with_env(components, env, cluster, spec.settings.mode, rep)
    for name in ("train", "eval"):
        if name in components:
            components[name] = _policy_gpus(components[name], cluster, values, rep)
    settings, buffer = _buffer(spec, cluster, values, rep)
    if buffer is not None:
        old = components.get("buffer")
        components["buffer"] = (
            buffer
            if old is None
            else dataclasses.replace(old, num_workers=buffer.num_workers if old.placement is None else old.num_workers)
        )
    return dataclasses.replace(spec, settings=settings, components=tuple(components.values()))


def _env_groups(values: Values, rep: Reporter) -> tuple[int, float, float, str] | None:
    """(workers, GPUs and CPUs per worker, key path) of all `env:` groups together, or None if unreadable."""
    raw = values.shape(("env",))
    groups = _env_group_list(raw)
    if groups is None:
        rep.add(("env",), "env must be one env group (a mapping) or a list of them, as RLightning reads it", raw)
        return None
    read = [_env_group(g, p, values, rep) for g, p in groups]
    valid = [r for r in read if r is not None]
    if len(valid) < len(read):
        return None
    workers = sum(n for n, _, _ in valid)
    gpus = {g for n, g, _ in valid if n}
    cpus = {c for n, _, c in valid if n}
    if len(gpus) > 1 or len(cpus) > 1:
        rep.warn(
            ("env",),
            f"the env groups ask for different resources per worker (num_gpus {sorted(gpus)}, num_cpus "
            f"{sorted(cpus)}); rlplace places every env worker with the largest ({max(gpus):g} GPU, {max(cpus):g} CPU)",
        )
    path = format_path(groups[0][1] if len(groups) == 1 else ("env",))
    return workers, max(gpus, default=0.0), max(cpus, default=1.0), path


def _env_group_list(raw: object) -> list[tuple[Mapping[str, object], Path]] | None:
    """The `env:` groups with their key paths: one mapping, or a list of them; None when `raw` is neither."""
    if isinstance(raw, Mapping):
        return [(raw, ("env",))]
    if not isinstance(raw, list):
        return None
    groups: list[tuple[Mapping[str, object], Path]] = [
        (g, ("env", i)) for i, g in enumerate(raw) if isinstance(g, Mapping)
    ]
    return groups if len(groups) == len(raw) else None


def _env_group(
    group: Mapping[str, object], path: Path, values: Values, rep: Reporter
) -> tuple[int, float, float] | None:
    """(workers, GPUs and CPUs per worker) of one env group, or None when one is written wrong (reported)."""
    workers, gpus, cpus = [_env_value(group, path, k, values, rep) for k in _ENV_KEYS]
    if workers is INVALID or gpus is INVALID or cpus is INVALID:
        return None
    return int(workers), float(gpus), float(cpus)


def _env_value(group: Mapping[str, object], path: Path, key: str, values: Values, rep: Reporter) -> float | Invalid:
    """One key of an env group, resolved (the group's other keys are the application's: never resolved)."""
    kind, default = _ENV_KEYS[key]
    return default if key not in group else checked(kind, values.at((*path, key)), (*path, key), rep)


def _with_env(
    components: dict[str, ComponentSpec],
    env: tuple[int, float, float, str],
    cluster: Mapping[str, object],
    mode: str,
    rep: Reporter,
) -> dict[str, ComponentSpec]:
    workers, gpus, cpus, path = env
    for key, mine in (("env_worker_num", workers), ("env_each_gpu_num", gpus), ("env_each_cpu_num", cpus)):
        theirs = written(cluster, key)
        if theirs is not None and theirs != mine:
            rep.add(
                ("cluster", key),
                f"{key}: {theirs} disagrees with the env: groups of this training config ({mine:g}); in a whole "
                "RLightning config the env workers come from env:, remove the key or make them agree",
                theirs,
            )
    old = components.get("env")
    if old is None:
        if mode == "manual" and workers:
            rep.warn(
                ("env",),
                f"the env: groups ask for {workers} env worker(s), but no resource_pool entry gives env a GPU range; "
                "rlplace places none (add env: to a pool to place them)",
            )
        return components
    components["env"] = dataclasses.replace(
        old, num_workers=workers, gpus_per_worker=gpus, cpus_per_worker=cpus, path=path
    )
    return components


def _policy_gpus(c: ComponentSpec, cluster: Mapping[str, object], values: Values, rep: Reporter) -> ComponentSpec:
    """RLightning packs train/eval workers by `policy.<c>_num_gpus`; the cluster key wins where both are written."""
    key, policy_key = f"{c.name}_each_gpu_num", f"{c.name}_num_gpus"
    raw = values.at(("policy", policy_key))
    if raw is None:
        return c
    theirs = checked(Number(0.0, whole_above_one=True), raw, ("policy", policy_key), rep)
    mine = written(cluster, key)
    if theirs is INVALID:
        return c
    if mine is None:
        return dataclasses.replace(c, gpus_per_worker=theirs, path=format_path(("policy", policy_key)))
    if mine != theirs:
        rep.warn(
            ("cluster", key),
            f"{key}: {mine:g} and policy.{policy_key}: {theirs:g} disagree; rlplace uses {key} (RLightning packs "
            f"pooled workers by policy.{policy_key} and requests {key} under strategy default): make them agree",
        )
    return c


def _buffer(
    spec: JobSpec, cluster: Mapping[str, object], values: Values, rep: Reporter
) -> tuple[PlacementSettings, ComponentSpec | None]:
    """Settings with RLightning's buffer count for `buffer.storage`, and the buffer component it implies."""
    where = ("buffer", "storage")
    storage = values.shape(where)
    if storage is None:
        storage = {}
    if not isinstance(storage, Mapping):
        rep.add(where, "must be a mapping (type, device, ...), as RLightning reads it", storage)
        return spec.settings, None
    kind = checked(Choice(("unified", "sharded")), values.at((*where, "type"), "unified"), (*where, "type"), rep)
    device = values.at((*where, "device"), "cpu")
    written_num = spec.settings.buffer_worker_num
    if kind == "unified":
        count: int | Literal["auto"] | Invalid | None = 1
        source = "buffer.storage.type"
        if written_num not in (None, "auto", 1):
            rep.warn(
                ("cluster", "buffer_worker_num"),
                f"buffer_worker_num: {written_num} ignored: buffer.storage.type unified holds one buffer worker "
                "(as RLightning does); use type sharded for shards",
            )
        if device == "cuda":
            rep.warn(
                ("buffer", "storage", "device"),
                "buffer.storage.device: cuda: RLightning gives the buffer worker a GPU; rlplace places buffer workers "
                "on CPUs (host memory), so reserve the GPU with another component if the buffer needs one",
            )
    elif kind == "sharded":
        if device != "cpu":
            rep.add(
                ("buffer", "storage", "device"),
                "sharded storage keeps its shards on cpu (RLightning refuses others)",
                device,
            )
        count = written_num
        source = "cluster.buffer_worker_num"
        shards = values.at((*where, "num_shards"))
        if shards is not None:
            source = "buffer.storage.num_shards"
            count = checked(Integer(1), shards, ("buffer", "storage", "num_shards"), rep)
            if count is not INVALID and written_num is not None and written_num != count:
                rep.warn(
                    ("buffer", "storage", "num_shards"),
                    f"buffer.storage.num_shards: {count} replaces buffer_worker_num: {written_num} "
                    "(as RLightning does)",
                )
    else:
        return spec.settings, None
    if count is INVALID:
        return spec.settings, None
    settings = dataclasses.replace(spec.settings, buffer_worker_num=count)
    component = ComponentSpec(
        name="buffer",
        num_workers=count if isinstance(count, int) else None,
        gpus_per_worker=0.0,
        cpus_per_worker=_buffer_cpus(cluster),
        remote=written(cluster, "remote_storage") is not False,
        path=source,  # where the count came from (the planner names it when it overrides the count)
    )
    return settings, component


def _buffer_cpus(cluster: Mapping[str, object]) -> float:
    cpus = written_as(cluster, "buffer_each_cpu_num", float)
    return 1.0 if cpus is None else cpus


# --- RLinf reasoning ----------------------------------------------------------------------------------


def _rlinf_reasoning(spec: JobSpec, values: Values, rep: Reporter) -> JobSpec:
    actor, rollout = spec.component("actor"), spec.component("rollout")
    if model_parallel.task_type(values) in model_parallel.EVAL_TASKS:
        return _eval_shape(spec, values, rep)
    if actor is None or rollout is None or spec.component("env") is not None:
        return spec  # not a model-parallel (reasoning) placement: embodied configs place as written
    if actor.placement is None or rollout.placement is None:
        return spec
    actor_tp = size(values, ("actor", "model", "tensor_model_parallel_size"), rep)
    rollout_tp = size(values, ("rollout", "tensor_parallel_size"), rep)
    rollout_pp = size(values, ("rollout", "pipeline_parallel_size"), rep)
    if actor_tp is None or rollout_tp is None or rollout_pp is None:
        return spec
    spec = _auto_scheduled(spec, values, rollout_tp, rep)
    actor, rollout = spec.component("actor"), spec.component("rollout")
    assert actor is not None and actor.placement is not None, "_auto_scheduled only widens the placements"
    assert rollout is not None and rollout.placement is not None, "_auto_scheduled only widens the placements"
    task = model_parallel.task_type(values)
    shape = _rollout_shape(spec, actor.placement, rollout.placement, actor_tp, rollout_tp, rollout_pp, task, rep)
    if shape is None or (shape.devices_per_process == 1 and shape.stride == 1):
        return spec
    shaped = tuple(dataclasses.replace(c, process_shape=shape) if c.name == "rollout" else c for c in spec.components)
    return dataclasses.replace(spec, components=shaped)


def _eval_shape(spec: JobSpec, values: Values, rep: Reporter) -> JobSpec:
    """RLinf's model-parallel eval placement: rollout packed, `rollout.tensor_parallel_size` GPUs a process."""
    rollout = spec.component("rollout")
    tp = size(values, ("rollout", "tensor_parallel_size"), rep)
    if rollout is None or rollout.placement is None or tp is None or tp == 1:
        return spec
    if not _rollout_fits(tp, _gpus(rollout.placement), rep):
        return spec
    shape = ProcessShape(tp, 1, f"rollout.tensor_parallel_size: {tp}, model-parallel eval -> {tp} GPU(s) per process")
    shaped = tuple(dataclasses.replace(c, process_shape=shape) if c.name == "rollout" else c for c in spec.components)
    return dataclasses.replace(spec, components=shaped)


def _rollout_fits(tp: int, gpus: tuple[int, ...] | None, rep: Reporter) -> bool:
    """RLinf: rollout's tensor-parallel size at most its GPUs."""
    if gpus is not None and tp > len(gpus):
        rep.add(
            ("rollout", "tensor_parallel_size"),
            f"rollout.tensor_parallel_size {tp} is larger than rollout's {len(gpus)} GPU(s)",
            tp,
        )
        return False
    return True


#: Components of one process a GPU whose Megatron model-parallel sizes RLinf reads from `<role>.model`, and the
#: role whose sizes they default to (RLinf's inference takes the actor's when it has no section of its own).
_MEGATRON_ROLES = {"actor": "actor", "critic": "critic", "inference": "actor", "actor_inference": "actor"}


def _model_parallel(spec: JobSpec, values: Values, rep: Reporter) -> JobSpec:
    """Each Megatron component's groups of consecutive ranks (RLinf's rank order is tp-cp-ep-dp-pp: a
    tensor x context-parallel group is tp * cp consecutive ranks, an expert-parallel group etp * ep), which the
    planner keeps inside one NVLink domain (docs/planner.md, "Topology")."""
    out = []
    for c in spec.components:
        if c.name not in _MEGATRON_ROLES:
            out.append(c)
            continue
        # Whether the role has a model section of its own, as written: resolving it whole would read keys placement
        # never needs (a checkpoint path from ${oc.env:...} the user sets only where the job runs).
        own = isinstance(values.shape((c.name, "model"), certain=True), Mapping)
        groups = _megatron_groups(c.name if own else _MEGATRON_ROLES[c.name], values, rep)
        out.append(dataclasses.replace(c, model_parallel=ModelParallel(groups)) if groups else c)
    return dataclasses.replace(spec, components=tuple(out))


def _megatron_groups(role: str, values: Values, rep: Reporter) -> tuple[tuple[str, int, str], ...]:
    base = (role, "model")
    sizes: dict[str, int] = {}
    for key in ("tensor_model_parallel_size", "context_parallel_size", "expert_model_parallel_size"):
        raw = values.certain((*base, key))
        size = 1 if raw is None else checked(Integer(1), raw, (*base, key), rep)
        if size is INVALID:
            return ()
        sizes[key] = size
    tp, cp, ep = sizes.values()
    raw = values.certain((*base, "expert_tensor_parallel_size"))
    etp = tp if raw is None else checked(Integer(1), raw, (*base, "expert_tensor_parallel_size"), rep)
    if etp is INVALID:
        return ()
    return parallel_groups(f"{role}.model.", tp, cp, ep, etp)


def parallel_groups(
    where: str, tp: int, cp: int, ep: int, etp: int, kind: str = ""
) -> tuple[tuple[str, int, str], ...]:
    """The GPU groups a Megatron-style model of tensor, context, expert and expert-tensor parallel sizes forms,
    each as (what, GPUs, the keys under `where` it comes from): tensor x context parallel ranks, and expert x
    expert-tensor parallel ranks, where more than one. `kind` prefixes what each is ("actor ")."""
    groups = []
    if tp * cp > 1:
        what = "tensor-parallel" if cp == 1 else "tensor/context-parallel"
        origin = f"{where}tensor_model_parallel_size: {tp}" + (f", context_parallel_size: {cp}" if cp > 1 else "")
        groups.append((kind + what, tp * cp, origin))
    if ep > 1:
        origin = f"{where}expert_model_parallel_size: {ep}, expert_tensor_parallel_size: {etp}"
        groups.append((kind + "expert-parallel", etp * ep, origin))
    return tuple(groups)


def _auto_scheduled(spec: JobSpec, values: Values, rollout_tp: int, rep: Reporter) -> JobSpec:
    """RLinf's AUTO mode: with `cluster.auto_scheduler: true` and no critic, the dynamic scheduler's actor group
    spans every GPU of the cluster and, with `use_pre_process_policy: true`, rollout also starts on the actor's
    GPUs (rlinf/utils/placement.py, ModelParallelComponentPlacement `_is_auto`, `_generate_placements`). The
    written ranges are the scheduler's starting split; an app that runs the scheduler needs those wider
    groups, so they are planned as RLinf creates them, with a warning naming both."""
    path = ("cluster", "auto_scheduler")
    if values.at(path) is not True or spec.component("critic") is not None:
        return spec
    names = ("actor", "rollout", "inference", "actor_inference")
    order = [c for c in (spec.component(n) for n in names) if c is not None and c.placement is not None]
    written = [_gpus(c.placement) for c in order if c.placement is not None]
    ranks = [r for r in written if r is not None and r == tuple(range(r[0], r[-1] + 1))]
    groups = {c.placement.groups for c in order if c.placement is not None}
    if len(groups) > 1 or len(ranks) < len(order):
        rep.add(path, _auto_refusal(order, "each on its own contiguous GPU range of one node group"), True)
        return spec
    if ranks[0][0] != 0 or any(a[-1] + 1 != b[0] for a, b in itertools.pairwise(ranks)):
        rep.add(path, _auto_refusal(order, "one after the other, in that order, starting at GPU 0"), True)
        return spec
    actor_gpus, rollout_gpus = ranks[0], ranks[1]
    pre_process = values.at(("cluster", "use_pre_process_policy")) is True
    if pre_process and len(actor_gpus) % rollout_tp:
        rep.add(
            ("cluster", "use_pre_process_policy"),
            f"use_pre_process_policy: true puts rollout on the actor's {len(actor_gpus)} GPU(s) too (RLinf's AUTO "
            f"mode), which needs a multiple of rollout.tensor_parallel_size {rollout_tp}: resize the actor's range "
            "or set use_pre_process_policy: false",
            True,
        )
        return spec
    (label,) = groups
    widened = {"actor": Placement(label, (Segment(None),))}  # rlplace's choice: it may leave GPUs idle (topology)
    moved = f"actor placed on every GPU (written: {format_ranks(actor_gpus)})"
    if pre_process:
        widened["rollout"] = Placement(label, (Segment(tuple(range(rollout_gpus[-1] + 1))),))
        moved += f" and rollout on GPUs 0-{rollout_gpus[-1]} (written: {format_ranks(rollout_gpus)})"
    rep.warn(
        path,
        f"{moved}, as RLinf's AUTO mode creates them for its dynamic scheduler; auto_scheduler: false places them "
        "as written",
    )
    components = tuple(
        dataclasses.replace(c, placement=widened[c.name], chosen=c.name == "actor") if c.name in widened else c
        for c in spec.components
    )
    return dataclasses.replace(spec, components=components)


def _auto_refusal(order: list[ComponentSpec], how: str) -> str:
    names = ", ".join(c.name for c in order)
    return (
        f"auto_scheduler: true (RLinf's AUTO mode) needs {names} {how}, as RLinf checks before it starts; "
        "change the component_placement ranges or set auto_scheduler: false"
    )


def _rollout_shape(
    spec: JobSpec,
    actor: Placement,
    rollout: Placement,
    actor_tp: int,
    rollout_tp: int,
    rollout_pp: int,
    task: str | None,
    rep: Reporter,
) -> ProcessShape | None:
    tp_path = ("rollout", "tensor_parallel_size")
    a, r = _gpus(actor), _gpus(rollout)
    n = None if r is None else len(r)
    if not _rollout_fits(rollout_tp, r, rep):
        return None
    if actor.groups == rollout.groups and a == r:
        if actor_tp > rollout_tp and actor_tp % rollout_tp:
            rep.add(
                tp_path,
                f"rollout.tensor_parallel_size {rollout_tp} must divide actor.model.tensor_model_parallel_size "
                f"{actor_tp} when actor and rollout share their GPUs (RLinf strides rollout by their ratio)",
                rollout_tp,
            )
            return None
        stride = actor_tp // rollout_tp if actor_tp > rollout_tp else 1
        origin = (
            f"rollout.tensor_parallel_size: {rollout_tp}, actor.model.tensor_model_parallel_size: {actor_tp}, "
            f"collocated -> {rollout_tp} GPU(s) per process" + (f", stride {stride}" if stride > 1 else "")
        )
        return ProcessShape(rollout_tp, stride, origin)
    if a is not None and r is not None and set(a) & set(r) and actor.groups == rollout.groups:
        if task in model_parallel.TRAIN_TASKS:
            return None  # refused by model_parallel.check
        rep.warn(
            ("cluster", "component_placement"),
            "actor and rollout share some GPUs but not all: RLinf's model-parallel placement refuses this (collocated "
            "needs the same GPUs, disaggregated disjoint ones); rollout is placed one process a GPU as written",
        )
        return None
    per = rollout_tp * rollout_pp
    if n is not None:
        per = n // max(n // per, 1)
    origin = (
        f"rollout.tensor_parallel_size: {rollout_tp}, rollout.pipeline_parallel_size: {rollout_pp}, disaggregated "
        f"-> {per} GPU(s) per rollout data-parallel rank"
    )
    return ProcessShape(per, 1, origin)


def _gpus(placement: Placement) -> tuple[int, ...] | None:
    """The resource ranks of a placement, or None for `all`."""
    out: list[int] = []
    for seg in placement.segments:
        if seg.resources is None:
            return None
        out.extend(seg.resources)
    return tuple(out)
