"""The explorer on the simulated cluster: no violation over the run `make test` makes, every named mutation
caught, a violation reported with a seed that replays it and a shortened schedule, the same seed the same run."""

from __future__ import annotations

import logging
import pathlib
import random
import subprocess
import sys

import pytest

from rlplace.sim.explore import MUTATIONS, Move, cases, draw, explore, run, shrink

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def all_cases():
    logging.disable(logging.WARNING)  # the jobs' own warnings (losses, shrinks) are the schedules' moves
    yield cases(ROOT)
    logging.disable(logging.NOTSET)


def test_the_repositorys_examples_are_explored_each_also_elastic(all_cases):
    names = [c.name for c in all_cases]
    assert any("cartpole_ppo/configs/disaggregate.yaml" in n for n in names)
    assert any("spec_examples/pools-mixed.yaml" in n for n in names)
    assert sum(n.endswith(", elastic") for n in names) >= 8
    assert len(names) >= 20


def test_a_fresh_run_of_two_thousand_schedules_breaks_no_invariant(all_cases):
    """Each `make test` explores 2,000 schedules of a run seed drawn afresh (about 20 s of one core), so the
    suite's runs add up to new schedules rather than the same ones again; a violation names the run seed, and
    `scripts/explore.py --seed S --schedules 2000` (or `--replay` with the schedule's own seed) runs it again."""
    seed = random.SystemRandom().randrange(1, 1_000_000)
    report = explore(all_cases, 2_000, seed=seed)
    assert report.schedules == 2_000
    found = [(own, case.name, violation) for own, case, _, violation in report.violations]
    assert found == [], f"run seed {seed}: {found}"


@pytest.mark.long
def test_ten_thousand_schedules_break_no_invariant(all_cases):
    """The long run (`make test-long`; about 90 s of one core): run seed 1, the same schedules every time."""
    report = explore(all_cases, 10_000, seed=1)
    assert report.schedules == 10_000
    assert [(seed, case.name, violation) for seed, case, _, violation in report.violations] == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_named_mutation_is_caught(all_cases, name):
    with MUTATIONS[name]():
        report = explore(all_cases, 1000, seed=2, until_violation=True)
    assert report.violations, f"mutation {name} went unnoticed in {report.schedules} schedules"


def test_a_violation_replays_from_its_seed_and_shrinks_to_a_shorter_schedule(all_cases):
    with MUTATIONS["skip-renumbering"]():
        report = explore(all_cases, 1000, seed=3, until_violation=True)
        own, case, shortest, violation = report.violations[0]
        replayed_case, moves = draw(all_cases, own)
        assert replayed_case is case and run(case, moves).violation == violation  # the seed is the schedule
        assert len(shortest) < len(moves) and shortest == shrink(case, moves)
        assert run(case, shortest).violation is not None
    assert run(case, shortest).violation is None  # without the bug the same schedule holds


def test_the_same_seed_runs_the_same_schedules(all_cases):
    first = [(c.name, tuple(m)) for c, m in (draw(all_cases, s) for s in range(50))]
    again = [(c.name, tuple(m)) for c, m in (draw(all_cases, s) for s in range(50))]
    assert first == again and len(set(first)) == 50


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts/explore.py"), *args], capture_output=True, text=True, timeout=120
    )


def test_the_script_lists_its_mutations_and_refuses_an_unknown_one():
    listed = _script("--mutate", "list")
    assert listed.returncode == 0 and listed.stdout.split() == list(MUTATIONS)
    unknown = _script("--mutate", "forget-everything")
    assert unknown.returncode == 2
    assert "--mutate 'forget-everything' is not a known mutation; known: keep-groups-when-workers-go" in unknown.stderr


def test_the_script_reports_its_count_and_a_caught_mutation():
    clean = _script("--schedules", "200", "--seed", "4", "--jobs", "1")
    assert clean.returncode == 0
    assert clean.stdout.startswith("explored 200 schedules (run seed 4), 0 invariant violations")
    caught = _script("--schedules", "300", "--seed", "4", "--jobs", "1", "--mutate", "drop-call-in-flight")
    assert caught.returncode == 0 and "mutation drop-call-in-flight: caught" in caught.stdout
    assert "shortest schedule" in caught.stdout and "seed " in caught.stdout


def test_status_shows_a_drained_ranks_workers_alive_on_the_replacement_that_took_it_over(all_cases):
    """The schedule the status invariant found (seed 21000353, shrunk): node 2 drains with 1 s left and nothing
    can take it over; a replacement with node 2's label joins; the move's group, selected by that label, must land
    on the replacement, since the draining node carries the label too (Ray schedules nothing new on a draining
    node; the simulation did, and status showed the moved workers dead while the state had them on the
    replacement)."""
    name = "src/rlplace/examples/cartpole_ppo/configs/node-groups.yaml on 4x8:A800"  # what the seed drew then
    case = next(c for c in all_cases if c.name == name)
    moves = [Move("launch", ("eval",)), Move("drain", (2, 1.0)), Move("join", (2,)), Move("hang", ("eval",))]
    assert run(case, [*moves, Move("shutdown", ())]).violation is None
