"""The explorer: seeded fault schedules run against the real control plane on `SimCluster`, with the invariants
checked after every step (docs/ray.md, "The simulation"; `scripts/explore.py` is its command line).

A schedule is a config (one of the repository's examples, sometimes made elastic) and a list of moves: calls
(also across a node's loss), resizes, node losses, joins, hot spares, drains, slow nodes, calls that hang until
their node dies, time passing, and always a shutdown at the end. Moves carry every choice they need, so a
schedule replays exactly and can be shrunk: a failing schedule is cut down, one move at a time, to the
shortest one that still fails. The invariants are the promises of docs/guide.md: nothing waits past its bound,
every call returns, raises a documented error or is in `RanksRemovedError`'s accounting, ranks are 0..n-1 and
sizes inside their `elastic` range (in the state and in what each worker installed), no node holds more than it
has, the job record says what the state says, and after shutdown nothing of the job is left on the cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlplace.errors import RlplaceError
from rlplace.inventory import Inventory
from rlplace.lifecycle import EventKind, NodeHealth, NodeStatus, WorkerState
from rlplace.model import JobSpec
from rlplace.plan import Plan
from rlplace.ray import records, status
from rlplace.ray.job import Job
from rlplace.ray.labels import SPARE_LABEL
from rlplace.ray.local_raylets import node_args
from rlplace.ray.nodes import inventory_from_nodes
from rlplace.sim.memory_port import SimCluster, SimHang

#: The job's bounds in the simulation (virtual seconds): a call's own timeout, the replacement window.
CALL_TIMEOUT_S = 8.0
REPLACE_WITHIN_S = 3.0
JOB_TIMEOUT_S = 5.0
#: A move may take at most this long in virtual time: its own timeouts, the replacement window, the deaths.
MOVE_BOUND_S = CALL_TIMEOUT_S + REPLACE_WITHIN_S + 2 * JOB_TIMEOUT_S + 15.0
#: The cluster operations one move may make before it counts as spinning (a hang that time does not show).
MOVE_BUDGET = 5_000
#: Violations shrunk to their shortest schedule (shrinking reruns a schedule many times); the rest are counted.
SHRUNK = 3


class SimWorker:
    """The worker class of every component in the simulation: `step(x)` answers x, so a lost or doubled call shows."""

    def __init__(self, *_: Any, **__: Any):
        self.steps = 0

    def step(self, x: int) -> int:
        self.steps += 1
        return x

    def on_replaced(self, event: Any) -> None:
        return None

    def on_resized(self, event: Any) -> None:
        return None


@dataclass(frozen=True)
class Move:
    """One step of a schedule; `args` are every choice it needs (so it replays)."""

    kind: str
    args: tuple = ()

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True)
class Case:
    """A config planned on a simulated inventory, ready for schedules (planned once, run many times)."""

    name: str
    spec: JobSpec
    inventory: Inventory
    plan: Plan


@dataclass
class Outcome:
    """What one schedule did: the first violated invariant (None: none), after which move."""

    violation: str | None = None
    at: int = -1


@dataclass
class Report:
    schedules: int = 0
    violations: list[tuple[int, Case, list[Move], str]] = field(default_factory=list)


# -- the cases: the repository's examples on simulated inventories --------------------------------------

#: Inventories the examples are planned on (`--nodes` syntax): the first that plans wins.
INVENTORIES = ("2x4:A800", "4x2:A800", "3x4:A800", "3x8:A800", "4x8:A800", "1x8:A800,2x4:A800")


def cases(root: Path) -> list[Case]:
    """Every example config of the repository that plans on a simulated inventory with every worker pinned to a
    node by rlplace (the simulation has no Ray to place the others), and each also with every component elastic
    (down to one worker) where it plans so."""
    from rlplace.config import load
    from rlplace.inventory import parse_nodes
    from rlplace.planner import plan

    shipped = root / "src/rlplace/examples"  # examples/ links its configs there
    files = [*sorted(shipped.rglob("*.yaml")), *sorted((root / "tests/data/spec_examples").glob("*.yaml"))]
    found: list[Case] = []
    for path in files:
        written = path.read_text()
        for nodes in INVENTORIES:
            try:
                spec = load(written)
                inventory = parse_nodes(nodes, num_cpus=16)
                made = plan(spec, inventory)
            except (RlplaceError, ValueError):
                continue
            if made.workers and all(w.node_rank is not None and not w.in_driver for w in made.workers):
                name = f"{path.relative_to(root)} on {nodes}"
                found.append(Case(name, spec, inventory, made))
                for elastic in _elastic_variants(written, made.components):
                    try:
                        spec = load(elastic)
                        found.append(Case(f"{name}, elastic", spec, inventory, plan(spec, inventory)))
                        break
                    except (RlplaceError, ValueError):
                        continue  # components that follow another cannot change size on their own
            break  # the first inventory it plans on
    return found


def _elastic_variants(text: str, components: Sequence[str]) -> list[str]:
    """The config with every component elastic down to one worker, then with fewer (a buffer or an env that
    follows another component cannot change size on its own), where the config says nothing of elastic."""
    if "elastic" in text or "cluster:" not in text:
        return []
    out = []
    for drop in ((), ("buffer",), ("buffer", "env"), ("buffer", "env", "eval")):
        ranges = ", ".join(f"{c}: {{min: 1}}" for c in components if c not in drop)
        out.append(text.replace("cluster:", f"cluster:\n  elastic: {{{ranges}}}", 1))
    return out


# -- schedules ----------------------------------------------------------------------------------------------

#: The moves and how often a schedule draws each (weights).
MOVES = {
    "call": 3,
    "call_rank": 1,
    "call_across_loss": 2,
    "lose": 2,
    "join": 1,
    "grow": 1,
    "spare": 1,
    "drain": 1,
    "resize": 3,
    "slow": 1,
    "hang": 1,
    "wait": 2,
}


def schedule(rng: random.Random, case: Case, length: int) -> list[Move]:
    """A random schedule for `case`: `length` moves (each with its choices), then shutdown."""
    components = list(case.plan.components)
    ranks = sorted({w.node_rank for w in case.plan.workers if w.node_rank is not None})
    moves = [Move("launch", (c,)) for c in components]
    for _ in range(length):
        kind = rng.choices(list(MOVES), weights=list(MOVES.values()))[0]
        component = rng.choice(components)
        if kind in ("call", "call_rank"):
            moves.append(Move(kind, (component, rng.randrange(8), rng.randrange(1000))))
        elif kind == "call_across_loss":
            moves.append(Move(kind, (component, rng.choice(ranks), rng.randrange(1000))))
        elif kind in ("lose", "slow"):
            moves.append(Move(kind, (rng.choice(ranks),)))
        elif kind == "drain":
            moves.append(Move(kind, (rng.choice(ranks), rng.choice((1.0, 4.0, 10.0)))))
        elif kind in ("join", "spare", "grow"):
            moves.append(Move(kind, (rng.choice(ranks),)))
        elif kind == "resize":
            moves.append(Move(kind, (component, rng.randrange(1, 5))))
        elif kind == "hang":
            moves.append(Move(kind, (component,)))
        else:
            moves.append(Move("wait", (rng.choice((0.5, 2.0, 5.0)),)))
    return [*moves, Move("shutdown")]


def run(case: Case, moves: Sequence[Move]) -> Outcome:
    """Run one schedule on a fresh SimCluster; the first invariant it breaks, and after which move."""
    sim, job = simulated_job(case)
    world = _World(sim, job, case)
    try:
        job.start()
    except RlplaceError:
        return Outcome()
    except SimHang as e:
        return Outcome(f"never hang: job start: {e}", 0)
    for i, move in enumerate(moves):
        began = sim.now()
        sim.budget = MOVE_BUDGET
        try:
            world.do(move)
        except _Violation as e:
            return Outcome(str(e), i)
        except SimHang as e:
            return Outcome(f"never hang: {move}: {e}", i)
        except RlplaceError:
            pass  # a documented error: what the user's code handles
        except Exception as e:  # anything else is a broken promise: an undocumented error
            return Outcome(f"undocumented error from {move}: {type(e).__name__}: {e}", i)
        if sim.now() - began > MOVE_BOUND_S:
            return Outcome(f"never hang: {move} waited {sim.now() - began:.1f} s (bound {MOVE_BOUND_S:g} s)", i)
        problem = world.broken()
        if problem:
            return Outcome(problem, i)
    return Outcome()


def simulated_job(case: Case, **options: Any) -> tuple[SimCluster, Job]:
    """A SimCluster with the case's nodes (ranked as `rlplace start` ranks them) and the case's Job on it, not
    started yet; `options` override the job's bounds (timeout_s, replace_within_s)."""
    sim = SimCluster()
    for node in case.inventory.nodes:
        sim.add_node(node_resources(node), node_labels(node, node.rank))
    bounds = {"timeout_s": JOB_TIMEOUT_S, "replace_within_s": REPLACE_WITHIN_S, **options}
    job = Job(case.plan, inventory_from_nodes(sim.nodes()), name="sim", spec=case.spec, cluster=sim, **bounds)
    return sim, job


