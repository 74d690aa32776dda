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

Pure (no Ray import), below the Ray layer, so the Job can offer `job.phase(...)` without the Ray layer
importing the runtime; `rlplace.runtime` exports it with the other runtime services.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.groups import Group, call_defined

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


class Phases:
    """Runs the offload hooks around phases on a job's worker groups.

    `groups` maps component name to its WorkerGroup (anything with `actors` and `workers`); components
    not launched are simply not called. `roles` renames components (`{"eval": "rollout"}`).
    """

    def __init__(self, groups: Mapping[str, Group], enabled: bool, roles: Mapping[str, str] | None = None):
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
        self._current: str | None = None

    @classmethod
    def for_job(cls, job: Any, roles: Mapping[str, str] | None = None) -> Phases:
        """Phases over a `rlplace.connect()` job: its groups (also those launched later), offload as planned."""
        return cls(job.groups, job.plan.settings.enable_offload, roles)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Run the body of phase `name` between its pre- and post-hooks."""
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
            yield
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
