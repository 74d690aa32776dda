"""How many simulated nodes this machine can hold, so that a `--simulate` too large is refused at once.

Every simulated node is a real raylet (`rlplace.ray.local_raylets`) with the two agents it starts (its dashboard
agent and runtime-env agent), and they cost the machine memory, threads and CPU even when idle. Measured on
Ray 2.60 by `bench/raylet_footprint.py` (a 2-core machine of 24 GiB: the processes of a 1-node and a 6-node
embedded cluster, idle for 10 s): one more node adds 95 MiB of memory of its own (USS; 186 MiB resident, shared
libraries counted again in each process), 76 threads and 1.2 % of a core; the head adds its GCS and helper
processes, 280 MiB. So a 100-node `--simulate` takes ~10 GiB and, at 1.4-3 s a node, 3-5 minutes to start.

The simulated nodes may take half of what the machine has (the rest stays for the job's own workers, an actor
process being 60-100 MB, and for the machine's other users): half of the available memory (`MemAvailable` of
/proc/meminfo), half of the threads this user may still start (RLIMIT_NPROC, which counts threads, less those
running), and half of the CPU cores (`os.cpu_count()`). The smallest of the three is the limit; the refusal says
each, and where it came from.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass

#: The memory one more node takes, measured (95 MiB of its own), rounded up.
NODE_BYTES = 100 * 2**20
#: The threads of one more idle node, measured (76).
NODE_THREADS = 77
#: The CPU one more idle node takes, in cores (0.12 s of CPU per 10 s, measured; Ray's health checks every second).
NODE_CORES = 0.012
#: The head's own processes besides its raylet (GCS, log monitor, helpers), measured 280 MiB.
HEAD_BYTES = 300 * 2**20
#: The share of the machine the simulated nodes may take.
SHARE = 0.5


@dataclass(frozen=True)
class MachineLimit:
    """The most simulated nodes this machine holds, and what each resource allows."""

    by_memory: int | None  # None: unknown here (no /proc/meminfo)
    by_threads: int | None  # None: no limit on this user's threads
    by_cores: int
    available_bytes: int | None
    threads_left: int | None
    cores: int

    @property
    def nodes(self) -> int:
        return min(n for n in (self.by_memory, self.by_threads, self.by_cores) if n is not None)

    def explain(self) -> str:
        """How the limit was computed, each resource with its source."""
        parts = []
        if self.by_memory is not None and self.available_bytes is not None:
            parts.append(
                f"memory: half of the {self.available_bytes / 2**30:.1f} GiB available (/proc/meminfo MemAvailable), "
                f"less {HEAD_BYTES // 2**20} MiB for the head, at {NODE_BYTES // 2**20} MiB a node -> "
                f"{self.by_memory}"
            )
        if self.by_threads is not None and self.threads_left is not None:
            parts.append(
                f"threads: half of the {self.threads_left} this user may still start (ulimit -u, less those "
                f"running), at {NODE_THREADS} a node -> {self.by_threads}"
            )
        parts.append(
            f"CPU: half of {self.cores} core(s) (os.cpu_count()), at {NODE_CORES * 100:g} % of a core per idle "
            f"node -> {self.by_cores}"
        )
        return "; ".join(parts)


def machine_limit() -> MachineLimit:
    """What this machine holds now (memory and threads change as other programs run)."""
    available = _available_bytes()
    by_memory = None if available is None else max(0, math.floor((available * SHARE - HEAD_BYTES) / NODE_BYTES))
    left = _threads_left()
    by_threads = None if left is None else max(0, math.floor(left * SHARE / NODE_THREADS))
    cores = os.cpu_count() or 1
    by_cores = math.floor(cores * SHARE / NODE_CORES)
    return MachineLimit(by_memory, by_threads, by_cores, available, left, cores)


def too_many(nodes: int, limit: MachineLimit | None = None) -> str | None:
    """Why `nodes` simulated nodes (spares included) are more than this machine holds, or None when they fit."""
    limit = machine_limit() if limit is None else limit
    if nodes <= limit.nodes:
        return None
    return (
        f"{nodes} simulated nodes are more than this machine can hold: at most {limit.nodes}, each node being a "
        f"raylet and its two agents ({limit.explain()}). Simulate fewer nodes; `rlplace plan CONFIG --nodes ...` "
        "plans any size without starting anything"
    )


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _threads_left() -> int | None:
    """Threads this user may still start: RLIMIT_NPROC (which counts threads on Linux) less the threads running on
    the machine (/proc/loadavg's count of scheduling entities, an upper bound of this user's)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        running = 0
    return max(0, soft - running)