def case_of(text: str, nodes: str) -> Case:
    """A Case from a config's text and simulated nodes (`--nodes` syntax)."""
    from rlplace.config import load
    from rlplace.inventory import parse_nodes
    from rlplace.planner import plan

    spec = load(text)
    inventory = parse_nodes(nodes, num_cpus=16)
    return Case(nodes, spec, inventory, plan(spec, inventory))


def shrink(case: Case, moves: list[Move]) -> list[Move]:
    """The shortest schedule found that still breaks an invariant: moves dropped one at a time while it fails."""
    current = list(moves)
    changed = True
    while changed:
        changed = False
        for i in range(len(current) - 1):  # the final shutdown stays
            trial = current[:i] + current[i + 1 :]
            if run(case, trial).violation is not None:
                current, changed = trial, True
                break
    return current


def draw(all_cases: Sequence[Case], own_seed: int, length: int = 12) -> tuple[Case, list[Move]]:
    """The case and the schedule of one schedule seed (what `explore` runs, and `--replay` runs again)."""
    rng = random.Random(own_seed)
    case = all_cases[rng.randrange(len(all_cases))]
    return case, schedule(rng, case, rng.randrange(2, length + 1))


def explore(
    all_cases: Sequence[Case],
    count: int,
    seed: int,
    *,
    length: int = 12,
    indices: Sequence[int] | None = None,
    until_violation: bool = False,
) -> Report:
    """`count` seeded schedules over `all_cases` (schedule i of the run `seed`, for i in `indices`, default
    0..count-1); every violation with the schedule's own seed, its case and its shrunk schedule.
    `until_violation`: stop at the first (a mutation's check)."""
    report = Report()
    for i in indices if indices is not None else range(count):
        if until_violation and report.violations:
            break
        own = seed * 1_000_003 + i
        case, moves = draw(all_cases, own, length)
        outcome = run(case, moves)
        report.schedules += 1
        if outcome.violation is not None:
            shortest = shrink(case, moves) if len(report.violations) < SHRUNK else moves
            report.violations.append((own, case, shortest, outcome.violation))
    return report


