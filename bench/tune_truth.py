"""`rlplace tune`'s time model held against reality: one emulated job, run in several placements on the embedded
cluster, measured, and predicted by the model from a profile of the same costs.

Usage: python bench/tune_truth.py [--scale 1.0] [--iterations 3] [--weights-mb 64]

The job: RLinf's two stages, `rollout` then `actor`, in RLinf's dialect (node groups), on `rlplace.simulated_cluster`
("2x4": two raylets on this machine, four logical GPUs each), one real Ray actor per planned GPU, placed by rlplace.
A worker's device work is emulated: it holds its GPU's lock (an flock on a file per (node, GPU), shared by every
worker placed on that GPU) and sleeps. So colocated workers really take turns, and stages on GPUs of their own really
overlap. An iteration:
1. weight sync, by rlplace's own runtime (`sync_weights(source="nearest", transport="object_store")`): each actor
   rank that feeds a rollout node returns a numpy array of --weights-mb MB (a put into its node's object store), and
   every rollout worker receives it: across nodes the object store really moves it. (Not one put on rank 0's node:
   the model counts what rlplace's runtime does, each rollout node pulling from the nearest trainer node.) Keep
   --weights-mb under about 70: a simulated node's object store holds 150 MiB (ray.cluster_utils' default), and
   two copies of larger weights spill to disk, which no link figure describes.
2. B = 4 group batches streamed through the stages, as RLinf pipelines them: batch b of rollout, on each rollout
   worker, holds its GPU for rollout(n) / B seconds, after its own batch b - 1 (engines do not wait for each
   other); batch b of the
   actor, on each actor worker, holds its GPU for actor(n) / B seconds, after all of rollout's batch b and the
   actor's batch b - 1 (its data-parallel step). n: the stage's GPUs; rollout(n) = 1.0 + 0.8 / n and actor(n) =
   0.05 + 3.6 / n seconds, times --scale (rollout's long tail barely shrinks with GPUs, the actor scales).
Each placement's iteration: the median of --iterations iterations after one warm-up (which starts the actors). And,
to tell the model's error from the emulation's cost, the same iteration with no device work (every call made, the
weights moved, nobody sleeping), median of 2: what Ray's calls and the sync cost this driver on this machine.

The prediction: `predict` (planner/timing.py) from a profile file of the same costs, the emulation's own numbers
(each stage at 2 and 8 GPUs, which the model's rule, linear in 1/n, extends exactly), B as `batches`, and the links of
this machine: the object store's throughput between the two raylets, measured here once (a pull across nodes minus
the same call on one node, median of 3) as `links.infiniband_gb_s` with one NIC a node. tune's pick is `tune()`'s
(planner/tune.py), the search `rlplace tune` runs, and is measured too when it is none of the placements below.

Printed: the profile, each placement's predicted and measured seconds, the load average, and last
`tune truth: rank correlation R, pick within P% of the measured best over K placements` (Spearman R of predicted
against measured; P: how much slower tune's pick measured than the measured best). Target R >= 0.8, P <= 10.
About 3-4 minutes on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pathlib
import shutil
import statistics
import tempfile
import time

import numpy as np

import rlplace
from rlplace.config.loader import load
from rlplace.config.profile_file import load_profile
from rlplace.planner import plan
from rlplace.planner.timing import Prediction, predict, stage_gpus
from rlplace.planner.tune import tune
from rlplace.planner.workload import build_workload
from rlplace.runtime import sync_weights

NODES = "2x4"
BATCHES = 4
#: Seconds of one iteration of each stage on n GPUs, before --scale: (serial, parallel) in t = serial + parallel / n.
COSTS = {"rollout": (1.0, 0.8), "actor": (0.05, 3.6)}
#: The placements measured (GPUs 0-3 are node 0's, 4-7 node 1's), and tune's pick.
PLACEMENTS = {
    "collocated": {"actor,rollout": "all"},
    "rollout 4 | actor 4": {"rollout": "0-3", "actor": "4-7"},
    "rollout 6 | actor 2": {"rollout": "0-5", "actor": "6-7"},
    "rollout 2 | actor 6": {"rollout": "0-1", "actor": "2-7"},
    "actor 8 over rollout 4": {"actor": "0-7", "rollout": "0-3"},
}


class Device:
    """One worker on one (logical) GPU: device work is time holding that GPU's lock; the actor's weights are an
    array of the model's size."""

    def __init__(self, lock_dir: str, weight_bytes: int):
        p = rlplace.worker_placement()
        self.locks = [open(pathlib.Path(lock_dir) / f"{p.node_rank}-{g}.lock", "a") for g in p.gpus]  # noqa: SIM115
        self.weights = np.ones(weight_bytes, dtype=np.uint8)

    def work(self, seconds: float, *after: object) -> None:
        """Hold every GPU of this worker for `seconds` (after the calls whose results are `after`)."""
        for f in self.locks:
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            time.sleep(seconds)
        finally:
            for f in self.locks:
                fcntl.flock(f, fcntl.LOCK_UN)

    def get_weights(self) -> np.ndarray:
        return self.weights

    def set_weights(self, weights: np.ndarray) -> int:
        return int(weights.nbytes)


