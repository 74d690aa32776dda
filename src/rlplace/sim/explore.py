"""The explorer: seeded fault schedules run against the real control plane on `SimCluster`, with the invariants
checked after every move (docs/ray.md, "The simulation"; `scripts/explore.py` is its command line).

A schedule is a case (one of the repository's examples, sometimes made elastic, or a cluster and config generated
for it: `rlplace.sim.generate`) and a list of moves drawn with weights of its own (some schedules lose nodes a lot,
others resize, others live through a GCS restart): launches, calls (also across a node's loss), resizes, node
losses of three kinds (processes dead, machine gone, cut off), replacements, new nodes, hot spares (some that match
nothing), drains (dying at, after or never at their deadline), slow nodes, calls that hang, time passing, the
cluster's own weather (a GCS restart, requests that fail or are slow, actors slow or failing to start, kills that
take time), workers restarted in place, a second job on the cluster, the user asking whether a node is lost and
waiting for the takeovers; then `settle` (the last fault is over: every
component must answer) and a shutdown. Moves carry every choice they need, so a schedule replays exactly and can
be shrunk: a failing schedule is cut down, one move at a time, to the shortest one that still fails. The
invariants are `rlplace.sim.world`'s.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlplace.errors import RlplaceError
from rlplace.ray.failover.mover import DEATH_WAIT_S
from rlplace.ray.job import Job
from rlplace.sim.generate import planned, shapes
from rlplace.sim.memory_port import SimCluster, SimHang
from rlplace.sim.mutations import MUTATIONS
from rlplace.sim.world import (
    MOVE_BOUND_S,
    SETTLE_S,
    Case,
    Move,
    SimWorker,
    Violation,
    World,
    first,
    node_labels,
    node_resources,
    simulated_job,
)

__all__ = [
    "MUTATIONS",
    "Case",
    "Move",
    "Outcome",
    "Report",
    "SimWorker",
    "case_of",
    "cases",
    "draw",
    "explore",
    "node_labels",
    "node_resources",
    "run",
    "schedule",
    "shrink",
    "simulated_job",
]

#: Moves per schedule at most (each schedule draws its own length up to it).
LENGTH = 30
#: Violations shrunk to their shortest schedule (shrinking reruns a schedule many times); the rest are counted.
SHRUNK = 3
#: A move may make this many cluster operations, plus `OPS_PER_UNIT` per node and worker of its job, before it
#: counts as spinning (a hang that virtual time does not show).
OPS_BASE, OPS_PER_UNIT = 3_000, 60


@dataclass
class Outcome:
    """What one schedule did: the first violated invariant (None: none), after which move."""

    violation: str | None = None
    at: int = -1


@dataclass
class Report:
    schedules: int = 0
    violations: list[tuple[int, Case, list[Move], str]] = field(default_factory=list)


# -- the cases: the repository's examples on simulated inventories, and generated ones -------------------------

#: Inventories the examples are planned on (`--nodes` syntax): the first that plans wins.
INVENTORIES = ("2x4:A800", "4x2:A800", "3x4:A800", "3x8:A800", "4x8:A800", "1x8:A800,2x4:A800")


def cases(root: Path) -> list[Case]:
    """Every example config of the repository that plans on a simulated inventory (components Ray places and
    driver-local ones included), and each also with every component elastic (down to one worker) where it plans
    so."""
    shipped = root / "src/rlplace/examples"  # examples/ links its configs there
    files = [*sorted(shipped.rglob("*.yaml")), *sorted((root / "tests/data/spec_examples").glob("*.yaml"))]
    found: list[Case] = []
    for path in files:
        written = path.read_text()
        for nodes in INVENTORIES:
            name = f"{path.relative_to(root)} on {nodes}"
            try:
                case = case_of(written, nodes, name)
            except (RlplaceError, ValueError):
                continue
            if case.plan.workers:
                found.append(case)
                for elastic in _elastic_variants(written, case.plan.components):
                    try:
                        found.append(case_of(elastic, nodes, f"{name}, elastic"))
                        break
                    except (RlplaceError, ValueError):
                        continue  # components that follow another cannot change size on their own
            break  # the first inventory it plans on
    return found


def _elastic_variants(text: str, components: Sequence[str]) -> list[str]:
    """The config with every component elastic down to one worker, then with fewer (a buffer or an env that
    follows another component cannot change size on its own). A config that says `elastic` already gets none that
    loads (the key twice is a ConfigError), nor one without a `cluster:` section (it does not plan)."""
    out = []
    for drop in ((), ("buffer",), ("buffer", "env"), ("buffer", "env", "eval")):
        ranges = ", ".join(f"{c}: {{min: 1}}" for c in components if c not in drop)
        out.append(text.replace("cluster:", f"cluster:\n  elastic: {{{ranges}}}", 1))
    return out


def case_of(text: str, nodes: str, name: str | None = None) -> Case:
    """A Case from a config's text and simulated nodes (`--nodes` syntax), named `name` (default: the nodes)."""
    from rlplace.config import load
    from rlplace.inventory import parse_nodes
    from rlplace.planner import plan

    spec = load(text)
    inventory = parse_nodes(nodes, num_cpus=16)
    return Case(name or nodes, spec, inventory, plan(spec, inventory), shapes(inventory))


