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
from rlplace.runtime.calls import Group, gather


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
    train_calls = list(zip(train.workers, train.actors, strict=True))
    if source == "rank0":
        train_calls = train_calls[:1]
    weights = [getattr(actor, get_method).remote() for _, actor in train_calls]
    target_calls = [call for group in targets for call in zip(group.workers, group.actors, strict=True)]
    done = [getattr(actor, set_method).remote(*weights) for _, actor in target_calls]
    gather(done, target_calls)
    gather(weights, train_calls)  # already resolved; surfaces a train-side failure with its worker's name
    return SyncReport(
        sources=tuple(w.rank for w, _ in train_calls),
        objects=len(weights),
        targets=len(target_calls),
        seconds=time.perf_counter() - start,
    )