def seconds(stage: str, n: int, scale: float) -> float:
    serial, parallel = COSTS[stage]
    return scale * (serial + parallel / n)


def document(placement: dict, weight_bytes: int) -> dict:
    return {"cluster": {"num_nodes": 2, "model_bytes": weight_bytes, "component_placement": placement}}


def profile_text(scale: float, weight_bytes: int, gb_s: float) -> str:
    """The emulation's costs as a profile file (docs/guide.md, "Choosing a placement"), with this machine's link."""
    lines = [
        f"model_bytes: {weight_bytes}",
        f"batches: {BATCHES}",
        f"links: {{infiniband_gb_s: {gb_s:.4f}, nics_per_node: 1}}",
        "components:",
    ]
    lines += [
        f"  {stage}: {{seconds: {{2: {seconds(stage, 2, scale):.6f}, 8: {seconds(stage, 8, scale):.6f}}}}}"
        for stage in COSTS
    ]
    return "\n".join(lines) + "\n"


def iteration(job, rollout, actor, scale: float) -> float:
    """One iteration of the emulated job (see the module's doc); its wall seconds in this driver."""
    start = time.perf_counter()
    sync_weights(actor, [rollout], source="nearest", topology=job.plan.topology, transport="object_store")
    r_each = seconds("rollout", len(rollout.workers), scale) / BATCHES
    a_each = seconds("actor", len(actor.workers), scale) / BATCHES
    r_done: list = []
    a_done: list = []
    for _ in range(BATCHES):
        r_done = rollout.call_async("work", r_each)
        a_done = actor.call_async("work", a_each, *r_done, *a_done)
    actor.get(a_done, "work", timeout_s=120)
    return time.perf_counter() - start


def measured(p, lock_dir: str, weight_bytes: int, scale: float, iterations: int) -> tuple[float, list[float], float]:
    """(median iteration, every iteration, the median iteration without device work) of plan `p`."""
    with rlplace.connect(p, export_path=None, timeout_s=120) as job:
        rollout = job.launch("rollout", Device, lock_dir, 0)
        actor = job.launch("actor", Device, lock_dir, weight_bytes)
        times = [iteration(job, rollout, actor, scale) for _ in range(1 + iterations)]
        empty = statistics.median(iteration(job, rollout, actor, 0.0) for _ in range(2))
    return statistics.median(times[1:]), times, empty


