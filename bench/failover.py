#!/usr/bin/env python3
"""How fast a hot spare takes over a lost node: from "the loss is declared" to "the workers answer on the spare";
and a draining one: from Ray's drain notice to "the workers answer on the spare".

On an embedded cluster (the simulated cluster of `rlplace demo`, Ray health checks every 1 s, 3 misses), each
round starts a job whose plan puts 2 workers on node 0 and `--workers` on node 1 (a manual pool, one GPU
each), and joins three spares shaped like node 1. Then:
  idle loss:      node 1 is removed abruptly while no call runs; Ray's health checks declare it dead, the
                  job's watcher (reading the GCS node table every 0.5 s) sees it, and spare A takes over;
  in-flight loss: spare A is removed abruptly while a call runs on it; the call fails, the job finds the
                  raylet refusing connections and declares the loss at once; spare B takes over and the
                  call is re-run there;
  drain:          spare B is drained with a 30 s deadline (a preemption notice, as `rlplace drain` or a cloud
                  gives) while no call runs; the watcher (reading the GCS's draining nodes every 0.5 s) sees it,
                  and spare C takes over while B still runs.
For each loss it prints: detect (removal -> the job's `lost` event) and takeover (`lost` event -> every
relaunched worker answered on the spare, the `spare` event's seconds); for the drain: notice (the drain request
-> the job's `draining` event) and move (`draining` event -> every moved worker answered on the spare, the
`spare` event's seconds); their sum is what a drain costs before the deadline. The baseline, in the same process:
bare Ray doing the least a hand-written recovery must do on a fresh node: create a placement group with
the same bundles, start the same actors, wait for each to answer a call. Prints medians and the ratio
takeover / baseline (the bookkeeping rlplace adds on top of that minimum: killing the lost workers,
releasing their group, the interpreter probe, on_replaced).

Usage: .venv/bin/python bench/failover.py [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time


class Worker:
    """A trivial worker: the cost measured is detection, placement and process start-up, not work."""

    def ping(self, seconds: float = 0.0) -> int:
        time.sleep(seconds)
        return os.getpid()


def config(workers: int) -> dict:
    return {
        "cluster": {"train_worker_num": 2 + workers, "placement": {"mode": "manual"}},
        "resource_pool": [{"name": "pool", "node_ids": [0, 1], "num_gpus": [2, workers], "train": f"0-{1 + workers}"}],
    }


def loss(job, sim, lose, in_flight: bool, group) -> tuple[float, float]:
    """Lose a node (by `lose()`), wait for the takeover; return (detect, takeover) seconds."""
    before = len(job.events)
    call = group.call_async("ping", 5.0, rank=len(group) - 1) if in_flight else None
    if in_flight:
        time.sleep(0.5)  # the call is running on the node when it goes
    gone = lose()
    if call is not None:
        group.get([call], "ping", ranks=[len(group) - 1])
    else:
        _wait_for_events(job, before + 2, 120)
        group.call("ping")
    lost, took = job.events[before], job.events[before + 1]
    assert (lost.kind, took.kind) == ("lost", "spare"), job.events
    return lost.at - gone, took.seconds


def _wait_for_events(job, count: int, timeout_s: float) -> None:
    """Until the job has recorded `count` node events (a loss or notice and its takeover), at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while len(job.events) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def drain(job, sim, node_id: str, group) -> tuple[float, float]:
    """Drain `node_id` (a 30 s deadline), wait until the workers answer on a spare; return (notice, move) seconds."""
    from rlplace.ray import _compat

    time.sleep(random.uniform(0.5, 1.5))  # the notice comes at any moment of the watcher's period, not after a tick
    before = len(job.events)
    asked = time.time()
    _compat.drain_node(sim.address, node_id, int((asked + 30) * 1000), "maintenance", "bench/failover.py")
    _wait_for_events(job, before + 2, 30)
    group.call("ping")
    notice, took = job.events[before], job.events[before + 1]
    assert (notice.kind, took.kind) == ("draining", "spare"), job.events
    return notice.at - asked, took.seconds


