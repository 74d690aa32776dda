"""How `rlplace tune`'s search grows with the cluster: 1 to 512 nodes x 8 GPUs, three timed components.

Usage: python bench/tune_scale.py [--max-nodes 512] [--repeat 3] [--naive-sample 40]

The job: actor, rollout and inference of one node-groups config (no framework rules: every structure is allowed,
26 of them), with measured points that scale with the cluster (rollout poorly, the actor well), memory that
fits two of them on a GPU with offload, and a 14 GB model whose weight sync crosses nodes. For each size the
tune (lower bounds, then branch and bound over planned candidates; planner/tune.py) is timed end to end from the
loaded config (wall and process CPU, best of --repeat). The baseline is the naive search in the same process:
write, load, plan and predict every placement of the same space; it is run whole up to 2 nodes (where its best
must equal tune's), and above timed on --naive-sample placements and multiplied by their number. Last, the
ratio naive / tune; then the largest cluster again with half its nodes H100 and half A800 (where a block
lies matters, so tune also tries every order and start of the blocks).
"""

from __future__ import annotations

import argparse
import math
import random
import time

from rlplace.config.loader import load
from rlplace.config.profile_file import ComponentCost, Profile
from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.planner.timing import predict
from rlplace.planner.tune import tune, tune_line
from rlplace.planner.tune_space import EXHAUSTIVE_GPUS, Grid, Space
from rlplace.planner.tune_write import document_with
from rlplace.planner.workload import build_workload

SIZES = (1, 2, 4, 16, 64, 128, 256, 512)


def job(nodes: int):
    gpus = 8 * nodes
    placement = {"actor,rollout,inference": "all"}
    document = {"cluster": {"num_nodes": nodes, "model_bytes": "14G", "component_placement": placement}}
    profile = Profile(
        file="<bench>",
        components={
            "rollout": ComponentCost({max(1, gpus // 4): 300.0, gpus: 220.0}, 40.0),
            "inference": ComponentCost({gpus: 12.0}, 20.0),
            "actor": ComponentCost({max(1, gpus // 8): 600.0, gpus: 100.0}, 50.0),
        },
        measured_gpus=gpus,
        measured_gpu="H100",
        batches=512,
    )
    return document, profile


def setup(nodes: int, mixed: bool = False):
    document, profile = job(nodes)
    spec = load(document)
    inventory = parse_nodes(f"{nodes // 2}x8:H100,{nodes - nodes // 2}x8:A800" if mixed else f"{nodes}x8:H100")
    written = plan(spec, inventory)
    workload = build_workload(spec, written, inventory, None, profile)
    return spec, document, workload, inventory, written


def timed_tune(nodes: int, repeat: int, mixed: bool = False):
    best_wall = best_cpu = math.inf
    result = None
    for _ in range(repeat):
        spec, document, workload, inventory, written = setup(nodes, mixed)
        wall, cpu = time.perf_counter(), time.process_time()
        result = tune(spec, document, workload, inventory, written)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return result, best_wall, best_cpu


def placements(nodes: int):
    """Every (shape, arrangement) of tune's space on its first grid, lazily, and what predicting one needs."""
    spec, document, workload, inventory, written = setup(nodes)
    line, line_nodes = tune_line(spec, workload, inventory, written)
    space = Space(workload, line)
    n = len(line)
    node = 8
    grid = Grid(node=n) if n <= EXHAUSTIVE_GPUS else Grid(node, node, node, best_last=True)
    every = ((shape, r) for s in space.structures for shape in space.shapes(s, grid) for r in space.arrangements(shape))
    return every, (spec, document, workload, inventory, line_nodes, space)


def sampled(every, k: int, rng: random.Random) -> tuple[int, list]:
    """(how many, a uniform sample of k of them): reservoir sampling, so the space is never held in memory."""
    sample: list = []
    count = 0
    for count, item in enumerate(every, 1):
        if len(sample) < k:
            sample.append(item)
        else:
            j = rng.randrange(count)
            if j < k:
                sample[j] = item
    return count, sample


def naive_seconds(sample, context) -> tuple[float, float]:
    """(wall seconds, best predicted seconds) of writing, loading, planning and predicting each placement."""
    spec, document, workload, inventory, line_nodes, space = context
    best = math.inf
    start = time.perf_counter()
    for _, ranges in sample:
        if space.unbroken(ranges):
            continue
        try:
            p = plan(load(document_with(spec, document, ranges, line_nodes, workload)), inventory)
        except (ConfigError, PlanError):  # a placement the dialect refuses counts as tried
            continue
        s = predict(p, workload, inventory).seconds
        if s is not None:
            best = min(best, s)
    return time.perf_counter() - start, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-nodes", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--naive-sample", type=int, default=40)
    args = ap.parse_args()
    head = ("nodes x 8 GPUs", "bounded", "planned", "tune wall s", "tune CPU s", "best s", "naive placements")
    print("| " + " | ".join((*head, "naive s", "naive / tune")) + " |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rng = random.Random(0)
    for nodes in [n for n in SIZES if n <= args.max_nodes]:
        result, wall, cpu = timed_tune(nodes, args.repeat)
        every, context = placements(nodes)
        if nodes <= 2:
            everything = list(every)
            total = len(everything)
            naive, naive_best = naive_seconds(everything, context)
            assert result.best is not None and abs(naive_best - result.best.seconds) < 1e-6, (naive_best, result.best)
            how = f"{naive:.2f}"
        else:
            total, sample = sampled(every, args.naive_sample, rng)
            spent, _ = naive_seconds(sample, context)
            naive = spent / len(sample) * total
            how = f"~{naive:,.0f} (from {len(sample)})"
        seconds = result.best.seconds if result.best else float("nan")
        print(
            f"| {nodes} | {result.scored:,} | {result.planned} | {wall:.3f} | {cpu:.3f} | {seconds:.2f} | "
            f"{total:,} | {how} | {naive / wall:,.0f}x |",
            flush=True,
        )
    largest = max(n for n in SIZES if n <= args.max_nodes)
    if largest < 2:
        return  # a mixed cluster needs two nodes
    result, wall, cpu = timed_tune(largest, args.repeat, mixed=True)
    assert result.best is not None
    print(
        f"\n{largest} nodes, half 8x H100 and half 8x A800: tune {wall:.3f} s wall, {cpu:.3f} s CPU, "
        f"{result.scored:,} bounded, {result.planned} planned; best {result.best.seconds:.2f} s, {result.best.gpus}"
    )


if __name__ == "__main__":
    main()
