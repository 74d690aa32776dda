"""Effective settings: every value the user left out, derived as docs/decisions.md ("Values left out") decides, so a
plan says exactly what it was made with (and never rewrites a written value silently)."""

from __future__ import annotations

from dataclasses import dataclass

from rlplace.errors import ConfigError, Problem
from rlplace.model import COUNTED_COMPONENTS, ComponentSpec, JobSpec


@dataclass(frozen=True)
class Resolved:
    """Effective settings before the buffer count is known (that needs the placement)."""

    mode: str
    strategy: str
    env_strategy: str
    is_colocated: bool | None  # None: derive from the placement (manual mode, node groups)
    enable_offload: bool | None  # None: follows is_colocated
    warnings: tuple[str, ...]


def resolve(spec: JobSpec) -> Resolved:
    s = spec.settings
    where = spec.source
    if spec.dialect == "node_groups":
        return Resolved("manual", "node_groups", "default", s.is_colocated, s.enable_offload, ())
    if spec.dialect == "verl":  # verl's trainer decides the pools (planner/verl.py)
        return Resolved("manual", "verl", "default", None, None, ())
    warnings: list[str] = []
    if s.mode == "manual":
        if s.strategy is not None or s.env_strategy is not None:
            written = ", ".join(
                f"{k}: {v}" for k, v in (("strategy", s.strategy), ("env_strategy", s.env_strategy)) if v is not None
            )
            warnings.append(f"placement.mode is manual: {written} ignored (resource_pool decides the placement)")
        return Resolved("manual", "manual", "default", s.is_colocated, s.enable_offload, tuple(warnings))
    strategy = s.auto_strategy
    if s.is_colocated is not None and s.is_colocated != (strategy == "colocate"):
        raise ConfigError(
            Problem(
                path="cluster.is_colocated",
                value=s.is_colocated,
                file=where,
                message=f"is_colocated: {str(s.is_colocated).lower()} contradicts placement.strategy: {strategy}; "
                "is_colocated is true exactly under strategy colocate (or leave it out)",
            )
        )
    env_strategy = s.env_strategy or "default"
    # device-colocate beside disaggregate is planned as RLightning does (env i shares eval i's GPU in the
    # rollout pool), although RLightning's docs' table says "Requires strategy: colocate" (docs/planner.md).
    # env_strategy under strategy default has no effect: the loader warns (JobSpec.warnings, with file and line).
    return Resolved("auto", strategy, env_strategy, strategy == "colocate", s.enable_offload, tuple(warnings))


def offload(spec: JobSpec, is_colocated: bool, warnings: list[str]) -> bool:
    """enable_offload follows is_colocated unless written; a written false beside colocation is kept, warned."""
    written = spec.settings.enable_offload
    if written is None:
        return is_colocated
    if is_colocated and not written:
        warnings.append(
            "enable_offload: false with train and eval colocated: kept as written, but both models stay "
            "resident on the shared GPUs (risk of out-of-memory)"
        )
    return written


@dataclass(frozen=True)
class Counted:
    """A pools-dialect component with its effective worker count."""

    name: str
    count: int
    gpus: float  # per worker
    cpus: float
    spec: ComponentSpec


def auto_counts(spec: JobSpec) -> dict[str, Counted]:
    """Worker counts in auto mode: train/eval default 1, env follows eval (docs/decisions.md, "Values left out")."""
    out: dict[str, Counted] = {}
    for name in COUNTED_COMPONENTS:
        c = spec.component(name) or ComponentSpec(name=name, path=f"cluster.{name}_worker_num")
        n = c.num_workers
        if n is None:
            n = out["eval"].count if name == "env" else 1
        out[name] = Counted(name, n, c.gpus_per_worker, c.cpus_per_worker, c)
    return out


def buffer_cpus(spec: JobSpec) -> float:
    c = spec.component("buffer")
    return c.cpus_per_worker if c is not None else 1.0
