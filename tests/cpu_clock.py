"""The clocks of the tests that bound how much work rlplace does on bad input (a refusal in well under a second).

They count CPU seconds, not wall seconds: `make test` runs them at the lowest priority beside the Ray tests (the
Makefile), where a refusal that does its few milliseconds of work may wait seconds for a core. What they guard
against is work (a config expanded to millions of values, a Hydra tree composed 1,728 times), which CPU seconds
count wherever the test runs; a hang that does no work is what each subprocess's timeout catches.

Two clocks, so that nothing else is counted: work done in this process is the calling thread's (a pytest-xdist
worker has other threads), and a subprocess's is that of the children waited for. A fresh `make test` run counted
1.25 s for a refusal that takes 0.13 s, with the whole process's and its children's seconds: whatever else the
worker's threads did meanwhile counted, and so did any child reaped meanwhile (an earlier test's Popen, collected
as garbage, reaps its child then).
"""

from __future__ import annotations

import gc
import resource
import time


def cpu_seconds() -> float:
    """CPU seconds, user and system, of the calling thread so far: what a call made in this process costs."""
    return time.thread_time()


def child_cpu_seconds() -> float:
    """CPU seconds, user and system, of this process's children waited for so far: what a subprocess cost, read
    before it starts and once it has been waited for. Garbage is collected first, so that a Popen an earlier test
    left behind reaps its child now and not during the measurement."""
    gc.collect()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime
