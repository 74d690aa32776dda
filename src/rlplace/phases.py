"""Phases of an RL iteration and the offload hooks that run around them.

Colocated train and eval workers fit on one GPU only if each gets out of the way while the other runs (docs/runtime.md,
"Phases and offload hooks"). The engine calls RLightning's hooks, with its names and arguments, so worker classes
written for RLightning run unchanged:

    rollout, evaluate  before: eval.reload_eval_model(), then env.reload_env_model()
                       after:  eval.offload_eval_model(), then env.offload_env_model()
    train              before: train.reload_model_param_and_grad(load_grad=True, load_optimizer=True)
    sync               before: train.offload_model_optimizer()
                       after:  train.offload_model_param_and_grad(offload_grad=True, offload_optimizer=False)

Decisions: a hook a worker's class does not define is skipped; with offload disabled nothing is called;
post-hooks run only when the phase body finished without an exception (calling a dead worker again
would bury the real error); phases do not nest (the memory reasoning above assumes one at a time).
Every call is recorded in `Phases.events`, in order, so the order is observable.

Each phase body that finishes is timed (`PhaseTimes`): the wall seconds of the `with` block in the driver, waiting
on the workers included, the hooks around it not (the time model adds offload and reload from memory and host
bandwidth itself). `rlplace run --profile-out FILE` turns them into a profile for `rlplace tune` (docs/guide.md,
"Measuring a profile"); the phases of a driver it started reach it through a file (`PhaseTimes.path`).

Pure (no Ray import), below the Ray layer, so the Job can offer `job.phase(...)` without the Ray layer
importing the runtime; `rlplace.runtime` exports it with the other runtime services.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.groups import Group, call_defined
from rlplace.output_files import write_file

Stage = Literal["pre", "post"]
Role = Literal["train", "eval", "env"]


@dataclass(frozen=True)
class Hook:
    """One hook: the method to call on every worker of the component that plays `role`."""

    role: Role
    method: str
    kwargs: tuple[tuple[str, Any], ...] = ()


_ROLLOUT = (
    (Hook("eval", "reload_eval_model"), Hook("env", "reload_env_model")),
    (Hook("eval", "offload_eval_model"), Hook("env", "offload_env_model")),
)

#: phase -> (hooks before the body, hooks after it), in call order.
HOOKS: dict[str, tuple[tuple[Hook, ...], tuple[Hook, ...]]] = {
    "rollout": _ROLLOUT,
    "evaluate": _ROLLOUT,
    "train": ((Hook("train", "reload_model_param_and_grad", (("load_grad", True), ("load_optimizer", True))),), ()),
    "sync": (
        (Hook("train", "offload_model_optimizer"),),
        (Hook("train", "offload_model_param_and_grad", (("offload_grad", True), ("offload_optimizer", False))),),
    ),
}

#: Which component plays each role unless the caller says otherwise (dialect B users name theirs freely).
DEFAULT_ROLES: dict[str, str] = {"train": "train", "eval": "eval", "env": "env"}


@dataclass(frozen=True)
class HookEvent:
    """One hook call on one component: which ranks had the method, which did not, what they returned."""

    phase: str
    stage: Stage
    component: str
    method: str
    kwargs: dict[str, Any] = field(hash=False)
    ranks: tuple[int, ...]
    skipped: tuple[int, ...]
    results: tuple[Any, ...] = field(hash=False)


@dataclass
class PhaseTimes:
    """The wall seconds of every phase body a job finished, by phase in order of entry, and each component's peak
    GPU memory per GPU (GB, where torch reported one: `cuda_peak_gb`). With `path`, the whole record is written
    there (JSON, owner-only) after every phase, so it survives a driver that never shuts its job down."""

    path: str | None = None
    seconds: dict[str, list[float]] = field(default_factory=dict)
    memory_gb: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds.setdefault(phase, []).append(seconds)
        self._save()

    def set_memory(self, memory_gb: Mapping[str, float]) -> None:
        self.memory_gb.update(memory_gb)
        self._save()

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "memory_gb": self.memory_gb}

    def _save(self) -> None:
        if self.path is not None:
            write_file(self.path, json.dumps(self.to_dict()), mode=0o600)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> PhaseTimes | None:
        """The record a driver wrote at `path`; None when it wrote none (it finished no phase)."""
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise RlplaceError(f"{path} holds no phase times a job wrote ({e})") from None
        try:
            seconds = {str(k): [float(x) for x in v] for k, v in doc["seconds"].items()}
            memory = {str(k): float(v) for k, v in doc["memory_gb"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise RlplaceError(f"{path} holds no phase times a job wrote ({e!r})") from None
        return cls(None, seconds, memory)


def cuda_peak_gb(_instance: object = None) -> float | None:
    """Runs in a worker (through `__ray_call__`): torch's peak memory allocated on the busiest of its GPUs, GB;
    None where this process has not used CUDA through torch (no torch, no GPU, or a simulated one)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return max(torch.cuda.max_memory_allocated(d) for d in range(torch.cuda.device_count())) / 1e9


