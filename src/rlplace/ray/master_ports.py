"""Master ports: the range rlplace takes them from, and finding free ones on this machine.

Master ports come from 20000-32767 by default (`RLPLACE_MASTER_PORT_RANGE=LOW-HIGH` in the driver's
environment changes it): below Linux's ephemeral range, where outgoing connections take their ports, and
above Ray's worker ports. The first free one from 29500 (torchrun's default) up is taken. Used by the
driver (`rlplace.ray.rendezvous`) and by rank 0 of a component Ray placed itself (`rlplace.ray.exchange`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

from rlplace.errors import PlacementError

PORT_RANGE_ENV = "RLPLACE_MASTER_PORT_RANGE"
DEFAULT_PORT_RANGE = (20000, 32767)
FIRST_PORT = 29500


def port_range() -> tuple[int, int]:
    raw = os.environ.get(PORT_RANGE_ENV)
    if not raw:
        return DEFAULT_PORT_RANGE
    try:
        low, high = (int(x) for x in raw.split("-"))
        if not 1024 <= low <= high <= 65535:
            raise ValueError
    except ValueError:
        raise PlacementError(
            f"{PORT_RANGE_ENV}={raw!r} is not a port range LOW-HIGH within 1024-65535 (e.g. 20000-32767)"
        ) from None
    return low, high


def free_ports(count: int, avoid: list[int] | set[int], low: int, high: int, first: int = FIRST_PORT) -> list[int]:
    """`count` distinct ports bindable on this machine, from `first` upward (wrapping within low-high).

    Sockets stay bound until all are found, so the ports are distinct; they are released on return."""
    skip = set(avoid)
    held: list[socket.socket] = []
    found: list[int] = []
    try:
        for port in port_order(low, high, first):
            if port in skip:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("", port))
            except OSError:
                s.close()
                continue
            held.append(s)
            found.append(port)
            if len(found) == count:
                return found
    finally:
        for s in held:
            s.close()
    raise PlacementError(
        f"node {socket.gethostname()}: no {count} free ports in {low}-{high} for MASTER_PORT; set "
        f"{PORT_RANGE_ENV}=LOW-HIGH to a range that has free ports"
    )


def port_order(low: int, high: int, first: int = FIRST_PORT) -> Iterator[int]:
    """The ports of low-high in the order they are tried: from `first` up, then from `low` (`first` outside the
    range: from `low`)."""
    start = first if low <= first <= high else low
    yield from range(start, high + 1)
    yield from range(low, start)