# -- one schedule's world: the moves and the invariants --------------------------------------------------


class _Violation(Exception):
    pass


class _World:
    def __init__(self, sim: SimCluster, job: Job, case: Case):
        self.sim, self.job, self.case = sim, job, case
        #: Drains with a spare ready when they were noticed: (node rank, deadline on the wall clock, events then).
        self.drains: list[tuple[int, float, int]] = []

    # -- moves --

    def do(self, move: Move) -> None:
        if move.kind in ("lose", "call_across_loss", "drain", "resize"):
            self.drains = []  # another need for the spare, or a resize holding the job's changes: no promise
        getattr(self, f"_{move.kind}")(*move.args)

    def _launch(self, component: str) -> None:
        self.job.launch(component, SimWorker)

    def _group(self, component: str) -> Any:
        group = self.job.groups.get(component)
        if group is None:
            raise RlplaceError(f"{component} is not launched")
        return group

    def _call(self, component: str, _rank: int, x: int) -> None:
        group = self._group(component)
        self._check_results(group, lambda: group.call("step", x, timeout_s=CALL_TIMEOUT_S), x)

    def _call_rank(self, component: str, rank: int, x: int) -> None:
        group = self._group(component)
        if not len(group):
            return
        r = rank % len(group)
        got = group.call("step", x, rank=r, timeout_s=CALL_TIMEOUT_S)
        if got != x:
            raise _Violation(f"nothing silently lost: {component} rank {r} answered {got!r} to step({x})")

    def _call_across_loss(self, component: str, node_rank: int, x: int) -> None:
        group = self._group(component)
        refs = group.call_async("step", x)
        self._lose(node_rank)
        self._check_results(group, lambda: group.get(refs, "step", CALL_TIMEOUT_S), x)

    def _check_results(self, group: Any, calls: Callable[[], list], x: int) -> None:
        from rlplace.errors import RanksRemovedError

        size = len(group)
        try:
            got = calls()
        except RanksRemovedError as e:
            if any(v != x for v in e.results) or len(e.results) + len(e.removed) < 1:
                raise _Violation(f"nothing silently lost: RanksRemovedError results {e.results}") from e
            return
        if any(v != x for v in got) or len(got) != size:
            raise _Violation(f"nothing silently lost: {group.component} answered {got!r} to step({x}) on {size}")

    def _serving(self, node_rank: int) -> str | None:
        node = self.job.state.live.node(node_rank) if node_rank < len(self.job.state.live) else None
        return None if node is None else str(node.node_id)

    def _lose(self, node_rank: int) -> None:
        node_id = self._serving(node_rank)
        if node_id is not None:
            self.sim.kill_node(node_id)

    def _drain(self, node_rank: int, deadline_s: float) -> None:
        node_id = self._serving(node_rank)
        if node_id is None or not self.sim.nodes_by_id[node_id].running:
            return
        if self._spare_ready(node_id):  # the promise: its workers answer from the spare before the deadline
            self.drains.append((node_rank, self.sim.wall() + deadline_s, len(self.job.events)))
        self.sim.drain_node(node_id, deadline_s)

    def _spare_ready(self, node_id: str) -> bool:
        """Nothing else under way, and a running hot spare with what the draining node has."""
        serving = {str(n.node_id) for n in self.job.state.live.nodes}
        if self.job.state.troubles() or self.sim.draining_nodes():
            return False
        if any(not self.sim.nodes_by_id[i].running for i in serving if i in self.sim.nodes_by_id):
            return False  # a loss not declared yet will want the spare too
        need = self.sim.nodes_by_id[node_id].resources
        return any(
            n.running
            and SPARE_LABEL in n.labels
            and n.node_id not in serving
            and all(n.resources.get(k, 0.0) >= v for k, v in need.items())
            for n in self.sim.nodes_by_id.values()
        )

    def _slow(self, node_rank: int) -> None:
        node_id = self._serving(node_rank)
        if node_id is not None:
            self.sim.nodes_by_id[node_id].slow = 20.0

    def _join(self, like_rank: int) -> None:
        """A replacement: a node with the rank label of `like_rank` and its shape."""
        node = self.case.inventory.node(like_rank)
        self.sim.add_node(node_resources(node), node_labels(node, like_rank))

    def _grow(self, like_rank: int) -> None:
        """New capacity: a node shaped like `like_rank` with a rank no node had."""
        node = self.case.inventory.node(like_rank)
        self.sim.add_node(node_resources(node), node_labels(node, len(self.sim.nodes_by_id)))

    def _spare(self, like_rank: int) -> None:
        node = self.case.inventory.node(like_rank)
        self.sim.add_node(node_resources(node), node_labels(node, None))

    def _resize(self, component: str, n: int) -> None:
        if self.job.state.spec is not None and self.job.state.spec.elastic_range(component) is not None:
            self.job.resize(component, n)

    def _hang(self, component: str) -> None:
        """The next calls of `step` hang until their worker's node dies: the call's own timeout must end them."""
        self.sim.behaviour.hang_method = "step"
        try:
            self._call(component, 0, 1)
        finally:
            self.sim.behaviour.hang_method = None

    def _wait(self, seconds: float) -> None:
        self.sim.advance(seconds)

    def _shutdown(self) -> None:
        self.job.shutdown()

    # -- invariants --

    def broken(self) -> str | None:
        if self.job.state.closed:
            return self._left_over()
        return (
            self._ranks() or self._capacity() or self._record() or self._status() or self._groups() or self._drained()
        )

    def _ranks(self) -> str | None:
        state = self.job.state
        for name, group in self.job.groups.items():
            workers = state.workers(name)
            if [w.rank for w in workers] != list(range(len(workers))):
                return f"ranks 0..n-1: {name} has ranks {[w.rank for w in workers]}"
            if tuple(group.workers) != tuple(workers):
                held, named = len(group.workers), len(workers)
                return f"one owner per fact: {name}'s group holds actors for {held} of the state's {named} workers"
            limits = state.spec.elastic_range(name) if state.spec is not None else None
            if limits is not None and not (limits.min <= len(workers) <= (limits.max or len(workers))):
                return f"sizes inside elastic: {name} has {len(workers)} workers, range {limits.min}..{limits.max}"
            for i, actor in enumerate(group.actors):
                p = (actor.payload or {}).get("placement") if actor.died_at is None else None
                if p is not None and (p["rank"], p["world_size"]) != (i, len(workers)):
                    return (
                        f"ranks 0..n-1: {name} rank {i} of {len(workers)} believes it is rank {p['rank']} of "
                        f"{p['world_size']} (it was not told its new rank)"
                    )
        return None

    def _capacity(self) -> str | None:
        for node_id, free in self.sim.free_resources().items():
            over = {k: v for k, v in free.items() if v < -1e-6}
            if over:
                return f"no GPU given twice: node {node_id[:8]} is over its resources by {over}"
        return None

    def _record(self) -> str | None:
        state = self.job.state
        record = records.read(self.sim, state.namespace, state.name)
        if record is None:
            return "the record says what the state says: the job has no record"
        sizes = {c: len(state.workers(c)) for c in state.plan.components}
        written = {c: r.world_size for c, r in record.components.items()}
        if written != sizes:
            return f"the record says what the state says: record sizes {written}, state {sizes}"
        return None

    def _status(self) -> str | None:
        """`rlplace status` (read off the simulated cluster, no GPU probe: asking the workers takes time) shows
        the job's nodes the state holds lost or failed as LOST or FAILED (and no other node of the job so), and
        every worker of the state on a node that is up as ALIVE, under its rank now; and nothing else ALIVE."""
        state = self.job.state
        node_rows, worker_rows = status.collect_all(self.sim, probe_gpus=False)
        shown_as = {NodeHealth.LOST: NodeStatus.LOST, NodeHealth.FAILED: NodeStatus.FAILED}
        troubled = {f"node {rank}": shown_as[t.kind] for rank, t in state.troubles().items() if t.kind in shown_as}
        marked = {r.node: r.state for r in node_rows if r.state in shown_as.values() and r.job != "-"}
        if marked != troubled:
            return f"status says what the state says: nodes shown {marked or 'none'} lost or failed, state {troubled}"
        shown = {r.name: r for r in worker_rows if r.state == WorkerState.ALIVE}
        expected = {}
        for c, group in self.job.groups.items():
            if group.in_driver:
                continue
            for w in state.workers(c):
                node = state.node(w.node_rank)
                running = node is None or self.sim.nodes_by_id[str(node.node_id)].running
                expected[w.name] = (c, w.rank, running and state.health(w.node_rank) == NodeHealth.OK)
        for name, (c, rank, up) in expected.items():
            row = shown.get(name)
            if up and (row is None or (row.component, row.rank) != (c, rank)):
                seen = "not shown ALIVE" if row is None else f"shown as {row.component} rank {row.rank}"
                return f"status says what the state says: {name} ({c} rank {rank}) is {seen}"
        stray = sorted(set(shown) - set(expected))
        if stray:
            return f"status says what the state says: {', '.join(stray)} shown ALIVE, not workers of the state"
        return None

    def _groups(self) -> str | None:
        units = {(b.node_rank, b.reservation) for b in self.job.state.plan.bundles}
        live = self.sim.live_groups()
        if len(live) > len(units):
            return f"no placement group left behind: {len(live)} on the cluster for the plan's {len(units)}"
        return None

    def _drained(self) -> str | None:
        """A drained node with a spare ready: its workers moved to it before the deadline (not lost at it)."""
        for rank, deadline, before in self.drains:
            if self.sim.wall() < deadline:
                continue
            taken = (EventKind.SPARE, EventKind.REPLACEMENT)
            moved = [e for e in self.job.events[before:] if e.node_rank == rank and e.kind in taken]
            if not moved or moved[0].at > deadline:
                return f"a drain moves the workers before the deadline: node {rank}'s moved {moved[:1] or 'never'}"
        self.drains = [d for d in self.drains if self.sim.wall() < d[1]]
        return None

    def _left_over(self) -> str | None:
        groups, actors = self.sim.live_groups(), self.sim.live_actors()
        keys = list(self.sim.kv)
        if groups or actors or keys:
            return f"nothing left after shutdown: {len(groups)} placement groups, {len(actors)} actors, KV {keys[:3]}"
        return None


