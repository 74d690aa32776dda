"""Pause the cyclic garbage collector while building large acyclic results.

Why: a 4,096-node plan creates ~100k workers (and the JSON view as many dicts); each allocation burst
triggers full collections that find nothing to free and triple the time (docs/planner.md, measured).
The objects built here hold no reference cycles, so reference counting frees them as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
