"""How planning time and memory grow with the cluster: 1 to 4,096 nodes x 8 GPUs, every strategy.

Usage: python bench/plan_scale.py [--max-nodes 4096] [--repeat 3] [--naive-max 64]

Each strategy gets a workload that fills every GPU (so the plan holds every worker and bundle):
  default       train 4N, eval 2N, env 2N left to Ray (+ one pinned buffer shard per node)
  disaggregate  train 4N on train_pool, eval 2N + env 2N on rollout_pool
  colocate      train/eval/env 8N each, device-colocate: 3 workers on every GPU
  manual        the spec's "all co-located" resource_pool, scaled: train/eval/env on every GPU
  node_groups   actor and rollout on every GPU of one group (colocated), 4 agents per node via `node`
Times are the best of --repeat runs, wall clock and process CPU (the CPU figure is what a busy shared
machine cannot inflate). Peak memory is tracemalloc's, in a separate run. `naive` is a deliberately
simple planner written below (for every worker, scan the GPUs from the start for the first with room),
run in the same process on the colocate workload to show what a quadratic scan costs; it is run only
up to --naive-max nodes, since it grows with the square of the cluster. Then, for the largest cluster in racks
of 16 nodes over 2 zones (`--nodes Nx8/rack=16/zone=N/2`), the colocate and disaggregate workloads planned with
topology on (the default `cluster.topology`) and made topology-blind (every level null), alternately in the same
process, and their ratio (issue 23: at most 1.2). Last, the wall time of the command a user runs for the largest
colocate cluster: `rlplace plan FILE --nodes Nx8 --format json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import pathlib
import subprocess
import sys
import tempfile
import time
import tracemalloc

from rlplace.inventory import parse_nodes
from rlplace.model import ComponentSpec, JobSpec, NodeGroupSpec, Placement, PlacementSettings, Segment
from rlplace.planner import plan

SIZES = (1, 4, 16, 64, 256, 1024, 4096)


def _auto(strategy: str, env_strategy: str | None, train: int, eval_: int) -> JobSpec:
    comps = (
        ComponentSpec("train", num_workers=train),
        ComponentSpec("eval", num_workers=eval_),
        ComponentSpec("env"),
    )
    return JobSpec(
        "pools", PlacementSettings(strategy=strategy, env_strategy=env_strategy, buffer_worker_num="auto"), comps
    )


def workloads(n: int) -> dict[str, JobSpec]:
    gpus = 8 * n
    every = (Segment(tuple(range(gpus))),)
    pool = NodeGroupSpec("global_pool", tuple(range(n)), gpus_per_node=(8,) * n)
    manual = JobSpec(
        "pools",
        PlacementSettings(mode="manual", buffer_worker_num="auto"),
        tuple(ComponentSpec(c, Placement(("global_pool",), every)) for c in ("train", "eval", "env")),
        (pool,),
    )
    groups = JobSpec(
        "node_groups",
        PlacementSettings(mode="manual"),
        (
            ComponentSpec("actor", Placement(("gpus",), (Segment(None),))),
            ComponentSpec("rollout", Placement(("gpus",), (Segment(None),))),
            ComponentSpec(
                "agent", Placement(("node",), (Segment(tuple(range(n)), tuple(range(4 * n))),)), cpus_per_worker=0.25
            ),
        ),
        (NodeGroupSpec("gpus", tuple(range(n))),),
        num_nodes=n,
    )
    return {
        "default": _auto("default", None, 4 * n, 2 * n),
        "disaggregate": _auto("disaggregate", "default", 4 * n, 2 * n),
        "colocate": _auto("colocate", "device-colocate", gpus, gpus),
        "manual": manual,
        "node_groups": groups,
    }


def naive_colocate(nodes: int, per_node: int, counts: dict[str, int]) -> list[dict]:
    """The quadratic baseline: each worker scans every GPU from the start for one with room."""
    devices = [(node, g) for node in range(nodes) for g in range(per_node)]
    used: dict[tuple[str, int], int] = {}
    workers = []
    for comp, count in counts.items():
        for rank in range(count):
            for i, (node, g) in enumerate(devices):
                if used.get((comp, i), 0) < 1:
                    used[(comp, i)] = 1
                    workers.append({"component": comp, "rank": rank, "node_rank": node, "gpus": [g]})
                    break
    for w in workers:  # fractions: count co-residents by scanning all workers again
        w["gpu_fraction"] = 1 / sum(1 for x in workers if (x["node_rank"], x["gpus"]) == (w["node_rank"], w["gpus"]))
    return workers


def best(fn, repeat: int) -> tuple[float, float]:
    """Best wall and best CPU seconds over `repeat` runs (the result is dropped before the next run)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


def peak_mib(fn) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-nodes", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--naive-max", type=int, default=64)
    args = ap.parse_args()
    print("| nodes | strategy | workers | bundles | wall ms | CPU ms | µs/worker | peak MiB | naive ms | naive/ours |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (s for s in SIZES if s <= args.max_nodes):
        inventory = parse_nodes(f"{n}x8")
        for name, spec in workloads(n).items():
            p = plan(spec, inventory)
            workers, bundles = len(p.workers), len(p.bundles)
            del p
            wall, cpu = best(lambda spec=spec, inv=inventory: plan(spec, inv), args.repeat)
            mem = peak_mib(lambda spec=spec, inv=inventory: plan(spec, inv))
            naive = ratio = "-"
            if name == "colocate" and n <= args.naive_max:
                counts = {"train": 8 * n, "eval": 8 * n, "env": 8 * n}
                nw, _ = best(lambda n=n, counts=counts: naive_colocate(n, 8, counts), 1)
                naive, ratio = f"{nw * 1e3:.1f}", f"{nw / wall:.0f}x"
            print(
                f"| {n} | {name} | {workers} | {bundles} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} | "
                f"{cpu * 1e6 / max(workers, 1):.2f} | {mem:.1f} | {naive} | {ratio} |",
                flush=True,
            )
    n = max(s for s in SIZES if s <= args.max_nodes)
    print(f"\n| {n}x8 in racks of 16, 2 zones | topology on ms | topology-blind ms | on / blind |")
    print("|---|---:|---:|---:|")
    for name, on, blind in topology_rows(n, args.repeat):
        print(f"| {name} | {on * 1e3:.1f} | {blind * 1e3:.1f} | {on / blind:.2f} |", flush=True)
    seconds, size = cli_seconds(n)
    print(f"\n`rlplace plan` colocate {n}x8 --format json: {seconds:.2f} s wall, {size / 2**20:.0f} MiB of JSON")


def topology_rows(n: int, repeat: int) -> list[tuple[str, float, float]]:
    """(workload, best CPU seconds with topology on, topology-blind) on n x 8 GPUs in racks of 16 over 2 zones;
    the two are timed in turns, so that a change in the machine's load hits both."""
    racks = parse_nodes(f"{n}x8/rack=16/zone={max(16, n // 2)}") if n % 16 == 0 else parse_nodes(f"{n}x8")
    out = []
    for name in ("colocate", "disaggregate"):
        spec = workloads(n)[name]
        blind = dataclasses.replace(spec, topology=())
        on = off = float("inf")
        for _ in range(max(repeat, 3)):
            on = min(on, best(lambda spec=spec: plan(spec, racks), 1)[1])
            off = min(off, best(lambda blind=blind: plan(blind, racks), 1)[1])
        out.append((name, on, off))
    return out


def cli_seconds(n: int) -> tuple[float, int]:
    """Wall seconds and output bytes of `rlplace plan --format json` for the colocate workload on n x 8."""
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "colocate.yaml"
        config.write_text(
            f"cluster:\n  train_worker_num: {8 * n}\n  eval_worker_num: {8 * n}\n  placement:\n"
            "    mode: auto\n    strategy: colocate\n    env_strategy: device-colocate\n"
        )
        cmd = [sys.executable, "-m", "rlplace.cli", "plan", str(config), "--nodes", f"{n}x8", "--format", "json"]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, check=True, timeout=300).stdout
        return time.perf_counter() - t0, len(out)


if __name__ == "__main__":
    main()
