#!/usr/bin/env python3
"""What one simulated node costs this machine: the numbers behind `rlplace.ray.machine` (the most nodes a
`--simulate` may have here).

Starts an embedded cluster of `--small` nodes, then one of `--large` nodes (no driver connected, as `rlplace run
--simulate ... -- COMMAND` starts it), lets each sit idle for `--idle` seconds and reads its Ray session's
processes (`rlplace.ray.local_raylets.marked_processes`: the GCS, each raylet and the two agents each raylet starts):
resident memory (RSS, and USS: the process's own pages), threads, and CPU seconds over the idle time.
Prints, per cluster, the totals and the raylets' own figures, and the marginal cost of one node
((large - small) / (large nodes - small nodes)) beside the constants `rlplace.ray.machine` uses, and the start-up
seconds per node.

Usage: .venv/bin/python bench/raylet_footprint.py [--small 1] [--large 6] [--idle 10]
"""

from __future__ import annotations

import argparse
import os
import time

from rlplace.ray import machine
from rlplace.ray.local_raylets import marked_processes, simulated_cluster


def footprint(nodes: int, idle_s: float) -> dict[str, float]:
    import ray  # noqa: F401, I001  (psutil ships with Ray: importable once ray is imported)
    import psutil  # noqa: F401

    started = time.monotonic()
    with simulated_cluster(f"{nodes}x0", connect=False) as cluster:
        start_s = time.monotonic() - started
        procs = marked_processes(cluster.mark)  # the GCS, raylets, their agents
        before = {p.pid: p.cpu_times() for p in procs}
        time.sleep(idle_s)
        cpu = sum(sum(p.cpu_times()[:2]) - sum(before[p.pid][:2]) for p in procs)
        raylets = [p for p in procs if p.name() == "raylet"]
        agents = [p for p in procs if p.name().startswith("ray::") and "Agent" in p.name()]
        return {
            "nodes": nodes,
            "start_s": start_s,
            "processes": len(procs),
            "rss": sum(p.memory_info().rss for p in procs),
            "uss": sum(p.memory_full_info().uss for p in procs),
            "threads": sum(p.num_threads() for p in procs),
            "cores": cpu / idle_s,
            "raylet_rss": max(p.memory_info().rss for p in raylets),
            "raylet_threads": max(p.num_threads() for p in raylets),
            "agents": len(agents),
            "agents_rss": sum(p.memory_info().rss for p in agents),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1)
    parser.add_argument("--large", type=int, default=6)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    small, large = footprint(args.small, args.idle), footprint(args.large, args.idle)
    mib = 2**20
    for f in (small, large):
        print(
            f"{f['nodes']:3.0f} nodes: started in {f['start_s']:.1f} s, {f['processes']:.0f} processes, RSS "
            f"{f['rss'] / mib:.0f} MiB (USS {f['uss'] / mib:.0f}), {f['threads']:.0f} threads, "
            f"{f['cores'] * 100:.2f} % of a core idle; largest raylet {f['raylet_rss'] / mib:.0f} MiB, "
            f"{f['raylet_threads']:.0f} threads; {f['agents']:.0f} agents, RSS {f['agents_rss'] / mib:.0f} MiB"
        )
    n = large["nodes"] - small["nodes"]
    per = {k: (large[k] - small[k]) / n for k in ("rss", "uss", "threads", "cores", "start_s")}
    print(
        f"one more node: RSS {per['rss'] / mib:.1f} MiB, USS {per['uss'] / mib:.1f} MiB (machine.py: "
        f"{machine.NODE_BYTES / mib:.0f}), threads {per['threads']:.1f} ({machine.NODE_THREADS}), "
        f"{per['cores'] * 100:.2f} % of a core ({machine.NODE_CORES * 100:g}), start-up {per['start_s']:.1f} s"
    )
    limit = machine.machine_limit()
    print(f"this machine now holds at most {limit.nodes} simulated nodes: {limit.explain()}")
    print(f"load average now: {os.getloadavg()[0]:.1f}; CPU count {os.cpu_count()}")


if __name__ == "__main__":
    main()
