"""Incremental planning: grow or shrink an elastic component of a running job's plan, never moving a worker.

Pure, like the rest of the planner: (plan, live inventory) -> `Resize`, the plan after the step and everything
the Ray layer needs to realise it (docs/planner.md, "Incremental planning"):

- growth places each new worker where `planner.growth` says the strategy would, first in a free seat of a bundle
  the job already holds (a worker that left keeps its seat: Ray cannot shrink a placement group), else in a new
  bundle on what the live nodes hold beyond the plan (`capacity.free_capacity`); followers come along (an env
  sharing eval's GPU under device-colocate, a buffer shard on a node train newly holds);
- shrinking removes the highest ranks, or named ranks (a lost node's), with their followers; the survivors are
  renumbered 0..n-1 in rank order and keep their actor names (`Worker.actor_name`);
- a bundle leaves the plan only with every other bundle of its placement group (same node, same `reservation`),
  when none of them holds a worker; until then its seats stay free for regrowth.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from itertools import chain

from rlplace.errors import PlanError
from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.plan import Plan, SizeRange
from rlplace.planner.capacity import free_capacity
from rlplace.planner.followers import leader_of
from rlplace.planner.ranges import format_ranks
from rlplace.planner.step import Resize, SizeChange, Step
from rlplace.planner.topology import read_topology

__all__ = ["Resize", "SizeChange", "grow", "grow_back", "resize", "shrink", "shrink_lost_node"]


# -- the API --------------------------------------------------------------------------------------------------


def resize(
    spec: JobSpec | None, plan: Plan, live: Inventory, component: str, n: int, *, down: Collection[int] = ()
) -> Resize:
    """Grow or shrink `component` to `n` workers (highest ranks go first); an unchanged size changes nothing. The one
    place that decides which (`job.resize` asks it). Growing reads the config the plan was made from (`spec`: GPUs per
    worker, groups), which a plan alone does not keep: None is a PlanError when it is needed."""
    size = len(plan.by_component(component))
    if n > size:
        if spec is None:
            raise PlanError(
                f"growing {component} needs the config the plan was made from (GPUs per worker, groups): "
                "connect with the config or its JobSpec rather than a finished Plan"
            )
        return grow(spec, plan, live, component, n - size, down=down)
    if n < size:
        return shrink(plan, component, to=n)
    _range(plan, component)
    return Resize(plan, ())


def grow(
    spec: JobSpec,
    plan: Plan,
    live: Inventory,
    component: str,
    k: int,
    *,
    down: Collection[int] = (),
    partial: bool = False,
) -> Resize:
    """Add `k` workers to `component` on the free capacity of `live` (nodes in `down` left out).

    PlanError when the range's `max` is exceeded or, unless `partial` (then as many as fit are added), when the
    workers do not all fit: the message names what is missing on which node.
    """
    r = _range(plan, component)
    size = len(plan.by_component(component))
    if k < 0 or size + k > r.max:
        raise PlanError(
            f"{component}: {size + k} worker(s) asked for, but its elastic range is {r.min}-{r.max} "
            f"(cluster.elastic.{component}); it has {size}"
        )
    step = Step(plan, free_capacity(plan, live, down))
    step.grow(spec, live, component, k, partial)
    return _on(step.finish(), spec, live)


def shrink(plan: Plan, component: str, *, to: int | None = None, ranks: Iterable[int] | None = None) -> Resize:
    """Remove workers of `component`: the highest ranks down to `to` workers, or the named `ranks` (old ranks).

    PlanError below the range's `min`, or for ranks the component does not have.
    """
    workers = plan.by_component(component)
    r = _range(plan, component)
    if to is not None and to < 0:
        raise PlanError(f"{component}: {to} worker(s) asked for, but its elastic range is {r.min}-{r.max}")
    if (to is None) == (ranks is None):
        raise ValueError("shrink: give exactly one of `to` (a size) or `ranks` (the ranks to remove)")
    gone = set(range(to, len(workers))) if to is not None else set(ranks or ())
    unknown = sorted(gone - {w.rank for w in workers})
    if unknown:
        raise PlanError(f"{component}: no rank(s) {format_ranks(unknown)} to remove; it has ranks 0-{len(workers) - 1}")
    step = Step(plan)
    step.shrink({component: gone})
    return step.finish()


def shrink_lost_node(plan: Plan, node_rank: int, *, placed_by_ray: Mapping[str, Iterable[int]] | None = None) -> Resize:
    """Take every worker of node `node_rank` out of the plan, in one step, when each component there is elastic
    (or follows one that is) and keeps at least its `min`; else PlanError naming those that cannot shrink.

    `placed_by_ray` adds ranks of workers without a node in the plan (strategy default) that Ray ran there.
    """
    gone: dict[str, set[int]] = defaultdict(set)
    for w in plan.workers:
        if w.node_rank == node_rank:
            gone[w.component].add(w.rank)
    for c, ranks in (placed_by_ray or {}).items():
        gone[c].update(ranks)
    fixed = [c for c in gone if c not in plan.elastic and leader_of(plan, c) not in plan.elastic]
    if fixed:
        what = "; ".join(f"{c} {format_ranks(sorted(gone[c]))}" for c in fixed)
        raise PlanError(
            f"node {node_rank} holds workers of components that are not elastic ({what}): they cannot shrink"
        )
    step = Step(plan)
    step.shrink({c: ranks for c, ranks in gone.items() if c in plan.elastic})
    left = [w for w in chain.from_iterable(step.workers.values()) if w.node_rank == node_rank]
    if left:  # a follower on the node whose leader's workers there do not take it along
        what = ", ".join(f"{w.component} {w.rank}" for w in left)
        raise PlanError(f"node {node_rank}: {what} would stay on the lost node; they follow no worker removed there")
    return step.finish()


def grow_back(spec: JobSpec, plan: Plan, live: Inventory, *, down: Collection[int] = ()) -> Resize:
    """Grow every elastic component below its starting size back toward it, as far as `live` holds, in one step
    (after a lost node's shrink, when capacity returns)."""
    step = Step(plan, free_capacity(plan, live, down))
    for c, r in plan.elastic.items():
        size = len(plan.by_component(c))
        if size < r.start:
            step.grow(spec, live, c, r.start - size, partial=True)
    return _on(step.finish(), spec, live)


def _on(step: Resize, spec: JobSpec, live: Inventory) -> Resize:
    """The step with the plan's topology read from `live` (new nodes joined it), when it grew onto nodes at all."""
    if not step.reserve and not any(c.added for c in step.changes):
        return step
    topology = read_topology(spec.topology, live)
    return dataclasses.replace(step, plan=dataclasses.replace(step.plan, topology=topology))


def _range(plan: Plan, component: str) -> SizeRange:
    r = plan.elastic.get(component)
    if r is None:
        elastic = ", ".join(plan.elastic) or "none"
        lead = leader_of(plan, component)
        why = f"; it follows {lead}, resize that" if lead else "; list it under cluster.elastic to resize it"
        raise PlanError(f"{component} is not elastic (elastic components: {elastic}){why}")
    return r
