"""What showing a plan costs next to making it: the table, the picture and the HTML page, 1 to 4,096 nodes x 8 GPUs.

Usage: python bench/render_scale.py [--max-nodes 4096] [--repeat 5]

For every workload of bench/plan_scale.py (every GPU filled, every strategy) it plans once, then times, best
of --repeat (process CPU seconds, which a busy shared machine inflates least): planning itself, the terminal
table as `rlplace plan` prints it when stdout is not a terminal (the rich renderable printed to a string), the
per-device table (`--detail`), the SVG and the HTML page, with the estimate they read. It prints the table's
row count and the ratio of each view's time to planning's: rendering the table must cost no more than
planning (docs/planner.md, "The plan table").
"""

from __future__ import annotations

import argparse
import gc
import io
import pathlib
import sys
import time

from rich.console import Console

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from plan_scale import SIZES, workloads

from rlplace.commands.plan import UNWRAPPED
from rlplace.inventory import parse_nodes
from rlplace.planner import estimate, plan
from rlplace.viz.collapse import node_runs, rows
from rlplace.viz.picture import html, svg
from rlplace.viz.table import render


def cpu(fn, repeat: int) -> float:
    """Best process CPU seconds of `fn` over `repeat` runs."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def table_text(p, inventory, detail: bool = False) -> str:
    console = Console(file=io.StringIO(), width=UNWRAPPED)
    console.print(render(p, inventory, detail=detail))
    return console.file.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-nodes", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    table_text(*_warm_up())  # rich imports its renderers on first use: not part of any row
    print(
        "| nodes | strategy | workers | table rows | plan ms | table ms | table/plan | detail ms | svg ms | svg/plan "
        "| html ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (s for s in SIZES if s <= args.max_nodes and s >= 16):
        inventory = parse_nodes(f"{n}x8")
        for name, spec in workloads(n).items():
            p = plan(spec, inventory)
            est = estimate(p, inventory=inventory)
            planned = cpu(lambda spec=spec, inv=inventory: plan(spec, inv), args.repeat)
            table = cpu(lambda p=p, inv=inventory: table_text(p, inv), args.repeat)
            detail = cpu(lambda p=p, inv=inventory: table_text(p, inv, detail=True), 1)
            picture = cpu(lambda p=p, inv=inventory, est=est: svg(p, inv, estimate=est), args.repeat)
            page = cpu(lambda p=p, inv=inventory, est=est: html(p, inv, estimate=est), 1)
            count = len(rows(node_runs(p, inventory)))
            print(
                f"| {n} | {name} | {len(p.workers)} | {count} | {planned * 1e3:.1f} | {table * 1e3:.1f} | "
                f"{table / planned:.2f} | {detail * 1e3:.0f} | {picture * 1e3:.1f} | {picture / planned:.2f} | "
                f"{page * 1e3:.1f} |",
                flush=True,
            )


def _warm_up():
    inventory = parse_nodes("2x8")
    return plan(workloads(2)["colocate"], inventory), inventory


if __name__ == "__main__":
    main()
