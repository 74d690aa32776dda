"""`cluster.elastic` (both dialects) -> `JobSpec.elastic`: which components may change size while the job runs.

The section schema (`sections.ELASTIC`) checks the shape; here live the rules that relate the ranges to the
components of the config (docs/config.md, "Elastic components"):

- a name must be one of the config's components (did-you-mean otherwise);
- `min` defaults to 1, `max` to the starting size (the written count); `min <= max`, and the starting size must
  lie inside the range: checked here where the count is written, by the planner where it is derived;
- some components cannot change size on their own, and listing them is an error that says why and what to do:
  robots (hardware does not multiply), components whose devices are another component's (an env sharing eval's
  GPUs under `env_strategy: device-colocate`, buffer shards pinned beside the train workers), and, in manual mode,
  a `max` beyond what the component's range holds (manual ranges are fixed: growth stays inside them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from rlplace.config.fields import INVALID, written
from rlplace.config.pools import gpus_for
from rlplace.config.problems import Path, Reporter, did_you_mean, format_path
from rlplace.config.ranges import format_ranks
from rlplace.errors import ConfigError, Problem
from rlplace.model import NODE_GROUP, ComponentSpec, ElasticRange, JobSpec


def apply(spec: JobSpec, cluster: Mapping[str, object], base: Path, rep: Reporter) -> JobSpec:
    """`spec` with the ranges of `cluster.elastic`; problems go to `rep` (the loader raises)."""
    entries = written(cluster, "elastic")
    if not isinstance(entries, Mapping):
        return spec
    known = _component_names(spec)
    ranges = []
    for name, entry in entries.items():
        path: Path = (*base, "elastic", str(name))
        if entry is INVALID:
            continue
        entry = entry or {}
        valid = not any(v is INVALID for v in entry.values())
        file, line = rep.where(path)
        rng = ElasticRange(str(name), entry.get("min", 1), entry.get("max"), format_path(path), file, line)
        if name not in known:  # said, and the range's own problems too: one round trip fixes the entry
            rep.add(
                path,
                f"'{name}' is not a component of this config{did_you_mean(name, known)} Components: "
                f"{', '.join(known) or 'none'}",
                name,
            )
            if valid:
                _ordered(rng, path, rep)
            continue
        if valid and _check(spec, rng, path, rep):
            ranges.append(rng)
    return dataclasses.replace(spec, elastic=tuple(ranges)) if ranges else spec


def resizable(spec: JobSpec) -> list[str]:
    """The config's components that can change size on their own (those `cluster.elastic` may list)."""
    return [name for name in _component_names(spec) if _cannot_resize(spec, name) is None]


def extend(spec: JobSpec, entries: Mapping[str, Mapping[str, int]], origin: str) -> JobSpec:
    """`spec` with more ranges, checked as `cluster.elastic` is (ConfigError naming `origin` otherwise); a
    component the config already lists keeps its own range. For tools that make components elastic
    (`rlplace demo --elastic`)."""
    rep = Reporter(origin)
    written = {r.component for r in spec.elastic}
    added = apply(spec, {"elastic": {k: dict(v) for k, v in entries.items() if k not in written}}, ("cluster",), rep)
    if rep.problems:
        raise ConfigError(rep.problems)
    new = added.elastic if added is not spec else ()
    return dataclasses.replace(spec, elastic=(*spec.elastic, *new))


def start_problem(rng: ElasticRange, start: int, origin: str) -> Problem | None:
    """The problem of a starting size outside the range (None when inside); the loader and the planner say it alike."""
    if start < rng.min:
        side = f"below its elastic min {rng.min}; lower min to {start} or raise the count"
    elif rng.max is not None and start > rng.max:
        side = f"above its elastic max {rng.max}; raise max to {start} or lower the count"
    else:
        return None
    return Problem(
        path=rng.path,
        value={"min": rng.min, "max": rng.max},
        file=rng.file,
        line=rng.line,
        message=f"{rng.component} starts with {start} worker(s) ({origin}), {side} (the count is the starting size)",
    )


def _component_names(spec: JobSpec) -> list[str]:
    names = [c.name for c in spec.components]
    if spec.dialect == "pools" and "buffer" not in names:
        names.append("buffer")  # the shards the planner places beside train (buffer_worker_num)
    return names


