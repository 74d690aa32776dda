"""The gate between a group's calls and a resize of its component.

A resize changes who the members are (ranks renumbered, workers added or removed); a call fanned out over
the members must see one consistent set. So a call is sent only while no resize holds the gate, and a resize
first waits until the calls being sent are sent (never until they finish: an actor runs its calls in order,
and a resize that waited for results could wait forever on a hung one). The members themselves are read and
changed under `lock`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ResizeGate:
    def __init__(self) -> None:
        self.lock = threading.Condition(threading.RLock())  # guards the members; notified when a pause ends
        self._paused = 0  # resizes under way (they change the members)
        self._senders = 0  # threads sending calls

    @contextmanager
    def pause(self) -> Iterator[None]:
        """Calls made meanwhile wait until the block ends; calls being sent when it starts are sent first."""
        with self.lock:
            self._paused += 1
            while self._senders:
                self.lock.wait()
        try:
            yield
        finally:
            with self.lock:
                self._paused -= 1
                self.lock.notify_all()

    @contextmanager
    def open(self) -> Iterator[None]:
        """Holds `lock` once no resize is under way: the members are as they will stay while it is held."""
        with self.lock:
            while self._paused:
                self.lock.wait()
            yield

    @contextmanager
    def sending(self) -> Iterator[None]:
        """While calls are being sent (never waiting on anything but the sending): no resize starts, and one
        that is under way first ends. Does not hold `lock` meanwhile."""
        with self.open():
            self._senders += 1
        try:
            yield
        finally:
            with self.lock:
                self._senders -= 1
                self.lock.notify_all()
