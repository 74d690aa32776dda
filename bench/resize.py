#!/usr/bin/env python3
"""What resizing an elastic component costs: growing by k workers, shrinking back, and a lost node's shrink.

On an embedded cluster (the simulated cluster of `rlplace demo`: Ray health checks every 1 s, 3 misses) of three
nodes with k+1 fake GPUs each, a job places train on node 0 and one eval worker on node 1, eval elastic up to
k+1 workers (a manual pool: the range is GPUs 0..k of node 1). Each round, alternating who goes first:
  grow:      `job.resize("eval", 1 + k)`: the step planned, a new placement group of k bundles on node 1, k actors
             started through rlplace's launch path, every worker told its new rank and rendezvous, until all k+1
             answered (what `resize` returns after);
  baseline:  bare Ray on the same node: a placement group of the same k bundles (label selector, `pg.wait`), k
             actors with the same options, until each answered a call;
  shrink:    `job.resize("eval", 1)`: the k workers stopped and reported dead, their group removed, the survivor
             told its new world size.
Then, per round, a lost node: eval spans nodes 1 and 2 (one worker each, elastic down to 1), node 2 is removed
abruptly with nothing running, and the bench times Ray's verdict (removal -> the node reported dead) and the job
answering calls at the shrunk size (Ray's verdict -> `eval.call` returns one result).
Prints medians and the ratio grow / baseline (goal: <= 1.2).

Usage: .venv/bin/python bench/resize.py [--rounds 3] [-k 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


class Worker:
    """A trivial worker: the cost measured is placement, process start-up and rlplace's bookkeeping."""

    def ping(self) -> int:
        return os.getpid()


def config(k: int, nodes: list[int]) -> dict:
    gpus = [k + 1] * len(nodes)
    eval_range = f"0-{k}" if len(nodes) == 1 else f"0,{k + 1}"
    return {
        "cluster": {
            "train_worker_num": 1,
            "eval_worker_num": len(nodes),
            "placement": {"mode": "manual"},
            "elastic": {"eval": {"min": 1, "max": k + 1 if len(nodes) == 1 else len(nodes)}},
        },
        "resource_pool": [
            {"name": "train_pool", "node_ids": [0], "num_gpus": [k + 1], "train": "0"},
            {"name": "rollout_pool", "node_ids": nodes, "num_gpus": gpus, "eval": eval_range},
        ],
    }


def grow_and_shrink(k: int) -> tuple[float, float]:
    import rlplace

    with rlplace.connect(config(k, [1]), export_path=None, timeout_s=60) as job:
        evals = job.launch("eval", Worker)
        evals.call("ping")
        t0 = time.perf_counter()
        job.resize("eval", 1 + k)
        grown = time.perf_counter() - t0
        assert len(evals.call("ping")) == 1 + k
        t1 = time.perf_counter()
        job.resize("eval", 1)
        return grown, time.perf_counter() - t1


def baseline(k: int) -> float:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    t0 = time.perf_counter()
    pg = placement_group([{"GPU": 1.0, "CPU": 1.0}] * k, bundle_label_selector=[{"rlplace/node-rank": "1"}] * k)
    if not pg.wait(timeout_seconds=60):
        raise RuntimeError("placement group not ready")
    actors = [
        ray.remote(Worker)
        .options(
            name=f"bench:eval:{i}", num_cpus=1, num_gpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i)
        )
        .remote()
        for i in range(k)
    ]
    ray.get([a.ping.remote() for a in actors], timeout=60)
    took = time.perf_counter() - t0
    for a in actors:
        ray.kill(a)
    remove_placement_group(pg)
    return took


def lost_node(sim, k: int) -> tuple[float, float]:
    """(removal -> Ray reports node 2 dead, Ray's verdict -> the shrunk job answers) for one loss."""
    import ray

    import rlplace
    from rlplace.errors import RanksRemovedError

    if 2 not in sim.nodes:
        sim.add_node(2)
    with rlplace.connect(config(k, [1, 2]), export_path=None, timeout_s=60, replace_within_s=60) as job:
        evals = job.launch("eval", Worker)
        evals.call("ping")
        node_id = job.live.node(2).node_id
        gone = time.perf_counter()
        sim.lose_node(2)
        while any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
            time.sleep(0.01)
        dead = time.perf_counter()
        while True:
            try:
                if len(evals.call("ping", timeout_s=30)) == 1:
                    break
            except RanksRemovedError:
                pass
        return dead - gone, time.perf_counter() - dead


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-k", type=int, default=3, help="workers a growth adds")
    args = ap.parse_args(argv)

    from rlplace.ray.launch import remote_class
    from rlplace.ray.local_raylets import simulated_cluster, simulated_inventory

    k = args.k
    grow: list[float] = []
    shrink: list[float] = []
    base: list[float] = []
    verdict: list[float] = []
    answer: list[float] = []
    with simulated_cluster(simulated_inventory(f"3x{k + 1}:A800")) as sim:
        remote_class(Worker)
        for r in range(args.rounds + 1):  # round 0 warms both up
            first_rlplace = r % 2 == 0
            for who in ("rlplace", "ray") if first_rlplace else ("ray", "rlplace"):
                if who == "rlplace":
                    g, s = grow_and_shrink(k)
                    if r:
                        grow.append(g)
                        shrink.append(s)
                    print(f"round {r}: grow by {k} {g:5.2f} s, shrink {s:5.2f} s", flush=True)
                else:
                    b = baseline(k)
                    if r:
                        base.append(b)
                    print(f"round {r}: bare Ray, group + {k} actors answering {b:5.2f} s", flush=True)
            if r:
                v, a = lost_node(sim, k)
                verdict.append(v)
                answer.append(a)
                print(
                    f"round {r}: node lost: Ray's verdict after {v:5.2f} s, job answering {a:5.2f} s later", flush=True
                )
    g, b = statistics.median(grow), statistics.median(base)
    print(f"\nmedians over {args.rounds} rounds, growing by {k} workers:")
    print(f"  grow {g:.2f} s, bare Ray {b:.2f} s, ratio grow/baseline {g / b:.2f} (goal <= 1.2)")
    print(f"  shrink back {statistics.median(shrink):.2f} s")
    print(
        f"  node lost: Ray's verdict {statistics.median(verdict):.2f} s after the removal, the shrunk job answering "
        f"{statistics.median(answer):.2f} s after the verdict"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