def node_resources(node: Any) -> dict[str, float]:
    return {"CPU": float(node.num_cpus or 16), "GPU": float(node.num_gpus), **dict(node.resources)}


def node_labels(node: Any, rank: int | None) -> dict[str, str]:
    """The labels `rlplace start` gives a node shaped like `node` (its own labels left out: a live node's carry
    its rank): rank `rank`, or a hot spare (None)."""
    shape = dataclasses.replace(node, rank=-1 if rank is None else rank, labels={})
    return node_args(shape)["labels"]  # type: ignore[return-value]


# -- mutations: known bugs the explorer must catch -------------------------------------------------------


@contextlib.contextmanager
def _patched(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _keep_groups_when_workers_go() -> contextlib.AbstractContextManager[None]:
    """Forget to remove the placement groups of workers that go (a lost node's, a shrink's)."""
    from rlplace.ray.reserve import Reservation

    stack = contextlib.ExitStack()
    stack.enter_context(_patched(Reservation, "release_bundles", lambda self, bundles: None))
    stack.enter_context(_patched(Reservation, "release", lambda self, rank: None))
    return stack


def _skip_renumbering() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.failover.mover import RankMover

    return _patched(RankMover, "_tell", lambda self, groups, events: {})


def _drop_call_in_flight() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.group import WorkerGroup

    return _patched(WorkerGroup, "_rerun", lambda self, ref, worker, method: self.cluster.put(None))


def _keep_record_at_shutdown() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.records import RecordWriter

    return _patched(RecordWriter, "delete", lambda self: None)


def _ignore_drains() -> contextlib.AbstractContextManager[None]:
    """Read the drain notices and do nothing with them: the node's workers are lost at the deadline."""
    from rlplace.ray.failover.watcher import NodeWatcher

    return _patched(NodeWatcher, "_drained", lambda self, rank, deadline, usable: None)


def _never_declare_loss() -> contextlib.AbstractContextManager[None]:
    from rlplace.ray.failover.watcher import NodeWatcher

    return _patched(NodeWatcher, "_declare", lambda self, rank, why: None)


#: name -> what injects it; `scripts/explore.py --mutate NAME` runs the explorer with it.
MUTATIONS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "keep-groups-when-workers-go": _keep_groups_when_workers_go,
    "skip-renumbering": _skip_renumbering,
    "drop-call-in-flight": _drop_call_in_flight,
    "keep-record-at-shutdown": _keep_record_at_shutdown,
    "never-declare-loss": _never_declare_loss,
    "ignore-drains": _ignore_drains,
}
