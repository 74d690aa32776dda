"""The clock of the tests that bound how much work rlplace does on bad input (a refusal in well under a second).

They count CPU seconds, this process's and those of the children it has waited for, not wall seconds: `make test`
runs them at the lowest priority beside the Ray tests (the Makefile), where a refusal that does its few
milliseconds of work may wait seconds for a core. What they guard against is work (a config expanded to millions of
values, a Hydra tree composed 1,728 times), which CPU seconds count wherever the test runs; a hang that does no work
is what each subprocess's timeout catches.
"""

from __future__ import annotations

import resource


def cpu_seconds() -> float:
    """CPU seconds, user and system, of this process and of its children waited for, so far."""
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime
