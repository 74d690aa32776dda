"""Pause the cyclic garbage collector while building large acyclic results.

Why: a 4,096-node plan creates ~100k workers (and the JSON view as many dicts); each allocation burst
triggers full collections that find nothing to free and triple the time (docs/planner.md, measured).
The objects built here hold no reference cycles, so reference counting frees them as usual.

When collection resumes, every object made meanwhile is young: the first collection would scan them all
(about a third of a 100k-worker plan's time), and the next two generations again later. So they are handed
straight to the oldest generation (`gc.freeze()` then `gc.unfreeze()`, two list moves), where only the rare full
collections look at them; young garbage of the caller's moves there with them, to be collected by the next full
collection. A caller that froze objects itself (`gc.get_freeze_count()`) keeps them frozen: then nothing moves.
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
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
