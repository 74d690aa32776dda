"""The calls a group made and has not handed back yet: what to re-run when a worker moves off a lost node.

A call's result ref is only a promise of the actor it went to; when that actor's node is lost and a spare
takes the worker over, the ref can never resolve, so the group sends the same call (method and arguments)
again to the worker's new actor. That needs the call itself, remembered from when it was sent until its result
is fetched through the group's `get()`. A shrink that removes a worker marks its remembered calls, so that
fetching them raises RanksRemovedError instead of waiting for a worker that is gone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass

#: Calls remembered per group (those fetched with `get()` are forgotten at once; this bounds what refs
#: fetched some other way can hold).
REMEMBERED = 4096


@dataclass
class Call:
    """A call made through a group, remembered until its result is fetched."""

    name: str  # the worker's actor name: who it is across takeovers and renumbering (a resize)
    method: str
    args: tuple
    kwargs: dict
    actor: str  # the id of the actor it was sent to (a worker relaunched after a node loss is another actor)
    node_rank: int | None
    removed: bool = False  # a shrink took the worker out of the group before the call was fetched
    sent: bool = True  # False: the worker was removed while the call waited to be sent: it never ran


class CallMemory:
    """Calls by their result key (`Cluster.result_key`), oldest forgotten first past `limit`. Thread-safe."""

    def __init__(self, limit: int = REMEMBERED):
        self._limit = limit
        self._calls: OrderedDict[bytes, Call] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, key: bytes, call: Call) -> None:
        with self._lock:
            self._calls[key] = call
            while len(self._calls) > self._limit:
                self._calls.popitem(last=False)

    def get(self, key: bytes) -> Call | None:
        with self._lock:
            return self._calls.get(key)

    def forget(self, key: bytes) -> Call | None:
        """The call of `key`, no longer remembered (its result was fetched, or it is being sent again)."""
        with self._lock:
            return self._calls.pop(key, None)

    def removed(self, names: Collection[str]) -> None:
        """The workers `names` left the group (a shrink): their unfetched calls raise RanksRemovedError."""
        with self._lock:
            for call in self._calls.values():
                if call.name in names:
                    call.removed = True