def baseline(sim, workers: int) -> float:
    """Bare Ray on a fresh node: a group with the same bundles, the same actors, each answering a call."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from rlplace.inventory import Node
    from rlplace.ray.local_raylets import node_args

    node = sim.cluster.add_node(**node_args(Node(rank=-1, num_gpus=workers, gpu_model="A800", num_cpus=32)))
    sim.cluster.wait_for_nodes()
    start = time.perf_counter()
    pg = placement_group(
        [{"GPU": 1.0, "CPU": 1.0}] * workers, bundle_label_selector=[{"ray.io/node-id": node.node_id}] * workers
    )
    actors = [
        ray.remote(Worker)
        .options(num_cpus=1, num_gpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i))
        .remote()
        for i in range(workers)
    ]
    ray.get([a.ping.remote() for a in actors], timeout=60)
    took = time.perf_counter() - start
    remove_placement_group(pg)
    sim.cluster.remove_node(node)
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="workers on the node that is lost")
    args = ap.parse_args(argv)

    import ray

    import rlplace
    from rlplace.ray.launch import remote_class
    from rlplace.ray.local_raylets import node_args, simulated_cluster, simulated_inventory, simulated_spares

    inventory = simulated_inventory(f"1x2:A800,1x{args.workers}:A800")
    shape = simulated_spares("1", inventory, like=1)[0]
    detect: dict[str, list[float]] = {"idle": [], "in-flight": [], "drain": []}
    takeover: dict[str, list[float]] = {"idle": [], "in-flight": [], "drain": []}
    base: list[float] = []
    spares: list = []  # a spare left over from a round takes part in the next
    with simulated_cluster(inventory) as sim:
        remote_class(Worker)
        for r in range(args.rounds):
            alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
            if r:  # a fresh node 1 for this round (the previous one was lost)
                sim.nodes[1] = sim.cluster.add_node(**node_args(inventory.node(1)))
            spares += [
                sim.cluster.add_node(**node_args(shape)) for _ in range(3 - sum(s.node_id in alive for s in spares))
            ]
            sim.cluster.wait_for_nodes()
            with rlplace.connect(config(args.workers), export_path=None, timeout_s=60) as job:
                train = job.launch("train", Worker)
                train.call("ping")
                for mode in ("idle", "in-flight", "drain"):
                    serving = job.live.node(1).node_id
                    victim = next((s for s in spares if s.node_id == serving), None)
                    if mode == "drain":
                        d, t = drain(job, sim, serving, train)
                        detect[mode].append(d)
                        takeover[mode].append(t)
                        print(f"round {r + 1} drain    : notice {d:5.2f} s, move {t:5.2f} s", flush=True)
                        # Ray stops a drained raylet once nothing runs there: the cluster forgets the node
                        sim.cluster.remove_node(victim if victim is not None else sim.nodes.pop(1))
                        continue

                    def lose(victim=victim):
                        if victim is None:
                            return sim.lose_node(1)
                        sim.cluster.remove_node(victim, allow_graceful=False)
                        return time.time()

                    d, t = loss(job, sim, lose, mode == "in-flight", train)
                    detect[mode].append(d)
                    takeover[mode].append(t)
                    print(f"round {r + 1} {mode:9}: detect {d:5.2f} s, takeover {t:5.2f} s", flush=True)
            base.append(baseline(sim, args.workers))
            print(f"round {r + 1} baseline : {base[-1]:5.2f} s (bare Ray: group + {args.workers} actors answering)")
    b = statistics.median(base)
    print(f"\nmedians over {args.rounds} rounds, {args.workers} workers on the lost node:")
    for mode in ("idle", "in-flight"):
        t = statistics.median(takeover[mode])
        print(
            f"  {mode:9}: detect {statistics.median(detect[mode]):.2f} s, takeover {t:.2f} s, "
            f"baseline {b:.2f} s, ratio takeover/baseline {t / b:.2f}"
        )
    d, t = statistics.median(detect["drain"]), statistics.median(takeover["drain"])
    whole = statistics.median(a + m for a, m in zip(detect["drain"], takeover["drain"], strict=True))
    print(
        f"  drain    : notice {d:.2f} s, move {t:.2f} s, notice to workers answering {whole:.2f} s, "
        f"ratio move/baseline {t / b:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