def link_gb_s(inventory, lock_dir: str, weight_bytes: int) -> float:
    """The object store's throughput between the two raylets: one receiver on the sender's node, one on the other,
    the same call timed on each; GB/s of the difference, median of 3 (a fresh object each time)."""
    probe = plan(load(document({"actor": "1", "rollout": "0,4"}, weight_bytes)), inventory)
    local, across = [], []
    with rlplace.connect(probe, export_path=None, timeout_s=120) as job:
        actor = job.launch("actor", Device, lock_dir, weight_bytes)
        rollout = job.launch("rollout", Device, lock_dir, 0)
        rollout.call("set_weights", np.zeros(1, dtype=np.uint8))  # started
        for _ in range(4):
            ref = actor.call_async("get_weights", rank=0)
            actor.get([ref], "get_weights", ranks=[0])
            for rank, into in ((0, local), (1, across)):
                t0 = time.perf_counter()
                rollout.get([rollout.call_async("set_weights", ref, rank=rank)], "set_weights", ranks=[rank])
                into.append(time.perf_counter() - t0)
    transfer = statistics.median(a - b for a, b in zip(across[1:], local[1:], strict=True))
    return weight_bytes / 1e9 / max(transfer, 1e-6)


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        out = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every emulated cost")
    ap.add_argument("--iterations", type=int, default=3, help="measured iterations a placement, after one warm-up")
    ap.add_argument("--weights-mb", type=float, default=64.0, help="size of the weights each sync moves, MB")
    args = ap.parse_args()
    weight_bytes = int(args.weights_mb * 1e6)
    lock_dir = tempfile.mkdtemp(prefix="rlplace-truth-")
    start = time.perf_counter()
    try:
        with rlplace.simulated_cluster(NODES) as cluster:
            inventory = cluster.inventory
            gb_s = link_gb_s(inventory, lock_dir, weight_bytes)
            text = profile_text(args.scale, weight_bytes, gb_s)
            profile_path = pathlib.Path(lock_dir) / "profile.yaml"
            profile_path.write_text(text)
            print(f"object store across the two raylets: {gb_s:.3f} GB/s; the profile:\n{text}", flush=True)
            base = document(PLACEMENTS["collocated"], weight_bytes)
            spec = load(base)
            written = plan(spec, inventory)
            workload = build_workload(spec, written, inventory, None, load_profile(profile_path))
            picked = tune(spec, base, workload, inventory, written).best
            assert picked is not None and picked.plan is not None
            plans = {name: plan(load(document(p, weight_bytes)), inventory) for name, p in PLACEMENTS.items()}
            picked_gpus = stage_gpus(picked.plan, workload)
            pick = next((name for name, p in plans.items() if stage_gpus(p, workload) == picked_gpus), None)
            if pick is None:
                pick = "tune's pick: " + ", ".join(f"{k} {v}" for k, v in picked.section["component_placement"].items())
                plans[pick] = picked.plan
            rows: list[tuple[str, Prediction, float, float]] = []
            for name, p in plans.items():
                predicted = predict(p, workload, inventory)
                median, times, empty = measured(p, lock_dir, weight_bytes, args.scale, args.iterations)
                rows.append((name, predicted, median, empty))
                print(
                    f"  {name}: predicted {predicted.seconds:.3f} s, measured {median:.3f} s "
                    f"({', '.join(f'{t:.2f}' for t in times)}; without device work {empty:.3f} s; "
                    f"load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    finally:
        shutil.rmtree(lock_dir, ignore_errors=True)
    predicted_s = [r[1].seconds or float("nan") for r in rows]
    measured_s = [r[2] for r in rows]
    best = min(measured_s)
    picked_s = next(r[2] for r in rows if r[0] == pick)
    print(
        "\n| placement | mode | predicted s (compute + sync) | measured s (median) | measured / predicted | "
        "no device work s |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for name, pred, median, empty in rows:
        mark = " (tune's pick)" if name == pick else ""
        print(
            f"| {name}{mark} | {pred.mode} | {pred.seconds:.3f} ({pred.compute:.3f} + {pred.weight_sync:.3f}) | "
            f"{median:.3f} | {median / pred.seconds:.2f} | {empty:.3f} |"  # type: ignore[operator]
        )
    load1, load5, _ = os.getloadavg()
    print(f"\nload average {load1:.1f} (1 min), {load5:.1f} (5 min); {time.perf_counter() - start:.0f} s in all")
    r = spearman(predicted_s, measured_s)
    p = 100 * (picked_s - best) / best
    print(
        f"tune truth: rank correlation {r:.2f}, pick within {p:.1f}% of the measured best over {len(rows)} placements"
    )


if __name__ == "__main__":
    main()