def _check(spec: JobSpec, rng: ElasticRange, path: Path, rep: Reporter) -> bool:
    """Whether the range is usable; every problem found goes to `rep`."""
    ok = _ordered(rng, path, rep)
    refusal = _cannot_resize(spec, rng.component)
    if refusal:
        rep.add(path, f"{rng.component} cannot change size on its own: {refusal}", rng.component)
        return False
    component = spec.component(rng.component)
    start = _written_start(spec, component, rng.component)
    if ok and start is not None:
        problem = start_problem(rng, *start)
        if problem is not None:
            rep.problems.append(problem)
            ok = False
    if ok and component is not None and spec.dialect == "pools" and spec.settings.mode == "manual":
        ok = _fits_range(component, rng, path, rep)
    return ok


def _ordered(rng: ElasticRange, path: Path, rep: Reporter) -> bool:
    """min <= max, else said."""
    if rng.max is not None and rng.min > rng.max:
        rep.add((*path, "min"), f"min {rng.min} is larger than max {rng.max}; min <= max", rng.min)
        return False
    return True


def _cannot_resize(spec: JobSpec, name: str) -> str | None:
    """Why component `name` cannot change size on its own, or None."""
    c = spec.component(name)
    s = spec.settings
    if spec.dialect == "node_groups":
        for label in c.placement.groups if c is not None and c.placement is not None else ():
            group = spec.group(label)
            if group is not None and group.hardware_type is not None:
                return (
                    f"it is placed on the {group.hardware_type} units of node group '{label}', one worker per unit, "
                    "and hardware does not multiply; remove it from elastic"
                )
        return None
    remote = {x.name: x.remote for x in spec.components}
    pooled = s.mode == "manual" or s.auto_strategy != "default"
    if name == "buffer" and pooled and remote.get("buffer", True) and remote.get("train", True):
        strategy = "manual pools" if s.mode == "manual" else f"strategy {s.auto_strategy}"
        return (
            f"under {strategy} there is one buffer shard on each node holding train workers; remove it from elastic "
            "and make train elastic: a shard is added or removed as train grows onto a node or leaves it"
        )
    colocated_env = s.mode == "auto" and s.auto_strategy != "default" and s.env_strategy == "device-colocate"
    if name == "env" and colocated_env and remote.get("env", True):
        return (
            "under env_strategy device-colocate env worker i shares eval worker i's GPU; remove it from elastic and "
            "make eval elastic: env grows and shrinks with eval when they have as many workers"
        )
    return None


def _written_start(spec: JobSpec, c: ComponentSpec | None, name: str) -> tuple[int, str] | None:
    """(starting size, where it comes from) when the config says it, else None (the planner derives it)."""
    if spec.dialect == "node_groups":
        return None if c is None else _placed_processes(c)
    if name == "buffer":
        count = spec.settings.buffer_worker_num
        return (count, f"buffer_worker_num: {count}") if isinstance(count, int) else None
    if c is None or c.num_workers is None:
        if spec.settings.mode == "auto" and name in ("train", "eval"):
            return 1, f"{name}_worker_num not written: 1 in auto mode"
        return None
    if c.path.startswith("env"):  # a whole RLightning config: the env: groups count the env workers
        return c.num_workers, f"num_workers of the env: groups at {c.path}"
    return c.num_workers, f"{name}_worker_num: {c.num_workers}"


def _placed_processes(c: ComponentSpec) -> tuple[int, str] | None:
    """Processes a placement string gives, when it names its resources (not `all`)."""
    if c.placement is None or any(seg.resources is None for seg in c.placement.segments):
        return None
    resources = sum(len(seg.resources or ()) for seg in c.placement.segments)
    if c.process_shape is not None:
        d = c.process_shape.devices_per_process * c.process_shape.stride
        if resources % d:
            return None  # the planner reports the shape problem
        n = resources // c.process_shape.devices_per_process
    else:
        n = sum(len(seg.processes or seg.resources or ()) for seg in c.placement.segments)
    through = "+".join(c.placement.groups)
    return n, f"its placement in {through} gives {n} process(es)" if through != NODE_GROUP else f"{n} node process(es)"


def _fits_range(c: ComponentSpec, rng: ElasticRange, path: Path, rep: Reporter) -> bool:
    """Manual mode: growth stays inside the written range, so `max` workers must fit it."""
    if rng.max is None or c.placement is None or c.gpus_per_worker <= 0:
        return True
    ranks = [r for seg in c.placement.segments for r in seg.resources or ()]
    need = gpus_for(rng.max, c.gpus_per_worker)
    if need <= len(ranks):
        return True
    rep.add(
        (*path, "max"),
        f"max {rng.max} {c.name} workers of {c.gpus_per_worker:g} GPU each need {need} GPUs, but the range of "
        f"{c.name} in pool {c.placement.groups[0]} ({c.path}: {format_ranks(ranks)}) holds {len(ranks)}: in manual "
        "mode a component grows only inside its range; widen the range or lower max",
        rng.max,
    )
    return False
