"""`rlplace run ... --profile-out FILE`: the profile of a run (the format `rlplace tune --profile` reads,
config/profile_file.py), from the seconds its phases took (`rlplace.phases.PhaseTimes`).

What a phase measures: the wall seconds of its `with job.phase(NAME)` block in the driver, waiting on the workers
included, the offload hooks around it not (the time model adds those from memory_gb and the host link). Which
component's cost a phase is (`phase_components`):
- a phase named like a component of the plan is that component's (`rollout` in RLinf's dialect);
- else `rollout` is the rollout role's (`eval`), `train` the trainer's (`actor`);
- `sync` and `evaluate` are no component's: the model counts weight sync from model_bytes and the links, and an
  evaluation is not part of every iteration;
- `--profile-phase PHASE=COMPONENT` says otherwise, for any phase (phases given to one component add up).
A component's seconds are the median over its phase's entries (one a iteration: the median, so that a first,
warm-up iteration or an iteration redone after a node loss does not count), written at the GPU count it ran on
(`{GPUS: seconds}`), and, where its GPUs are faster than the slowest GPU model the recorded components ran on
(`measured.gpu`), stretched to that model by the ratio of their speeds (planner/figures.py), which the model
divides out again. Memory per GPU is torch's peak allocated, where the workers used CUDA through torch; else it is
left out, and the file says so. Pure: the caller hands in the plan, the nodes and the times.
"""

from __future__ import annotations

import math
import os
import pathlib
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.output_files import check_output_file, write_file
from rlplace.phases import HOOKS
from rlplace.plan import Plan
from rlplace.planner.estimate import EVAL_ROLES, TRAIN_ROLES
from rlplace.planner.figures import gpu_model
from rlplace.planner.workload import ROLE_ORDER

#: The phases a job times (`job.phase(NAME)`), and the roles whose component each is by default.
PHASES = tuple(HOOKS)
DEFAULT_ROLES: dict[str, tuple[str, ...]] = {"rollout": EVAL_ROLES, "train": TRAIN_ROLES}
#: What the time model does instead with the phases that are no component's by default.
NOT_A_COMPONENT = {
    "sync": "weight sync, which the model counts from model_bytes and the links",
    "evaluate": "an evaluation, not part of every iteration",
}
#: The names the time model orders an iteration by (planner/workload.py): the only components a profile may cost.
TIMED = tuple(name for names in ROLE_ORDER for name in names)
GB = 1e9


@dataclass(frozen=True)
class Recorded:
    """A run's profile: the file's text, and per component (GPUs it ran on, seconds written) for the caller's
    message."""

    text: str
    components: dict[str, tuple[int, float]]

    def describe(self, path: str | os.PathLike[str], config: str = "CONFIG") -> str:
        """What was written, and the command that uses it."""
        costs = ", ".join(f"{c} {t:.4g} s on {n} GPU(s)" for c, (n, t) in self.components.items())
        return (
            f"profile written to {path}: {costs} an iteration; tune with it: rlplace tune {config} --nodes ... "
            f"--profile {path}"
        )


def check_profile_request(
    profile_out: str | os.PathLike[str] | None, phase_map: Sequence[tuple[str, str]], spec: JobSpec
) -> None:
    """`--profile-out FILE` with its `--profile-phase PHASE=COMPONENT`s (`rlplace run`, `rlplace demo`): a link or a
    missing folder at FILE, or a phase mapped to a component the config lacks, is refused before any cluster
    starts. Nothing to check without FILE."""
    if not profile_out:
        return
    check_output_file(profile_out)
    check_phase_map(dict(phase_map), [c.name for c in spec.components], spec.source)


def check_phase_map(mapping: Mapping[str, str], components: Sequence[str], source: str | None = None) -> None:
    """Refuse, before a run starts, `--profile-phase PHASE=COMPONENT` naming a component the config lacks or one the
    time model cannot order (a ConfigError naming the flag, the value and the valid names)."""
    valid = [c for c in components if c in TIMED]
    problems = [
        Problem(
            "--profile-phase",
            f"{phase}={component}: the config has no component {component!r}"
            if component not in components
            else f"{phase}={component}: the time model orders only {', '.join(TIMED)}, so `rlplace tune` could not "
            f"use a cost of {component!r}",
            f"{phase}={component}",
            file=source,
        )
        for phase, component in mapping.items()
        if component not in valid
    ]
    if problems:
        valid_names = ", ".join(valid) or "none"
        raise ConfigError([Problem(p.path, f"{p.message}; valid: {valid_names}", p.value, p.file) for p in problems])


def phase_components(components: Sequence[str], mapping: Mapping[str, str] | None = None) -> dict[str, str]:
    """phase -> the component whose cost it is (see the module's doc); phases of no component are left out."""
    out: dict[str, str] = {}
    for phase in PHASES:
        if phase in components and phase in TIMED:
            out[phase] = phase
        elif phase in DEFAULT_ROLES:
            found = next((c for c in DEFAULT_ROLES[phase] if c in components), None)
            if found is not None:
                out[phase] = found
    out.update(mapping or {})
    return out


