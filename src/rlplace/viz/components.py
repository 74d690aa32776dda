"""Per-component facts of a plan: how many workers, what each gets (GPUs, CPUs), where they run.

The table prints one line per component above the node table and the JSON has them under `components`; it is
the place for further per-component facts. Read from the table's node runs (their first nodes stand for the
alike others) and the workers without a node, so a 100,000-worker plan costs a few thousand look-ups, not a
pass per fact over every worker.

A verl plan's lines also name each role's resource pools (`actor_rollout: 16 workers, ..., in global_pool`):
verl's users think in its pools, a role may span several (`rollout` in `rollout_pool_0..rollout_pool_3`) and
several roles share one, and the node table alone does not say which pool a GPU's workers are in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

from rlplace.model import ProcessShape
from rlplace.plan import Plan, SizeRange, Worker
from rlplace.planner.ranges import format_ranks
from rlplace.viz.collapse import NodeRun
from rlplace.viz.text import counted, cpus, fraction_label

#: What decides a worker's facts (its node aside: pinned workers come from the runs, the others from `unplaced`).
_SHAPE = attrgetter("component", "gpus", "gpu_fraction", "visible_gpus", "sees_node_gpus", "in_driver", "num_cpus")


@dataclass(frozen=True)
class ComponentFacts:
    """What every worker of one component gets, as the plan says it."""

    name: str
    workers: int
    gpus: str  # "1 GPU each", "1/3 GPU each", "4 shared GPUs each, stride 2", "no GPU", ...
    cpus: str  # CPUs each worker reserves ("1", or "0.5-1" when they differ)
    where: str  # "pinned" | "left to Ray" | "in the driver" | "mixed"
    origin: str = ""  # where a process shape came from (RLinf's tensor-parallel sizes)
    elastic: SizeRange | None = None  # the sizes it may take while the job runs (`cluster.elastic`)
    #: verl plans: the pools its workers are in, in order, with their ranks there.
    pools: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def to_dict(self) -> dict:
        out: dict = {"workers": self.workers, "gpus": self.gpus, "cpus": self.cpus, "where": self.where}
        if self.elastic is not None:
            out["elastic"] = {"min": self.elastic.min, "max": self.elastic.max, "start": self.elastic.start}
        return out

    def line(self) -> str:
        workers = f"{self.name}: {counted(self.workers, 'worker')}"
        if self.where == "in the driver":
            return f"{workers}, in the driver process (remote: false), nothing reserved{self._elastic()}"
        origin = f" (from {self.origin})" if self.origin else ""
        where = "" if self.where == "pinned" else f", {self.where}"
        return f"{workers}, {self.gpus}{origin}, {self.cpus} CPU each{where}{self._pools()}{self._elastic()}"

    def _pools(self) -> str:
        """`, in global_pool`; `, in rollout_pool_0..rollout_pool_3 (2 each, ranks in pool order)`."""
        if not self.pools:
            return ""
        if len(self.pools) == 1:
            return f", in {self.pools[0][0]}"
        sizes = {len(ranks) for _, ranks in self.pools}
        in_order = [r for _, ranks in self.pools for r in ranks] == sorted(r for _, ranks in self.pools for r in ranks)
        if len(sizes) == 1 and in_order:
            return f", in {self.pools[0][0]}..{self.pools[-1][0]} ({sizes.pop()} each, ranks in pool order)"
        return ", in " + "; ".join(f"{name} (ranks {format_ranks(ranks)})" for name, ranks in self.pools)

    def _elastic(self) -> str:
        r = self.elastic
        return "" if r is None else f"; elastic: may change from {r.min} to {r.max} workers (start {r.start})"


def unplaced(plan: Plan) -> tuple[list[Worker], list[Worker]]:
    """The workers left to Ray's scheduler, and those run in the driver process."""
    nodeless = [w for w in plan.workers if w.node_rank is None]
    return [w for w in nodeless if not w.in_driver], [w for w in nodeless if w.in_driver]


def component_facts(
    plan: Plan, runs: tuple[NodeRun, ...], nodeless: tuple[list[Worker], list[Worker]] | None = None
) -> list[ComponentFacts]:
    """One entry per component, in plan order: count, GPUs and CPUs per worker, where it runs. `nodeless`: the
    plan's `unplaced()` workers, when the caller has them already."""
    free, driver = nodeless if nodeless is not None else unplaced(plan)
    counts: Counter[str] = Counter(dict.fromkeys(map(attrgetter("component"), plan.workers), 0))  # plan order
    shapes: dict[str, dict[tuple, str]] = {c: {} for c in counts}  # distinct shape -> where it runs
    for run in runs:
        for w in run.sample:
            counts[w.component] += len(run.ranks)
            shapes[w.component][_SHAPE(w)] = "pinned"
    for where, ws in (("left to Ray", free), ("in the driver", driver)):  # no GPUs, see none: fraction and CPUs
        for c, group in groupby(ws, key=attrgetter("component")):  # a component's workers are consecutive
            members = list(group)
            counts[c] += len(members)
            for fraction in set(map(attrgetter("gpu_fraction"), members)):
                for cpus_each in set(map(attrgetter("num_cpus"), members)):
                    shapes[c][(c, (), fraction, None, False, where == "in the driver", cpus_each)] = where
    pools: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    if plan.settings.dialect == "verl":
        for g in plan.groups:
            for c, ranks in g.components.items():
                pools.setdefault(c, []).append((g.name, ranks))
    out = []
    for name in counts:
        shape = plan.process_shapes.get(name)
        origin = shape.origin if shape is not None and shape.devices_per_process > 1 else ""
        kinds = {_gpu_kind(s, w) for s, w in shapes[name].items()}
        wheres = set(shapes[name].values())
        where = wheres.pop() if len(wheres) == 1 else "mixed"
        out.append(
            ComponentFacts(
                name,
                counts[name],
                _gpus_each(kinds, shape),
                _range({s[6] for s in shapes[name]}),
                where,
                origin,
                plan.elastic.get(name),
                tuple(pools.get(name, ())),
            )
        )
    return out


def _gpus_each(kinds: set[str], shape: ProcessShape | None) -> str:
    if len(kinds) > 1:
        return "GPUs mixed"
    (kind,) = kinds
    if shape is not None and shape.stride > 1 and kind.endswith("GPUs each"):
        kind += f", stride {shape.stride}"
    return kind


def _gpu_kind(shape: tuple, where: str) -> str:
    _, gpus, fraction, visible, sees, _, _ = shape
    if gpus and visible is not None:
        return f"{len(gpus)} shared GPUs each"
    if gpus:
        share = fraction_label(fraction)
        return f"{share} GPU each" if share else f"{counted(len(gpus), 'GPU')} each"
    if sees:
        return "no GPU (sees its node's GPUs)"
    if where == "left to Ray" and fraction:
        return f"{fraction:g} GPU requested each"
    return "no GPU"


def _range(values: set[float]) -> str:
    return cpus(min(values)) if len(values) == 1 else f"{cpus(min(values))}-{cpus(max(values))}"
