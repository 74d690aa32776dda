"""`tune`: the fastest feasible placement of a job's timed components under the time model (planner/timing.py).

The search (docs/guide.md, "Choosing a placement"):
1. Every structure, count assignment and arrangement of the space (planner/tune_space.py) gets a lower bound:
   its compute seconds, which `predict` reaches exactly, plus nothing for transfers; memory that does not fit
   rules it out.
2. Branch and bound: in order of their lower bounds, placements are written in the config's dialect
   (planner/tune_write.py), loaded, planned and predicted (`predict` on the plan: compute + weight sync +
   per-step transfers, and the framework's own refusals); the search stops when the next lower bound is no better
   than the best prediction. So the answer is the best prediction of the whole space, every placement of which
   was either predicted or bounded above it.
3. The table adds the best placement of each mode (collocated, disaggregated, hybrid) and the placement as
   written, each predicted the same way.
Pure: no Ray, no clock but the progress callback's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rlplace.config.loader import load
from rlplace.errors import ConfigError, PlanError, Problem, RlplaceError
from rlplace.inventory import Inventory
from rlplace.model import JobSpec
from rlplace.plan import Plan
from rlplace.planner import capacity
from rlplace.planner.core import plan as make_plan
from rlplace.planner.estimate import DEFAULT_MODEL_BYTES, EVAL_ROLES, TRAIN_ROLES, weight_pulls
from rlplace.planner.node_groups import group_resources, within_num_nodes
from rlplace.planner.phase_order import mode
from rlplace.planner.timing import Prediction, nics, nvlink_gb_s, predict, transfer_seconds
from rlplace.planner.tune_space import COARSE_POSITIONS, EXHAUSTIVE_GPUS, Grid, Line, Shape, Space, SyncBound
from rlplace.planner.tune_write import document_with, offload_rule, section_of, structure_allowed, tuned_group
from rlplace.planner.workload import Workload

#: Predictions closer than this are ties (the first found, in lower-bound order, is kept).
EPSILON = 1e-9
#: Above EXHAUSTIVE_GPUS, the placements of least lower bound on the coarse grid whose counts are refined.
REFINED = 8


@dataclass(frozen=True)
class Candidate:
    """A placement, predicted: `seconds` None when infeasible (`problem` says why)."""

    seconds: float | None
    mode: str
    gpus: dict[str, int]  # stage -> GPU count
    ranges: dict[str, tuple[int, int]] | None = None  # stage -> [first, last + 1) on the line; None: as written
    prediction: Prediction | None = None
    plan: Plan | None = field(default=None, compare=False)
    document: dict | None = field(default=None, compare=False)
    problem: str = ""
    label: str = ""  # "as written" for the config's own placement

    @property
    def section(self) -> dict | None:
        return None if self.document is None else section_of(self.document)


@dataclass(frozen=True)
class TuneResult:
    best: Candidate | None
    candidates: tuple[Candidate, ...]  # ranked: feasible by seconds, then infeasible
    written: Candidate
    line_gpus: int
    scored: int  # placements given a lower bound
    planned: int  # placements written, planned and predicted
    elapsed: float


def tune(
    spec: JobSpec,
    document: object,
    workload: Workload,
    inventory: Inventory,
    written: Plan,
    progress: Callable[[str], None] | None = None,
) -> TuneResult:
    """The fastest feasible placement of `spec`'s timed components on `inventory` (see the module's doc)."""
    start = time.perf_counter()
    search = _Search(spec, document, workload, inventory, written, progress)
    best = search.run()
    as_written = _as_written(written, workload, inventory)
    ranked = sorted(search.evaluated.values(), key=lambda c: (c.seconds is None, c.seconds or 0.0))
    return TuneResult(
        best, tuple(ranked), as_written, len(search.line), search.scored, search.planned, time.perf_counter() - start
    )


def _as_written(written: Plan, workload: Workload, inventory: Inventory) -> Candidate:
    p = predict(written, workload, inventory)
    gpus = {s.name: s.gpus for s in p.stages}
    return Candidate(p.seconds, p.mode, gpus, None, p, written, None, "; ".join(p.problems), "as written")


def tune_line(
    spec: JobSpec, workload: Workload, inventory: Inventory, written: Plan
) -> tuple[Line, list[tuple[int, int]]]:
    """The GPUs tune distributes, and (node, GPUs tuned on it) in order: the group the timed components are
    placed through (node groups; `cluster`: every GPU), or every GPU node (pools)."""
    check_tunable(spec)
    if spec.dialect == "node_groups":
        label = tuned_group(spec, workload)
        if not label:
            raise ConfigError(
                _problem(
                    spec,
                    "the timed components are placed through different node groups; tune distributes "
                    "the GPUs of one group: place them all through one (cluster: every GPU)",
                )
            )
        nodes = within_num_nodes(spec, inventory, [])
        res = group_resources(label, {g.label: g for g in spec.node_groups}, nodes, spec)
        if res.kind != "gpu":
            raise ConfigError(_problem(spec, f"node group {label} has no GPUs to tune"))
        gpus = [(n, g[0]) for n, g in zip(res.node, res.gpus, strict=True)]
    else:
        gpus = [(n.rank, g) for n in inventory.nodes for g in range(n.num_gpus)]
    if not gpus:
        raise PlanError("the inventory has no GPUs to place the timed components on")
    topology = written.topology
    domains = "nvlink_domain" in topology.levels
    models, node_end, domain_end = [], [0] * len(gpus), [0] * len(gpus)
    for i in range(len(gpus) - 1, -1, -1):
        node = gpus[i][0]
        nxt = gpus[i + 1][0] if i + 1 < len(gpus) else None
        node_end[i] = node_end[i + 1] if nxt == node else i + 1
        same = nxt is not None and (
            nxt == node or (domains and topology.unit("nvlink_domain", nxt) == topology.unit("nvlink_domain", node))
        )
        domain_end[i] = domain_end[i + 1] if same else i + 1
    models = [workload.gpu(inventory.node(n).gpu_model) for n, _ in gpus]
    per_node: dict[int, int] = {}
    for n, _ in gpus:
        per_node[n] = per_node.get(n, 0) + 1
    line = Line(tuple(gpus), tuple(models), tuple(node_end), tuple(domain_end))
    return line, list(per_node.items())


def check_tunable(spec: JobSpec) -> None:
    """tune writes its answer in RLinf's or RLightning's dialect; any other config is a ConfigError saying so."""
    if spec.dialect not in ("node_groups", "pools"):
        raise ConfigError(
            Problem(
                "",
                f"rlplace tune writes placements in RLinf's component_placement or RLightning's resource_pool; a "
                f"{spec.dialect} config is not tuned (plan it with rlplace plan --time to see its prediction)",
                file=spec.source,
            )
        )


def _problem(spec: JobSpec, message: str) -> Problem:
    return Problem("cluster.component_placement", message, file=spec.source)


class _Search:
    def __init__(self, spec, document, workload: Workload, inventory: Inventory, written: Plan, progress):
        self.spec, self.document, self.workload, self.inventory = spec, document, workload, inventory
        self.line, self.line_nodes = tune_line(spec, workload, inventory, written)
        self.topology = written.topology
        self.progress = progress
        self.offload = offload_rule(spec)
        self.allowed = structure_allowed(spec, document)
        self.evaluated: dict[tuple, Candidate] = {}
        self.realized: dict[tuple, Candidate] = {}
        self.scored = 0
        self.planned = 0
        self._said = time.perf_counter()

    def run(self) -> Candidate | None:
        self.space = Space(self.workload, self.line, self.allowed, self._sync_bound())
        n = len(self.line)
        sizes = set(self.line.node_sizes)
        node = next(iter(sizes)) if len(sizes) == 1 else 1
        items: list[tuple[float, int, Shape, dict | None]] = []
        if n <= EXHAUSTIVE_GPUS:
            self._score(Grid(node=n), items)
        else:
            coarse = node * math.ceil(n / node / COARSE_POSITIONS)
            self._score(Grid(node, node, coarse, best_last=True), items)
            items.sort(key=lambda q: (q[0], q[1]))
            fine = Grid(node, node, node, best_last=True)
            seen: set[Shape] = set()
            for _, _, shape, _ in [*items[:REFINED], *self._best_of_modes(items)]:
                if shape not in seen:
                    seen.add(shape)
                    windows = tuple((max(1, c - coarse), c + coarse) for c in shape.counts)
                    self._score(fine, items, [shape.roots], windows)
        items.sort(key=lambda q: (q[0], q[1]))
        best: Candidate | None = None
        bound = math.inf  # the best's seconds
        for lb, _, shape, ranges in items:
            if lb >= bound - EPSILON:
                break
            found = self._exact(shape, ranges, lb, bound)
            if found is not None and found.seconds is not None and found.seconds < bound - EPSILON:
                best, bound = found, found.seconds
        for lb, _, shape, ranges in self._best_of_modes(items):  # the table's best of each mode
            self._exact(shape, ranges, lb, math.inf)
        return best

    def _sync_bound(self) -> SyncBound | None:
        """The weight sync's lower bound, where both its ends are timed stages (planner/tune_space.py)."""
        names = [s.name for s in self.workload.stages]
        train = next((n for n in TRAIN_ROLES if n in names), None)
        receiver = next((n for n in EVAL_ROLES if n in names), None)
        if train is None or receiver is None:
            return None
        nodes = {n for n, _ in self.line.gpus}
        domains = "nvlink_domain" in self.topology.levels
        fastest = max(
            max(
                nics(n, self.workload, self.inventory) * self.workload.links.infiniband_gb_s,
                nvlink_gb_s(n, self.workload, self.inventory) if domains else 0.0,
            )
            for n in nodes
        )
        model = self.workload.model_bytes or DEFAULT_MODEL_BYTES
        spread = bool(self.topology.levels)
        return SyncBound(train, receiver, model, max(self.line.node_sizes), fastest, spread)

    def _score(self, grid: Grid, items: list, structures=None, windows=None) -> None:
        """Add a lower bound for every placement of `structures` (default: all) on `grid` to `items`."""
        space = self.space
        for structure in structures or space.structures:
            offload = self.offload(structure)
            score = space.scorer(structure, offload) if self.line.uniform else None
            if self.line.uniform and score is None:
                continue  # its memory does not fit
            for shape in space.shapes(structure, grid, windows):
                self.scored += 1
                if self.scored % 4096 == 0:
                    self._tell()
                if score is not None:
                    items.append((score(shape.counts), len(items), shape, None))
                    continue
                for ranges in space.arrangements(shape):
                    lb = space.lower_bound(shape, offload, {m: lo for m, (lo, _) in ranges.items()})
                    if lb is not None:
                        items.append((lb, len(items), shape, ranges))

    def _best_of_modes(self, items: list) -> list:
        """The placement of least lower bound of each mode (collocated, disaggregated, hybrid)."""
        best: dict[str, tuple] = {}
        for item in items:
            m = mode(item[2].roots)
            if m not in best or item[0] < best[m][0]:
                best[m] = item
        return list(best.values())

    def _exact(self, shape: Shape, ranges: dict | None, lb: float, bound: float) -> Candidate | None:
        """The best prediction of `shape` over its arrangements (or the one given) that may beat `bound`: each
        arrangement's weight sync is counted first, on node lists (estimate.weight_pulls), and only one that can
        still beat `bound` is written and planned. None: none could."""
        key = (shape, None if ranges is None else tuple(sorted(ranges.items())))
        if key in self.evaluated:
            return self.evaluated[key]
        options = [ranges] if ranges is not None else list(self.space.arrangements(shape))
        compute = lb - (self._sync_lower(shape) if ranges is None else 0.0)
        scored = sorted(((compute + self._sync(r) if ranges is None else lb), i, r) for i, r in enumerate(options))
        found: Candidate | None = None
        for at_least, _, r in scored:
            limit = bound if found is None or found.seconds is None else min(bound, found.seconds)
            if at_least >= limit - EPSILON:
                break
            why = self.space.unbroken(r)
            c = self._realize(r, shape) if why is None else self._refused(r, shape, why)
            if found is None or (
                c.seconds is not None and (found.seconds is None or c.seconds < found.seconds - EPSILON)
            ):
                found = c
        if found is not None:
            self.evaluated[key] = found
        return found

    def _sync_lower(self, shape: Shape) -> float:
        sync = self.space.sync
        return 0.0 if sync is None else sync.seconds(shape.roots, shape.gpus())

    def _sync(self, ranges: dict[str, tuple[int, int]]) -> float:
        """The weight sync of an arrangement, as `predict` counts it (the estimate's pulls over the links)."""
        sync = self.space.sync
        if sync is None:
            return 0.0
        gpus = self.line.gpus
        (t0, t1), (r0, r1) = ranges[sync.train], ranges[sync.receiver]
        train = [n for n, _ in gpus[t0:t1]]
        flows = weight_pulls(train, gpus[t0][0], [n for n, _ in gpus[r0:r1]], sync.model_bytes, self.topology)
        return transfer_seconds(flows, self.topology, self.workload, self.inventory)

    def _refused(self, ranges: dict, shape: Shape, why: str) -> Candidate:
        return Candidate(None, mode(shape.roots), shape.gpus(), ranges, problem=why)

    def _realize(self, ranges: dict[str, tuple[int, int]], shape: Shape) -> Candidate:
        key = tuple(sorted(ranges.items()))
        if key in self.realized:
            return self.realized[key]
        doc = document_with(self.spec, self.document, ranges, self.line_nodes, self.workload)
        self.planned += 1
        self._tell()
        try:
            spec = load(doc, filename=self.spec.source)
            p = capacity.checked(make_plan(spec, self.inventory), self.inventory)
        except (ConfigError, PlanError) as e:
            text = str(e).splitlines()
            c = Candidate(None, mode(shape.roots), shape.gpus(), ranges, document=doc, problem=text[-1].strip())
        except RlplaceError as e:
            c = Candidate(None, mode(shape.roots), shape.gpus(), ranges, document=doc, problem=str(e))
        else:
            pred = predict(p, self.workload, self.inventory)
            c = Candidate(
                pred.seconds,
                pred.mode,
                {s.name: s.gpus for s in pred.stages},
                ranges,
                pred,
                p,
                doc,
                "; ".join(pred.problems),
            )
        self.realized[key] = c
        return c

    def _tell(self) -> None:
        if self.progress is None:
            return
        now = time.perf_counter()
        if now - self._said >= 1.0:  # at most once a second
            self._said = now
            self.progress(f"tune: {self.scored:,} placements bounded, {self.planned:,} planned")
