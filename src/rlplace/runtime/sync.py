"""Weight sync from train workers to eval workers through Ray's object store.

One object per source rank per sync, whatever the number of eval workers: the train worker's return
value is stored once in its node's object store and every eval worker receives a reference to that
same object, so Ray moves it at most once per node (peers that `ray.put` per target, or send through
the driver, copy it once per worker). The driver never fetches the weights.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rlplace.errors import ConfigError, Problem
from rlplace.runtime.calls import Group


@dataclass(frozen=True)
class SyncReport:
    """What one sync did: which train ranks were read, how many objects and eval workers, how long."""

    sources: tuple[int, ...]
    objects: int
    targets: int
    seconds: float


def sync_weights(
    train: Group,
    targets: Sequence[Group],
    *,
    source: Literal["rank0", "all"] = "rank0",
    get_method: str = "get_weights",
    set_method: str = "set_weights",
) -> SyncReport:
    """Call `get_method()` on train rank 0 (or every rank) once, then `set_method(*weights)` on all targets.

    With `source="all"` (sharded weights, FSDP-style) each target receives one positional argument per
    train rank, in rank order. Returns when every target has applied the weights.
    """
    if source not in ("rank0", "all"):
        raise ConfigError(Problem(path="source", value=source, message="must be 'rank0' or 'all'"))
    start = time.perf_counter()
    sources = train.actors[:1] if source == "rank0" else train.actors
    weights = [getattr(actor, get_method).remote() for actor in sources]
    applied = [[getattr(actor, set_method).remote(*weights) for actor in group.actors] for group in targets]
    train.get(weights, get_method)  # first, so a train-side failure is reported under the train worker's name
    for group, refs in zip(targets, applied, strict=True):
        group.get(refs, set_method)
    return SyncReport(
        sources=tuple(w.rank for w in train.workers[: len(sources)]),
        objects=len(weights),
        targets=sum(len(g.actors) for g in targets),
        seconds=time.perf_counter() - start,
    )
