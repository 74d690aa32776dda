"""Plans built by hand for the Ray-layer tests (the planner has its own tests; these pin exact layouts).

`pinned_plan` takes one row per worker and derives the bundles as the planner does: workers naming the
same (node, GPUs) share one bundle, each taking 1/k of it; GPU-less workers get a CPU bundle each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlplace.plan import Bundle, EffectiveSettings, Plan, Worker

SETTINGS = EffectiveSettings(
    mode="manual",
    strategy="manual",
    env_strategy="default",
    is_colocated=False,
    enable_offload=False,
    buffer_worker_num=0,
)


@dataclass(frozen=True)
class Row:
    component: str
    node_rank: int | None
    gpus: tuple[int, ...] = ()
    env_vars: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    hardware: dict[str, object] | None = None
    resources: dict[str, float] = field(default_factory=dict)
    num_cpus: float = 0.5
    group: str | None = None


def pinned_plan(rows: list[Row], *, settings: EffectiveSettings = SETTINGS) -> Plan:
    """A plan placing each row's worker exactly where the row says."""
    bundles: list[Bundle] = []
    slot: dict[tuple[int, tuple[int, ...]], int] = {}
    for i, r in enumerate(rows):
        if r.node_rank is None:
            continue
        key = (r.node_rank, r.gpus) if r.gpus else (r.node_rank, (-1 - i,))
        if key not in slot:
            slot[key] = len(bundles)
            bundles.append(Bundle(len(bundles), r.node_rank, r.gpus, 0.0, {}, r.group))
        b = bundles[slot[key]]
        bundles[slot[key]] = b._replace(num_cpus=b.num_cpus + r.num_cpus, resources={**b.resources, **r.resources})
    sharing = {k: sum(1 for r in rows if r.gpus and (r.node_rank, r.gpus) == k) for k in slot}
    workers, counts, local = [], {}, {}
    for i, r in enumerate(rows):
        rank = counts.get(r.component, 0)
        counts[r.component] = rank + 1
        key = (r.node_rank, r.gpus) if r.gpus else (r.node_rank, (-1 - i,))
        local_rank = local.get((r.component, r.node_rank), 0)
        local[(r.component, r.node_rank)] = local_rank + 1
        pinned = r.node_rank is not None
        workers.append(
            Worker(
                component=r.component,
                rank=rank,
                world_size=0,
                node_rank=r.node_rank,
                gpus=r.gpus,
                gpu_fraction=(1.0 / sharing[key]) if r.gpus and pinned else float(len(r.gpus)),
                num_cpus=r.num_cpus,
                group=r.group,
                bundle=slot[key] if pinned else None,
                local_rank=local_rank,
                env_vars=dict(r.env_vars),
                python=r.python,
                hardware=r.hardware,
            )
        )
    sized = tuple(w._replace(world_size=counts[w.component]) for w in workers)
    return Plan(sized, tuple(bundles), settings)
