"""Which components change size with another instead of on their own (docs/planner.md, "Incremental planning").

- `env` follows `eval` under `env_strategy: device-colocate` when env worker i shares eval worker i's bundle for
  every i (as many env as eval workers, of the same GPUs each);
- `buffer` follows `train` under pool strategies (disaggregate, colocate, manual pools): one shard on each node
  holding train workers.
"""

from __future__ import annotations

from rlplace.plan import Plan

POOL_STRATEGIES = ("disaggregate", "colocate", "manual")


def followers(plan: Plan, leader: str) -> tuple[str, ...]:
    """The components that change size with `leader` in `plan` (see the module docstring)."""
    s = plan.settings
    out = []
    if leader == "eval" and s.env_strategy == "device-colocate" and s.strategy in ("disaggregate", "colocate"):
        ev, en = plan.by_component("eval"), plan.by_component("env")
        if (
            ev
            and len(ev) == len(en)
            and all(a.bundle is not None and a.bundle == b.bundle for a, b in zip(ev, en, strict=True))
        ):
            out.append("env")
    if leader == "train" and s.dialect == "pools" and s.strategy in POOL_STRATEGIES:
        pinned = [w.node_rank is not None for w in (*plan.by_component("buffer"), *plan.by_component("train"))]
        if plan.by_component("buffer") and all(pinned):
            out.append("buffer")
    return tuple(out)


def leader_of(plan: Plan, component: str) -> str | None:
    """The component `component` follows in `plan`, if any."""
    return next((lead for lead in ("eval", "train") if component in followers(plan, lead)), None)