def generated_case(rng: random.Random, size: int) -> Case | None:
    """A generated cluster of `size` nodes and a config planned on it (`rlplace.sim.generate`)."""
    made = planned(rng, size)
    if made is None:
        return None
    text, inventory, spec, plan = made
    return Case(f"generated, {size} nodes:\n{text}", spec, inventory, plan, shapes(inventory))


# -- schedules ----------------------------------------------------------------------------------------------

#: The moves and how often a schedule draws each, before the schedule draws its own weights.
MOVES = {
    "call": 3,
    "call_rank": 1,
    "call_sharded": 1,
    "call_across_loss": 2,
    "lose": 2,
    "partition": 1,
    "join": 1,
    "grow": 1,
    "spare": 2,
    "drain": 1,
    "resize": 3,
    "slow": 1,
    "hang": 1,
    "wait": 2,
    "gcs_restart": 1,
    "slow_gcs": 1,
    "slow_starts": 1,
    "bad_start": 1,
    "kill_lag": 1,
    "restart_worker": 1,
    "other_job": 1,
    "check_nodes": 1,
    "wait_for_takeovers": 1,
    "launch": 0.5,
    "stop_during": 0.25,
}


def schedule(rng: random.Random, case: Case, length: int) -> list[Move]:
    """A random schedule for `case`: its launches, `length` moves drawn with weights of the schedule's own (each
    base weight times 0, 1/2, 1, 2 or 4), then `settle` and shutdown."""
    components = list(case.plan.components)
    ranks = sorted({w.node_rank for w in case.plan.workers if w.node_rank is not None})
    if not ranks or any(w.node_rank is None and not w.in_driver for w in case.plan.workers):
        ranks = [n.rank for n in case.inventory.nodes]  # Ray places them (or all run in the driver): any node
    kinds = list(MOVES)
    weights = [base * rng.choice((0, 0.5, 1, 2, 4)) for base in MOVES.values()]
    if not any(weights):
        weights = list(MOVES.values())
    # one component in ten is not launched at first: it is resized before its launch, or launched by a later move
    moves = [Move("launch", (c, rng.choice((0, 0, 0, 1, -1)))) for c in components if rng.random() < 0.9]
    for _ in range(length):
        kind = rng.choices(kinds, weights=weights)[0]
        moves.append(Move(kind, _choices(rng, kind, case, components, ranks)))
    return [*moves, Move("settle"), Move("shutdown")]


def _choices(rng: random.Random, kind: str, case: Case, components: list[str], ranks: list[int]) -> tuple:
    """What a move of `kind` needs, drawn."""
    component, rank = rng.choice(components), rng.choice(ranks)
    if kind in ("call", "hang"):
        return (component,)
    if kind == "call_rank":
        return (component, rng.randrange(8))
    if kind == "call_sharded":
        return (component, rng.choice((0, 0, 0, 1)))
    if kind == "launch":  # again: a documented error, or the next try of a launch that failed
        return (component, rng.choice((0, 0, 0, 1, -1)))
    if kind == "stop_during":
        return (rng.choice((0.0, 0.5, 2.0, 5.0)),)
    if kind == "call_across_loss":
        return (component, rank, rng.choice(("kill", "kill", "vanish")))
    if kind == "lose":
        return (rank, rng.choice(("kill", "kill", "vanish")))
    if kind == "partition":
        return (rank, rng.choice((0.5, 1.0, 3.0, None)))
    if kind == "drain":
        deadline = rng.choice((1.0, 4.0, 10.0, None))  # None: Ray is given none
        return (rank, deadline, rng.choice(("dies", "dies", "outlives", "cancelled")))
    if kind in ("join", "grow", "slow"):
        return (rank,)
    if kind == "spare":
        return (rng.randrange(max(1, len(case.shapes))), rng.randrange(len(case.inventory)))
    if kind == "resize":
        return (component, rng.randrange(1, 5) if rng.random() < 0.9 else rng.choice((0, -1)))  # 0, -1: refused
    if kind == "gcs_restart":
        return (rng.choice((0.5, 2.0, 5.0)),)
    if kind == "slow_gcs":
        return (rng.randrange(1 << 30), rng.choice((0.1, 0.3)), rng.choice((1.0, 5.0)))
    if kind == "slow_starts":
        return (rng.choice((0.0, 0.3, 2.0, 8.0)),)  # 8 s: longer than the job's timeout_s
    if kind == "bad_start":
        return (rng.choice((1, 2)),)
    if kind == "kill_lag":
        return (rng.choice((0.0, 0.2, 1.0, 12.0)),)  # 12 s: stuck in the kernel past the job's 10 s wait
    if kind == "restart_worker":
        return (component, rng.randrange(8))
    if kind == "other_job":
        return (rng.choice(("start", "start", "stop", "crash")),)
    if kind in ("check_nodes", "wait_for_takeovers"):
        return ()
    return (rng.choice((0.5, 2.0, 5.0)),)  # wait


