"""`--profile FILE`: what a job's components cost, for the time model (`rlplace tune`, `rlplace plan --time`).

The format (docs/guide.md, "Choosing a placement"), which a profile recorded from a run is written in too:

    measured: {gpus: 8, gpu: A800}     # where the costs were taken
    components:
      rollout: {seconds: 59.9, memory_gb: 30}          # seconds per iteration on measured.gpus GPUs
      actor: {seconds: {8: 95.7, 16: 52.1}, memory_gb: 60}   # or per GPU count of the component
    gpus:
      RTX4090: {memory_gb: 24, speed: 0.26}             # beats the published figures for that model
    model_bytes: 14G                   # the weights a sync moves
    batches: 128                       # group batches an iteration streams through disaggregated stages
    links: {infiniband_gb_s: 50, nics_per_node: 8, cross_zone_gb_s: 12.5}

Read by the config's hardened reader (size, aliases, depth; a missing file is one line). Every bad value is a
ConfigError naming the file, line, key and value, and what is valid; whether a component name is one of the
config's is checked where the config is known (`planner.workload`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from rlplace.config.fields import (
    INVALID,
    Field,
    Integer,
    Invalid,
    JsonSchema,
    Kind,
    MapOf,
    Section,
    is_number,
    section_of,
    written_as,
    written_map,
    written_section,
)
from rlplace.config.files import read_yaml_file
from rlplace.config.hardware import TEXT
from rlplace.config.problems import Path, Reporter, format_path, show
from rlplace.config.sections import MODEL_BYTES
from rlplace.errors import ConfigError, Problem
from rlplace.model import MAX_DEVICES_PER_NODE, MAX_NODES


@dataclass(frozen=True)
class Positive(Kind[float]):
    """A finite number > 0 (seconds, GB, GB/s, a speed ratio)."""

    what: str = "a number > 0"

    def check(self, value: object, path: Path, rep: Reporter) -> float | Invalid:
        if is_number(value) and math.isfinite(value) and value > 0:
            return float(value)
        return self._wrong(value, path, rep)

    def schema(self) -> JsonSchema:
        return {"type": "number", "exclusiveMinimum": 0}

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class SecondsByGpus(Kind[float | dict[int, float]]):
    """`seconds`: one number (measured on `measured.gpus` GPUs), or {GPU count: seconds} (YAML reads `8:` as an
    integer key, JSON as the text "8": both are counts)."""

    def check(self, value: object, path: Path, rep: Reporter) -> float | dict[int, float] | Invalid:
        if not isinstance(value, Mapping):
            return _SECONDS.check(value, path, rep)
        if not value:
            rep.add(path, "must name at least one GPU count, like {8: 95.7}", value)
            return INVALID
        out: dict[int, float] = {}
        for key, seconds in value.items():
            count = int(key) if isinstance(key, str) and key.strip().isdigit() else key
            where = (*path, str(key))
            if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= _MOST_GPUS:
                rep.add(where, f"a GPU count must be an integer from 1 to {_MOST_GPUS}, got {show(key)}", key)
                continue
            checked_s = _SECONDS.check(seconds, where, rep)
            if checked_s is not INVALID:
                out[count] = checked_s
        return out if len(out) == len(value) else INVALID

    def schema(self) -> JsonSchema:
        return {
            "anyOf": [
                _SECONDS.schema(),
                {"type": "object", "patternProperties": {"^[0-9]+$": _SECONDS.schema()}, "minProperties": 1},
            ]
        }

    def describe(self) -> str:
        return "seconds (a number > 0) or {GPU count: seconds}"


_MOST_GPUS = MAX_NODES * MAX_DEVICES_PER_NODE
_SECONDS = Positive("seconds, a number > 0")
_GB = Positive("GB, a number > 0")
_GB_S = Positive("GB/s, a number > 0")

COMPONENT_COST = Section(
    "a component's cost",
    {
        "seconds": Field(SecondsByGpus(), "seconds of one iteration: a number (on measured.gpus) or {GPUs: s}", True),
        "memory_gb": Field(_GB, "GB of GPU memory it holds on each of its GPUs (checked against the GPU model's)"),
    },
)
GPU_FIGURES = Section(
    "a GPU model's figures",
    {
        "memory_gb": Field(_GB, "its memory, GB"),
        "speed": Field(Positive("a speed ratio > 0"), "its throughput relative to an A100 (1.0)"),
        "nvlink_gb_s": Field(_GB_S, "GPU to GPU inside an NVLink domain, GB/s per direction"),
        "pcie_gb_s": Field(_GB_S, "pinned host <-> device copies (offload, reload), GB/s per direction"),
    },
)
LINKS = Section(
    "the network's figures",
    {
        "infiniband_gb_s": Field(_GB_S, "GB/s per NIC and direction between nodes (default 50: NDR 400 Gb/s)"),
        "nics_per_node": Field(Integer(1, 64), "NICs per node (default: one per GPU)"),
        "cross_zone_gb_s": Field(_GB_S, "GB/s per node between zones (default 12.5: 100 Gb/s Ethernet)"),
    },
)
PROFILE = Section(
    "a profile",
    {
        "measured": Field(
            Section(
                "measured",
                {
                    "gpus": Field(Integer(1, _MOST_GPUS), "GPUs a single `seconds` number was measured on"),
                    "gpu": Field(TEXT, "the GPU model they were measured on (its speed rescales them)"),
                },
            ),
            "where the costs were taken: {gpus, gpu}",
        ),
        "components": Field(MapOf(COMPONENT_COST, "component names to costs"), "component -> {seconds, memory_gb}"),
        "gpus": Field(MapOf(GPU_FIGURES, "GPU models to figures"), "GPU model -> {memory_gb, speed, ...}"),
        "model_bytes": MODEL_BYTES,
        "batches": Field(Integer(1, 10**9), "group batches one iteration streams through disaggregated stages"),
        "links": Field(LINKS, "network bandwidths: {infiniband_gb_s, nics_per_node, cross_zone_gb_s}"),
    },
    doc="rlplace's profile file (docs/guide.md, 'Choosing a placement').",
)


@dataclass(frozen=True)
class ComponentCost:
    """One component's measured time per iteration, by its GPU count, and the memory it holds per GPU."""

    seconds: dict[int, float]
    memory_gb: float | None = None