class Phases:
    """Runs the offload hooks around phases on a job's worker groups, and times the phases' bodies (`times`).

    `groups` maps component name to its WorkerGroup (anything with `actors` and `workers`); components
    not launched are simply not called. `roles` renames components (`{"eval": "rollout"}`). `times`: where the
    bodies' seconds go (a job's Phases share its `phase_times`).
    """

    def __init__(
        self,
        groups: Mapping[str, Group],
        enabled: bool,
        roles: Mapping[str, str] | None = None,
        times: PhaseTimes | None = None,
    ):
        unknown = sorted(set(roles or {}) - set(DEFAULT_ROLES))
        if unknown:
            raise ConfigError(
                Problem(
                    path="roles",
                    value=unknown[0],
                    message=f"unknown role {unknown[0]!r}; valid: {', '.join(DEFAULT_ROLES)}",
                )
            )
        self.groups = groups
        self.enabled = enabled
        self.roles = {**DEFAULT_ROLES, **(roles or {})}
        self.events: list[HookEvent] = []
        self.times = PhaseTimes() if times is None else times
        self._current: str | None = None

    @classmethod
    def for_job(cls, job: Any, roles: Mapping[str, str] | None = None) -> Phases:
        """Phases over a `rlplace.connect()` job: its groups (also those launched later), offload as planned,
        timed into the job's `phase_times`."""
        return cls(job.groups, job.plan.settings.enable_offload, roles, getattr(job, "phase_times", None))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Run the body of phase `name` between its pre- and post-hooks; a body that finishes is timed."""
        if name not in HOOKS:
            raise ConfigError(
                Problem(path="phase", value=name, message=f"unknown phase {name!r}; valid: {', '.join(HOOKS)}")
            )
        if self._current is not None:
            raise RlplaceError(f"phase {name!r} entered inside phase {self._current!r}; phases run one after another")
        pre, post = HOOKS[name]
        self._current = name
        try:
            self._run(name, "pre", pre)
            start = time.perf_counter()
            yield
            self.times.add(name, time.perf_counter() - start)
            self._run(name, "post", post)
        finally:
            self._current = None

    def _run(self, phase: str, stage: Stage, hooks: tuple[Hook, ...]) -> None:
        if not self.enabled:
            return
        for hook in hooks:
            component = self.roles[hook.role]
            group = self.groups.get(component)
            if group is None:
                continue
            kwargs = dict(hook.kwargs)
            ranks, results = call_defined(group, hook.method, **kwargs)
            skipped = tuple(w.rank for w in group.workers if w.rank not in ranks)
            self.events.append(
                HookEvent(phase, stage, component, hook.method, kwargs, tuple(ranks), skipped, tuple(results))
            )
