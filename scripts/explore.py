"""Explore the control plane: seeded fault schedules on the simulated cluster, invariants after every step.

    python scripts/explore.py --schedules 10000 --seed 1
    python scripts/explore.py --mutate list           # the known bugs it can inject, one a line
    python scripts/explore.py --mutate skip-renumbering --schedules 2000   # must report a violation

    python scripts/explore.py --replay 1000454       # one schedule again, by the seed a violation names

Prints `explored N schedules, V invariant violations` and, for each violation, the schedule's own seed, its
config and the shortest schedule that reproduces it. Exit status 1 on a violation (with --mutate: 0 when the
mutation was caught, which is how the explorer shows it can fail). docs/ray.md, "The simulation".
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedules", type=int, default=1000, help="how many schedules to run (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: the same seed runs the same schedules")
    p.add_argument("--length", type=int, default=12, help="moves per schedule at most (default 12)")
    p.add_argument("--mutate", metavar="NAME", help="inject a known bug (`list` prints their names)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: one per core)")
    p.add_argument("--replay", type=int, metavar="SEED", help="run the schedule of this schedule seed again")
    args = p.parse_args(argv)
    if args.schedules < 1 or args.length < 1 or args.jobs < 1:
        got = f"{args.schedules}, {args.length}, {args.jobs}"
        p.error(f"--schedules, --length and --jobs must be at least 1, got {got}")

    from rlplace.sim.explore import MUTATIONS, Report, cases, draw, run, shrink

    if args.mutate == "list":
        print("\n".join(MUTATIONS))
        return 0
    if args.mutate is not None and args.mutate not in MUTATIONS:
        p.error(f"--mutate {args.mutate!r} is not a known mutation; known: {', '.join(MUTATIONS)} (or `list`)")
    found = cases(ROOT)
    if args.replay is not None:
        logging.basicConfig(level=logging.WARNING, format="  job: %(message)s")
        case, moves = draw(found, args.replay, args.length)
        outcome = run(case, moves)
        print(f"schedule {args.replay}: config {case.name}")
        print("\n".join(f"  {i}: {m}" for i, m in enumerate(moves)))
        if outcome.violation is None:
            print("no invariant violated")
            return 0
        print(f"violation after move {outcome.at}: {outcome.violation}")
        print("shortest schedule:\n" + "\n".join(f"  {m}" for m in shrink(case, moves)))
        return 1
    began = time.perf_counter()
    jobs = min(args.jobs, args.schedules)
    shares = [range(i, args.schedules, jobs) for i in range(jobs)]
    work = [(args.seed, share, args.length, args.mutate) for share in shares]
    if jobs == 1:
        parts = [_explore_share(*work[0])]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            parts = list(pool.map(_explore_share, *zip(*work, strict=True)))
    report = Report(sum(r.schedules for r in parts), [v for r in parts for v in r.violations])
    report.violations.sort(key=lambda v: v[0])
    seconds = time.perf_counter() - began
    print(
        f"explored {report.schedules} schedules, {len(report.violations)} invariant violations "
        f"({len(found)} configs, {seconds:.1f} s, {report.schedules / seconds:.0f} schedules/s)"
    )
    for seed, case, moves, violation in report.violations[:5]:
        print(f"\nviolation: {violation}\n  seed {seed}, config {case.name}\n  shortest schedule ({len(moves)} moves):")
        print("\n".join(f"    {m}" for m in moves))
    if args.mutate:
        caught = bool(report.violations)
        print(f"\nmutation {args.mutate}: {'caught' if caught else 'NOT caught'}")
        return 0 if caught else 1
    return 1 if report.violations else 0


def _explore_share(seed: int, share: range, length: int, mutate: str | None) -> object:
    """One process's schedules (`share`: indices of the run's schedules), with the mutation injected there."""
    from rlplace.sim.explore import MUTATIONS, cases, explore

    logging.disable(logging.WARNING)  # the job's own warnings (losses, shrinks) are the schedule's moves
    with MUTATIONS[mutate]() if mutate else contextlib.nullcontext():
        return explore(cases(ROOT), len(share), seed, length=length, indices=share)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `explore.py ... | head`: the reader left; say nothing more (Python's recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
