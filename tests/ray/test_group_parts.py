"""The two parts a WorkerGroup delegates to, alone: the resize gate and the memory of calls to re-run (no Ray)."""

from __future__ import annotations

import threading

from rlplace.ray.calls import Call, CallMemory
from rlplace.ray.gate import ResizeGate


def _call(name: str) -> Call:
    return Call(name, "step", (), {}, "actor-1", 0)


def test_a_resize_waits_for_the_call_being_sent_and_a_call_waits_for_the_resize():
    gate, order = ResizeGate(), []
    sending, resized = threading.Event(), threading.Event()
    release_sender = threading.Event()

    def send() -> None:
        with gate.sending():
            sending.set()
            release_sender.wait(10)
            order.append("sent")

    def resize() -> None:
        with gate.pause():
            order.append("resized")
            resized.set()

    sender = threading.Thread(target=send)
    sender.start()
    sending.wait(10)
    resizer = threading.Thread(target=resize)
    resizer.start()
    assert not resized.wait(0.2)  # the resize cannot start while the call is being sent
    release_sender.set()
    resizer.join(10)
    sender.join(10)
    assert order == ["sent", "resized"]

    def call_late() -> None:
        with gate.sending():
            order.append("late call")

    with gate.pause():  # a call made during a resize waits until the resize ends
        late = threading.Thread(target=call_late)
        late.start()
        late.join(0.2)
        assert late.is_alive() and order[-1] == "resized"
    late.join(10)
    assert order[-1] == "late call"


def test_calls_are_remembered_until_fetched_and_the_oldest_go_past_the_limit():
    memory = CallMemory(limit=2)
    for key in (b"a", b"b", b"c"):
        memory.remember(key, _call(key.decode()))
    assert memory.get(b"a") is None and memory.get(b"b") is not None
    assert memory.forget(b"b").name == "b" and memory.get(b"b") is None


def test_a_shrink_marks_only_the_removed_workers_calls():
    memory = CallMemory()
    memory.remember(b"1", _call("rlplace:eval:1"))
    memory.remember(b"2", _call("rlplace:eval:2"))
    memory.removed({"rlplace:eval:2"})
    assert (memory.get(b"1").removed, memory.get(b"2").removed) == (False, True)