def recorded_profile(
    plan: Plan,
    inventory: Inventory,
    seconds: Mapping[str, Sequence[float]],
    memory_gb: Mapping[str, float],
    *,
    mapping: Mapping[str, str] | None = None,
    model_bytes: int | None = None,
    written_by: str = "rlplace run",
) -> Recorded:
    """The profile of a run of `plan` on `inventory` whose phases took `seconds` (phase -> each entry's seconds);
    RlplaceError when no phase is a component's on GPUs (nothing worth a file)."""
    if not any(seconds.values()):
        raise RlplaceError(
            "the command finished no phase, so there is nothing to measure: time each iteration's parts with `with "
            'job.phase("rollout"): ...` and `with job.phase("train"): ...` (docs/guide.md, "Measuring a profile")'
        )
    of = phase_components(plan.components, mapping)
    gpus = _gpus(plan)
    notes = [
        "A phase's seconds: the wall time of its `with job.phase(...)` block in the driver, waiting on the workers "
        "included, the offload hooks around it not; the median over its entries (one an iteration)."
    ]
    median: dict[str, float] = {}
    for phase, entries in seconds.items():
        if not entries:
            continue
        component = of.get(phase)
        low, high = min(entries), max(entries)
        spread = f"{len(entries)} entries, median {statistics.median(entries):.4g} s ({low:.4g} to {high:.4g})"
        if component is None:
            why = NOT_A_COMPONENT.get(phase, "no component of the config")
            notes.append(f"{phase}: {spread}; not written: {why} (--profile-phase {phase}=COMPONENT counts it)")
        elif not gpus.get(component):
            notes.append(f"{phase} -> {component}: {spread}; not written: {component} ran on no GPU")
        else:
            median[component] = median.get(component, 0.0) + statistics.median(entries)
            notes.append(f"{phase} -> {component}: {spread}")
    if not median:
        raise RlplaceError(
            "no phase the command finished is the cost of a component on GPUs: "
            + "; ".join(notes[1:])
            + " (docs/guide.md, 'Measuring a profile')"
        )
    reference, speeds, said = _reference(median, gpus, inventory)
    notes.extend(said)
    costs: dict[str, dict] = {}
    written: dict[str, tuple[int, float]] = {}
    for component, t in median.items():
        n = len(gpus[component])
        value = max(float(f"{t * speeds[component]:.6g}"), 1e-6)  # > 0, as the profile's reader wants
        costs[component] = {"seconds": {n: value}}
        written[component] = (n, value)
        if component in memory_gb:
            costs[component]["memory_gb"] = max(math.ceil(memory_gb[component] * 100) / 100, 0.01)
    unknown = [c for c in costs if "memory_gb" not in costs[c]]
    if unknown:
        notes.append(
            f"memory_gb left out ({', '.join(unknown)}): no worker of theirs used CUDA through torch, so their memory "
            "is unknown (tune takes them to fit); write memory_gb: GB yourself"
        )
    doc: dict = {"measured": {"gpus": inventory.total_gpus}}
    if reference is not None:
        doc["measured"]["gpu"] = reference
    if model_bytes is not None:
        doc["model_bytes"] = model_bytes
    else:
        notes.append("model_bytes left out: the config writes no cluster.model_bytes (tune then assumes 14 GB)")
    doc["components"] = costs
    header = [
        f"Measured by `{written_by}`: what each component's phases took on that run, for `rlplace tune CONFIG "
        "--profile FILE` (docs/guide.md, 'Measuring a profile').",
        *notes,
    ]
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    comments = (f"# {part}\n" for line in header for part in textwrap.wrap(line, 116, break_on_hyphens=False))
    return Recorded("".join(comments) + body, written)


def write_profile(path: str | os.PathLike[str], recorded: Recorded) -> pathlib.Path:
    """Write the profile to `path` (never through a link: rlplace.output_files)."""
    return write_file(path, recorded.text)


def _gpus(plan: Plan) -> dict[str, set[tuple[int, int]]]:
    """The (node, GPU) pairs each component's workers ran on (those Ray placed have no node and are not counted)."""
    out: dict[str, set[tuple[int, int]]] = {}
    for w in plan.workers:
        if w.node_rank is not None:
            out.setdefault(w.component, set()).update((w.node_rank, g) for g in w.gpus)
    return out


def _reference(
    median: Mapping[str, float], gpus: Mapping[str, set[tuple[int, int]]], inventory: Inventory
) -> tuple[str | None, dict[str, float], list[str]]:
    """`measured.gpu` (the slowest model the recorded components ran on, as the nodes name it), each component's
    stretch to it, and what to say. Without a model for every node, no `measured.gpu` and no stretch."""
    slowest: dict[str, tuple[str, float]] = {}  # component -> (model as named, its speed)
    for component in median:
        models = {inventory.node(node).gpu_model for node, _ in gpus[component]}
        if None in models:
            return (
                None,
                dict.fromkeys(median, 1.0),
                [
                    "measured.gpu left out: the nodes name no GPU model (--simulate COUNTxGPUS:MODEL names one); tune "
                    "takes the costs as measured on the slowest GPU model of the nodes it tunes for"
                ],
            )
        slowest[component] = min(((str(m), gpu_model(m).speed) for m in models), key=lambda named: named[1])
    reference, speed = min(slowest.values(), key=lambda named: named[1])
    stretch = {c: s / speed for c, (_, s) in slowest.items()}
    said = [
        f"{c} ran on {model}, {stretch[c]:.3g} times as fast as {reference}: its seconds are stretched to {reference}'s"
        for c, (model, _) in slowest.items()
        if stretch[c] != 1.0
    ]
    return reference, stretch, said
