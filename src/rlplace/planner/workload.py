"""What a job's iteration costs, independent of where it runs: its timed components (stages) in the order data
flows through them, how each one's time scales with its GPUs, its memory, and the constants the time model needs
(group batches, whether disaggregated stages stream, the model's size, GPU and link figures).

Built from a config (RLinf's `profile_data`, config/rlinf_profile.py) and/or a profile file
(config/profile_file.py), checked against the config's components: a cost for a component the config does not
have is a ConfigError naming it and the valid names. The stages run in the order of their roles: env, then
rollout (eval), then inference, then actor (train); RLinf's `inference` may be left out of the placement, and
then runs on the actor's GPUs (RLinf's actor recomputes the log-probabilities itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlplace.config.profile_file import Profile
from rlplace.config.rlinf_profile import EMBODIED, RlinfProfile
from rlplace.config.sections import SEQUENTIAL, STREAMED
from rlplace.errors import ConfigError, Problem
from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.plan import Plan
from rlplace.planner import scaling
from rlplace.planner.figures import CROSS_ZONE_GB_S, INFINIBAND_GB_S, GpuModel, gpu_model
from rlplace.planner.scaling import Curve

#: The roles, in the order an iteration's data flows through them, with both dialects' names.
ROLE_ORDER = (("env",), ("rollout", "eval"), ("inference",), ("actor", "train"))
#: A stage that may be left out of the placement, and whose GPUs it then runs on (RLinf's actor computes the
#: log-probabilities itself when no inference component is placed).
HOSTS = {"inference": "actor"}


@dataclass(frozen=True)
class Stage:
    """One timed component: its time per iteration by GPU count (on the reference GPU), the GPUs it takes in
    whole groups (`unit`: model-parallel size or engine size; a group stays in one NVLink domain), its memory per
    GPU, and where its numbers came from."""

    name: str
    curve: Curve
    unit: int = 1
    memory_gb: float | None = None
    host: str | None = None  # runs on this component's GPUs when the config does not place it
    spans_all: bool = False  # must use every GPU tuned (RLinf's embodied actor)
    origin: str = ""


@dataclass(frozen=True)
class Links:
    """The network's figures (planner/figures.py; a profile's `links:` beats them)."""

    infiniband_gb_s: float = INFINIBAND_GB_S
    nics_per_node: int | None = None  # None: one per GPU
    cross_zone_gb_s: float = CROSS_ZONE_GB_S


@dataclass(frozen=True)
class Workload:
    stages: tuple[Stage, ...]  # in data-flow order
    batches: int  # group batches an iteration streams through disaggregated stages
    streamed: bool  # disaggregated stages overlap (streamed) or run one after another (sequential)
    #: Speed of the GPU the costs were measured on, relative to an A100; a stage on slower GPUs takes longer.
    reference_speed: float
    gpus: dict[str, GpuModel] = field(default_factory=dict)  # the profile's figures, by GPU model
    model_bytes: int | None = None
    links: Links = field(default_factory=Links)
    sources: tuple[str, ...] = ()  # where the costs came from, for the views
    assumed: tuple[str, ...] = ()  # inputs nobody gave, for the views

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def gpu(self, model: str | None) -> GpuModel:
        return gpu_model(model, self.gpus)


def build_workload(
    spec: JobSpec,
    written: Plan,
    inventory: Inventory,
    rlinf: RlinfProfile | None = None,
    profile: Profile | None = None,
) -> Workload:
    """The workload of `spec` (planned as written: `written`) on `inventory`; ConfigError when there are no costs
    or a cost names a component the config lacks."""
    if rlinf is None and profile is None:
        raise ConfigError(
            Problem(
                "profile_data",
                "no costs to predict with: write RLinf's profile_data in the config (actor_cost, rollout_cost, ...) "
                "or pass --profile FILE (components: {NAME: {seconds: ...}}; docs/guide.md, 'Choosing a placement')",
                file=spec.source,
            )
        )
    counts = _gpu_counts(written)
    placed = {c.name for c in spec.components}
    stages: dict[str, Stage] = {}
    sources: list[str] = []
    if rlinf is not None:
        stages.update(_rlinf_stages(rlinf, counts, placed, inventory))
        sources.append(f"RLinf's profile_data in {spec.source or 'the config'} (runner.task_type {rlinf.task})")
    if profile is not None:
        stages.update(_profile_stages(profile, spec, placed, stages))
        sources.append(f"profile {profile.file}")
    ordered = tuple(sorted(stages.values(), key=lambda s: _role_index(s.name)))
    for s in ordered:
        if s.name not in placed and s.host not in placed:
            raise ConfigError(
                Problem(
                    s.name,
                    f"has a cost but the config places no {s.name}"
                    + (f" (nor {s.host}, whose GPUs it would use)" if s.host else "")
                    + f"; the config's components: {', '.join(sorted(placed))}",
                    file=spec.source,
                )
            )
    assumed: list[str] = []
    model_bytes = (profile.model_bytes if profile else None) or spec.model_bytes
    if model_bytes is None:
        assumed.append("model size 14 GB (write cluster.model_bytes, or model_bytes in the profile)")
    if all(s.memory_gb is None for s in ordered):
        assumed.append("memory not checked (no memory_gb in the costs): components are taken to fit")
    speed, said = _reference_speed(profile, inventory, assumed)
    if said:
        sources.append(said)
    stream = spec.disaggregated_stages or (STREAMED if spec.dialect == "node_groups" else SEQUENTIAL)
    batches = (rlinf.batches if rlinf else None) or (profile.batches if profile else None) or 1
    links = Links(
        (profile.infiniband_gb_s if profile else None) or INFINIBAND_GB_S,
        profile.nics_per_node if profile else None,
        (profile.cross_zone_gb_s if profile else None) or CROSS_ZONE_GB_S,
    )
    return Workload(
        stages=ordered,
        batches=batches,
        streamed=stream == STREAMED,
        reference_speed=speed,
        gpus=_profile_gpus(profile),
        model_bytes=model_bytes,
        links=links,
        sources=tuple(sources),
        assumed=tuple(assumed),
    )


def _role_index(name: str) -> int:
    return next(i for i, names in enumerate(ROLE_ORDER) if name in names)


def _gpu_counts(plan: Plan) -> dict[str, int]:
    """GPUs each component of the written plan uses."""
    sets: dict[str, set[tuple[int | None, int]]] = {}
    for w in plan.workers:
        sets.setdefault(w.component, set()).update((w.node_rank, g) for g in w.gpus)
    return {c: len(s) for c, s in sets.items()}


def _rlinf_stages(r: RlinfProfile, counts: dict[str, int], placed: set[str], inventory: Inventory) -> dict[str, Stage]:
    """RLinf's rules (planner/scaling.py): each cost measured on the component's written GPUs (inference on the
    actor's when it is not placed), every count RLinf's tool would try up to the cluster's GPUs."""
    total = inventory.total_gpus
    out: dict[str, Stage] = {}
    for name in ("actor", "rollout", "inference", "env"):
        if name not in r.costs and name not in r.embodied:
            continue
        host = HOSTS.get(name) if name not in placed else None
        written = counts.get(host or name, 0)
        if not written:
            continue  # reported by build_workload: nothing placed to run it on
        unit = r.units.get(name, 1)
        origin = r.origins.get(f"profile_data.{name}_cost", "")
        if r.task == EMBODIED and name != "actor":
            key = f"profile_data.{name}_profile_data"
            curve = scaling.embodied(r.embodied[name], r.env_num, total, unit, aligned=name == "env")
            out[name] = Stage(name, curve, unit, origin=f"{key} with data.env_num {r.env_num} (RLinf's rule)")
        elif name == "rollout":
            requests = r.batches * r.group_size
            curve = scaling.rollout(r.costs[name], written, unit, r.max_running_requests, requests)
            out[name] = Stage(name, curve, unit, origin=f"{origin} on {written} GPUs (RLinf's rollout rule)")
        else:
            batch, group, mini = (1, 1, 1) if r.task == EMBODIED else (r.batches, r.group_size, r.minibatches)
            valid = scaling.megatron_valid_counts(total, unit, group, batch, mini)
            curve = scaling.megatron(r.costs[name], written, valid)
            out[name] = Stage(
                name,
                curve,
                unit,
                host=HOSTS.get(name),
                spans_all=r.task == EMBODIED,
                origin=f"{origin} on {written} GPUs (RLinf's Megatron rule)",
            )
    return out


def _profile_stages(profile: Profile, spec: JobSpec, placed: set[str], known: dict[str, Stage]) -> dict[str, Stage]:
    """A profile file's components: its own points, units from the config (model-parallel size, GPUs a process)."""
    valid = sorted(placed | {n for n, h in HOSTS.items() if h in placed})
    out: dict[str, Stage] = {}
    problems = []
    for name, cost in profile.components.items():
        if name not in valid or not any(name in names for names in ROLE_ORDER):
            why = (
                f"the config has no component {name!r}; valid: {', '.join(valid)}"
                if name not in valid
                else f"{name!r} has no place in an iteration's order (env, rollout/eval, inference, actor/train)"
            )
            problems.append(profile.problem(f"components.{name}", why, name))
            continue
        before = known.get(name)
        unit = before.unit if before else _unit(spec, name)
        points = ", ".join(f"{s:g} s on {g}" for g, s in sorted(cost.seconds.items()))
        out[name] = Stage(
            name,
            scaling.measured(cost.seconds),
            unit,
            cost.memory_gb,
            host=HOSTS.get(name),
            spans_all=before.spans_all if before else False,
            origin=f"{profile.file}: {points} GPU(s)",
        )
    if problems:
        raise ConfigError(problems)
    return out


def _unit(spec: JobSpec, name: str) -> int:
    """GPUs a model-parallel group (or a process) of `name` takes, as the config says."""
    c = spec.component(name) or spec.component(HOSTS.get(name, ""))
    if c is None:
        return 1
    sizes = [1]
    if c.model_parallel is not None:
        sizes.append(c.model_parallel.size)
    if c.process_shape is not None:
        sizes.append(c.process_shape.devices_per_process)
    if c.gpus_per_worker >= 1:
        sizes.append(int(c.gpus_per_worker))
    return max(sizes)


def _reference_speed(profile: Profile | None, inventory: Inventory, assumed: list[str]) -> tuple[float, str]:
    """The speed of the GPU the costs were measured on: the profile's `measured.gpu`, else the slowest GPU model of
    the inventory (RLinf's profile is measured collocated on the cluster, paced by its slowest GPU)."""
    figures = _profile_gpus(profile)
    if profile is not None and profile.measured_gpu:
        model = gpu_model(profile.measured_gpu, figures)
        if model.source == "assumed":
            assumed.append(f"measured.gpu {profile.measured_gpu}: a model rlplace does not know, speed 1")
        return model.speed, f"costs measured on {profile.measured_gpu}"
    models = {n.gpu_model for n in inventory.nodes if n.num_gpus}
    speeds = [gpu_model(m, figures) for m in models]
    unknown = sorted(str(m) for m, g in zip(models, speeds, strict=True) if g.source == "assumed" and m)
    if None in models:
        assumed.append("GPU model not given (--nodes COUNTxGPUS:MODEL): speed 1, memory unchecked")
    if unknown:
        assumed.append(f"GPU model {', '.join(unknown)}: not known to rlplace, speed 1 and memory unchecked")
    return min((g.speed for g in speeds), default=1.0), ""


def _profile_gpus(profile: Profile | None) -> dict[str, GpuModel]:
    """The profile's GPU figures, each completed from the published ones."""
    out: dict[str, GpuModel] = {}
    if profile is None:
        return out
    for name, f in profile.gpus.items():
        base = gpu_model(name)
        out[name] = GpuModel(
            name,
            f.memory_gb or base.memory_gb,
            f.speed or base.speed,
            f.nvlink_gb_s or base.nvlink_gb_s,
            f.pcie_gb_s or base.pcie_gb_s,
            source=f"profile {profile.file}",
        )
    return out