def run(case: Case, moves: Sequence[Move]) -> Outcome:
    """Run one schedule on a fresh SimCluster; the first invariant it breaks, and after which move."""
    sim, job = simulated_job(case)
    try:
        return _run(sim, job, case, moves)
    finally:
        sim.close()


def _run(sim: SimCluster, job: Job, case: Case, moves: Sequence[Move]) -> Outcome:
    world = World(sim, job, case)
    try:
        job.start()
    except RlplaceError:
        return Outcome()
    except SimHang as e:
        return Outcome(f"never hang: job start: {e}", 0)
    budget = OPS_BASE + OPS_PER_UNIT * (len(case.inventory) + len(case.plan.workers))
    for i, move in enumerate(moves):
        began, weather = sim.now(), sim.weather
        sim.budget = budget
        slow = weather.slow(began)
        try:
            world.do(move, i)
        except Violation as e:
            return Outcome(str(e), i)
        except SimHang as e:
            return Outcome(f"never hang: {move}: {e}", i)
        except RlplaceError as e:  # a documented error: what the user's code handles, unless an answer was promised
            if world.promised:
                why = f"{move} raised {type(e).__name__}: {first(e)}"
                return Outcome(f"an answer was promised ({world.promised}): {why}", i)
        except Exception as e:  # anything else is a broken promise: an undocumented error
            return Outcome(f"undocumented error from {move}: {type(e).__name__}: {e}", i)
        bound = MOVE_BOUND_S + max(0.0, weather.gcs_down_until - began)
        bound += SETTLE_S if move.kind == "settle" else 0.0
        # slow requests; kills stuck past the job's wait for the deaths (each wait, nested in the move here, lasts it)
        bound += 30.0 if slow or weather.slow(sim.now()) or weather.kill_s >= DEATH_WAIT_S else 0.0
        if weather.start_s >= job.timeout_s:
            # Actors slower to start than the job's timeout_s: each takeover tried fails after it, and the watcher's
            # rounds (every node tried, twice: the window, then the failed rank's next look) run nested in the move
            # here, where on Ray a waiting call fails the rank on its own thread (`wait_usable`; run 2 seed 2009689).
            bound += 2 * len(sim.nodes()) * job.timeout_s
        if sim.now() - began > bound:
            return Outcome(f"never hang: {move} waited {sim.now() - began:.1f} s (bound {bound:g} s)", i)
        problem = world.broken()
        if problem:
            return Outcome(problem, i)
    return Outcome()


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


def draw(
    all_cases: Sequence[Case], own_seed: int, length: int = LENGTH, nodes: int | None = None
) -> tuple[Case, list[Move]]:
    """The case and the schedule of one schedule seed (what `explore` runs, and `--replay` runs again): one of
    `all_cases` or, one time in two (always, with `nodes`), a cluster generated for it (2 to 8 nodes, or `nodes`)."""
    rng = random.Random(own_seed)
    case = None
    if nodes is not None or not all_cases or rng.random() < 0.5:
        size = nodes if nodes is not None else rng.randint(2, 8)
        case = generated_case(random.Random(rng.randrange(1 << 62)), size)
    if case is None:
        case = all_cases[rng.randrange(len(all_cases))]
    return case, schedule(rng, case, rng.randrange(2, length + 1))


def explore(
    all_cases: Sequence[Case],
    count: int,
    seed: int,
    *,
    length: int = LENGTH,
    indices: Sequence[int] | None = None,
    until_violation: bool = False,
    nodes: int | None = None,
    shrunk: int = SHRUNK,
) -> Report:
    """`count` seeded schedules over `all_cases` (schedule i of the run `seed`, for i in `indices`, default
    0..count-1); every violation with the schedule's own seed, its case and its schedule, shrunk for the first
    `shrunk` of them. `until_violation`: stop at the first (a mutation's check)."""
    report = Report()
    for i in indices if indices is not None else range(count):
        if until_violation and report.violations:
            break
        own = seed_of(seed, i)
        case, moves = draw(all_cases, own, length, nodes)
        outcome = run(case, moves)
        report.schedules += 1
        if outcome.violation is not None:
            shortest = shrink(case, moves) if len(report.violations) < shrunk else moves
            report.violations.append((own, case, shortest, outcome.violation))
    return report


def seed_of(run_seed: int, i: int) -> int:
    """The own seed of schedule `i` of the run `run_seed` (what `--replay` takes)."""
    return run_seed * 1_000_003 + i