@dataclass(frozen=True)
class GpuFigures:
    """A profile's own figures for a GPU model; None: the published figure (planner/figures.py)."""

    memory_gb: float | None = None
    speed: float | None = None
    nvlink_gb_s: float | None = None
    pcie_gb_s: float | None = None


@dataclass(frozen=True)
class Profile:
    """A checked profile file. `where` locates each key path (`components.actor`) as `file:line`, for the
    problems found once the config is known (a component the config does not have)."""

    file: str
    components: dict[str, ComponentCost]
    measured_gpus: int | None = None
    measured_gpu: str | None = None
    gpus: dict[str, GpuFigures] = field(default_factory=dict)
    model_bytes: int | None = None
    batches: int | None = None
    infiniband_gb_s: float | None = None
    nics_per_node: int | None = None
    cross_zone_gb_s: float | None = None
    where: dict[str, tuple[str, int | None]] = field(default_factory=dict, compare=False)

    def problem(self, path: str, message: str, value: object = None) -> Problem:
        """A problem at `path` of this file, with its line."""
        file, line = self.where.get(path, (self.file, None))
        return Problem(path, message, value, file=file, line=line)


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """The profile file at `path`, checked; ConfigError with every problem (file, line, key, value)."""
    name = os.fspath(path)
    rep, data, _ = read_yaml_file(path, kind="profile")
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(
            Problem(
                "", f"a profile is a mapping with components: (and measured:, gpus:, ...), got {show(data)}", file=name
            )
        )
    checked = PROFILE.check_mapping(data, (), rep)
    profile = _profile(name, checked, rep) if not rep.problems else None
    if rep.problems or profile is None:
        raise ConfigError(rep.sorted_problems())
    return profile


def _profile(name: str, checked: Mapping[str, object], rep: Reporter) -> Profile | None:
    measured = written_section(checked, "measured")
    gpus_measured = written_as(measured, "gpus", int)
    components: dict[str, ComponentCost] = {}
    for comp, written_cost in written_map(checked, "components").items():
        cost = section_of(written_cost)
        seconds = cost["seconds"]
        if not isinstance(seconds, dict):
            assert isinstance(seconds, float), seconds  # SecondsByGpus: one number or {GPUs: seconds}
            if gpus_measured is None:
                rep.add(
                    ("components", comp if isinstance(comp, str | int) else str(comp), "seconds"),
                    f"seconds: {seconds:g} is one number, which means seconds on measured.gpus GPUs, and measured.gpus "
                    "is not written: write measured: {gpus: N} or seconds: {GPUS: seconds}",
                    seconds,
                )
                continue
            seconds = {gpus_measured: seconds}
        components[str(comp)] = ComponentCost(seconds, written_as(cost, "memory_gb", float))
    if not components:
        rep.add(("components",), "a profile needs components: {NAME: {seconds: ...}} with at least one component")
        return None
    links = written_section(checked, "links")
    where = {format_path(p): (rep.files.get(p, name), rep.lines[p]) for p in rep.lines if p}
    return Profile(
        file=name,
        components=components,
        measured_gpus=gpus_measured,
        measured_gpu=written_as(measured, "gpu", str),
        gpus={str(k): _gpu_figures(section_of(v)) for k, v in written_map(checked, "gpus").items()},
        model_bytes=written_as(checked, "model_bytes", int),
        batches=written_as(checked, "batches", int),
        infiniband_gb_s=written_as(links, "infiniband_gb_s", float),
        nics_per_node=written_as(links, "nics_per_node", int),
        cross_zone_gb_s=written_as(links, "cross_zone_gb_s", float),
        where=where,
    )


def _gpu_figures(figures: Mapping[str, object]) -> GpuFigures:
    """A GPU model's figures as `GPU_FIGURES` checked them."""
    return GpuFigures(**{key: written_as(figures, key, float) for key in GPU_FIGURES.fields})
