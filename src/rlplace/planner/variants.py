"""The same workers under another strategy: what `rlplace plan --compare` and the rack hint (`rack_hint`) plan.

A variant keeps the worker count each component got in the plan and drops every placement, so auto mode places
them afresh with the strategy asked for.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from rlplace.model import EnvStrategy, JobSpec, Strategy
from rlplace.plan import Plan


def with_strategy(spec: JobSpec, planned: Plan, strategy: Strategy, env_strategy: EnvStrategy | None) -> JobSpec:
    """`spec` in auto mode under `strategy` / `env_strategy`, each component with the workers it has in `planned`."""
    counts = Counter(w.component for w in planned.workers)
    settings = dataclasses.replace(
        spec.settings,
        mode="auto",
        strategy=strategy,
        env_strategy=env_strategy,
        is_colocated=None,
    )
    components = tuple(dataclasses.replace(c, placement=None, num_workers=counts[c.name]) for c in spec.components)
    return dataclasses.replace(spec, settings=settings, node_groups=(), components=components)


def eval_env_share(planned: Plan) -> bool:
    """Eval and env workers on the same GPUs: auto mode places them so under env_strategy device-colocate."""
    evals = {(w.node_rank, w.gpus) for w in planned.workers if w.component == "eval" and w.gpus}
    return any((w.node_rank, w.gpus) in evals for w in planned.workers if w.component == "env")
