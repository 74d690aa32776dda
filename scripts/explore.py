"""Explore the control plane: seeded fault schedules on the simulated cluster, invariants after every move.

    python scripts/explore.py --schedules 2000 --seed 1      # explored 2000 schedules (run seed 1), 0 violations
    python scripts/explore.py --nodes 1024 --schedules 20    # on generated clusters of 1,024 nodes
    python scripts/explore.py --mutate list                  # the bugs it can inject, one a line
    python scripts/explore.py --mutate skip-renumbering      # must report a violation: it can fail
    python scripts/explore.py --mutate all --schedules 3000  # every mutation: caught or not, and after how many
    python scripts/explore.py --replay 1000454               # one schedule again, by the seed a violation names
    python scripts/explore.py --coverage --schedules 10000   # which branches of rlplace.ray and rlplace.sim ran

Prints `explored N schedules (run seed S), V invariant violations` and, for each violation, the schedule's own seed,
its config and the shortest schedule that reproduces it. Exit status 1 on a violation (with --mutate: 0 when the
mutation was caught, which is how the explorer shows it can fail). docs/ray.md, "The simulation".
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from rlplace.sim.explore import LENGTH

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedules", type=int, default=1000, help="how many schedules to run (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: the same seed runs the same schedules")
    p.add_argument("--length", type=int, default=LENGTH, help=f"moves per schedule at most (default {LENGTH})")
    p.add_argument("--nodes", type=int, help="run every schedule on a generated cluster of this many nodes")
    p.add_argument("--mutate", metavar="NAME", help="inject a known bug (`list` prints their names, `all` runs each)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: one per core)")
    p.add_argument("--replay", type=int, metavar="SEED", help="run the schedule of this schedule seed again")
    p.add_argument("--coverage", action="store_true", help="report the branches of rlplace.ray and .sim not run")
    args = p.parse_args(argv)
    if args.schedules < 1 or args.length < 2 or args.jobs < 1 or (args.nodes is not None and args.nodes < 2):
        got = f"{args.schedules}, {args.length}, {args.jobs}, {args.nodes}"
        p.error(f"--schedules and --jobs must be at least 1, --length and --nodes at least 2, got {got}")

    from rlplace.sim.explore import cases, draw, run, shrink
    from rlplace.sim.mutations import MUTATIONS

    if args.mutate == "list":
        print("\n".join(MUTATIONS))
        return 0
    if args.mutate not in (None, "all") and args.mutate not in MUTATIONS:
        p.error(f"--mutate {args.mutate!r} is not a known mutation; known: {', '.join(MUTATIONS)} (or `list`, `all`)")
    found = cases(ROOT)
    if args.replay is not None:
        logging.basicConfig(level=logging.WARNING, format="  job: %(message)s")
        case, moves = draw(found, args.replay, args.length, args.nodes)
        outcome = run(case, moves)
        print(f"schedule {args.replay}: config {case.name}")
        print("\n".join(f"  {i}: {m}" for i, m in enumerate(moves)))
        if outcome.violation is None:
            print("no invariant violated")
            return 0
        print(f"violation after move {outcome.at}: {outcome.violation}")
        print("shortest schedule:\n" + "\n".join(f"  {m}" for m in shrink(case, moves)))
        return 1
    if args.mutate == "all":
        return _every_mutation(args, list(MUTATIONS))
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as data:
        report = _explore(args, args.mutate, until_violation=False, coverage=data if args.coverage else None)
        seconds = time.perf_counter() - began
        print(
            f"explored {report.schedules} schedules (run seed {args.seed}), {len(report.violations)} invariant "
            f"violations ({len(found)} example configs and generated ones, {seconds:.1f} s, "
            f"{report.schedules / seconds:.0f} schedules/s)"
        )
        for seed, case, moves, violation in report.violations[:5]:
            print(f"\nviolation: {violation}\n  seed {seed}, config {case.name}")
            print(f"  shortest schedule ({len(moves)} moves):\n" + "\n".join(f"    {m}" for m in moves))
        if args.coverage:
            from rlplace.sim.coverage import report as coverage_report

            print("\n" + coverage_report(data, ROOT))
    if args.mutate:
        caught = bool(report.violations)
        print(f"\nmutation {args.mutate}: {'caught' if caught else 'NOT caught'}")
        return 0 if caught else 1
    return 1 if report.violations else 0


def _every_mutation(args: argparse.Namespace, names: list[str]) -> int:
    """Each mutation in turn, on the same schedules, until its first violation; 0 when all were caught."""
    missed = []
    for name in names:
        began = time.perf_counter()
        report = _explore(args, name, until_violation=True)
        seconds = time.perf_counter() - began
        if report.violations:
            first = min(report.violations, key=lambda v: v[0])
            print(f"{name}: caught at schedule seed {first[0]} ({seconds:.1f} s): {first[3][:140]}", flush=True)
        else:
            missed.append(name)
            print(f"{name}: NOT caught in {report.schedules} schedules ({seconds:.1f} s)", flush=True)
    print(
        f"\n{len(names) - len(missed)} of {len(names)} mutations caught in {args.schedules} schedules (run seed "
        f"{args.seed})" + (f"; not caught: {', '.join(missed)}" if missed else "")
    )
    return 1 if missed else 0


def _explore(args: argparse.Namespace, mutate: str | None, *, until_violation: bool, coverage: str | None = None):
    """The run's schedules, spread over `args.jobs` processes (schedule i in process i mod jobs)."""
    from rlplace.sim.explore import Report

    jobs = min(args.jobs, args.schedules)
    shares = [range(i, args.schedules, jobs) for i in range(jobs)]
    work = [(args.seed, share, args.length, args.nodes, mutate, until_violation, coverage) for share in shares]
    if jobs == 1:
        parts = [_explore_share(*work[0])]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            parts = list(pool.map(_explore_share, *zip(*work, strict=True)))
    report = Report(sum(r.schedules for r in parts), [v for r in parts for v in r.violations])
    report.violations.sort(key=lambda v: v[0])
    return report


def _explore_share(
    seed: int,
    share: range,
    length: int,
    nodes: int | None,
    mutate: str | None,
    until_violation: bool,
    coverage: str | None,
) -> Any:
    """One process's schedules (`share`: indices of the run's schedules), with the mutation injected there, and
    branch coverage recorded into the folder `coverage` where given."""
    from rlplace.sim.explore import cases, explore
    from rlplace.sim.mutations import MUTATIONS

    logging.disable(logging.WARNING)  # the job's own warnings (losses, shrinks) are the schedule's moves
    with contextlib.ExitStack() as stack:
        if coverage is not None:
            from rlplace.sim.coverage import recording

            stack.enter_context(recording(coverage))
        if mutate:
            stack.enter_context(MUTATIONS[mutate]())
        return explore(
            cases(ROOT), len(share), seed, length=length, indices=share, until_violation=until_violation, nodes=nodes
        )


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `explore.py ... | head`: the reader left; say nothing more (Python's recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
