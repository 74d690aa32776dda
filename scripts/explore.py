"""Explore the control plane: seeded fault schedules on the simulated cluster, invariants after every step.

    python scripts/explore.py --schedules 10000 --seed 1
    python scripts/explore.py --mutate list           # the known bugs it can inject, one a line
    python scripts/explore.py --mutate skip-renumbering --schedules 2000   # must report a violation

Prints `explored N schedules, V invariant violations` and, for each violation, its seed, its config and the
shortest schedule that reproduces it (replay: `--seed S --schedules 1 --first S`). Exit status 1 on a violation
(0 with --mutate when the mutation was caught: the explorer showed it can fail). docs/ray.md, "The simulation".
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedules", type=int, default=1000, help="how many schedules to run (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: the same seed runs the same schedules")
    p.add_argument("--length", type=int, default=12, help="moves per schedule at most (default 12)")
    p.add_argument("--mutate", metavar="NAME", help="inject a known bug (`list` prints their names)")
    args = p.parse_args(argv)
    if args.schedules < 1 or args.length < 1:
        p.error(f"--schedules and --length must be at least 1, got {args.schedules} and {args.length}")

    from rlplace.sim.explore import MUTATIONS, cases, explore

    if args.mutate == "list":
        print("\n".join(MUTATIONS))
        return 0
    if args.mutate is not None and args.mutate not in MUTATIONS:
        p.error(f"--mutate {args.mutate!r} is not a known mutation; known: {', '.join(MUTATIONS)} (or `list`)")
    logging.disable(logging.WARNING)  # the job's own warnings (losses, shrinks) are the schedule's moves
    found = cases(ROOT)
    began = time.perf_counter()
    injected = MUTATIONS[args.mutate]() if args.mutate else contextlib.nullcontext()
    with injected:
        report = explore(found, args.schedules, args.seed, length=args.length)
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


if __name__ == "__main__":
    sys.exit(main())
