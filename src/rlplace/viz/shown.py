"""The plan as rlplace shows it: values that came from the environment written as in the config.

A config's `${oc.env:VAR}` values (an API key in `env_vars`, a path, a label) travel into the plan, whose table,
pictures and JSON would print them. `shown_plan` is the plan with each such value written as it is in the config
(`rlplace.config.from_env.hide`) wherever the plan carries text from the config: group names, workers'
`env_vars`, interpreters and hardware fields, warnings, notes and process shapes' origins. The plan a job runs
keeps the values; only what is printed changes, unless the user asks for them (`--show-env`).
"""

from __future__ import annotations

import dataclasses

from rlplace.config.from_env import hide, hide_in
from rlplace.model import EnvValue, ProcessShape
from rlplace.plan import Plan, Worker


def shown_plan(plan: Plan, values: tuple[EnvValue, ...]) -> Plan:
    """`plan` with the `values` read from the environment written as in the config (the plan itself if none)."""
    if not values:
        return plan

    def text(s: str | None) -> str | None:
        return None if s is None else hide(s, values)

    def worker(w: Worker) -> Worker:
        return w._replace(
            group=text(w.group),
            env_vars=hide_in(w.env_vars, values),
            python=text(w.python),
            hardware=hide_in(w.hardware, values),
        )

    return dataclasses.replace(
        plan,
        workers=tuple(worker(w) for w in plan.workers),
        bundles=tuple(b._replace(group=text(b.group)) for b in plan.bundles),
        groups=tuple(dataclasses.replace(g, name=hide(g.name, values)) for g in plan.groups),
        warnings=tuple(hide(w, values) for w in plan.warnings),
        notes=tuple(hide(n, values) for n in plan.notes),
        process_shapes={
            c: ProcessShape(p.devices_per_process, p.stride, hide(p.origin, values))
            for c, p in plan.process_shapes.items()
        },
    )


def from_environment(values: tuple[EnvValue, ...]) -> dict[str, str]:
    """The JSON's mark of the values read from the environment: key path -> as written."""
    return {v.path: v.written for v in values}
