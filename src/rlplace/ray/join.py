"""Joining a running Ray cluster: within seconds, or an error saying why; never starting one by accident.

Ray alone retries an unreachable GCS for more than a minute and turns "auto" with nothing running into a
ConnectionError traceback; `join()` checks the head's port first. The live inventory of the joined cluster
is `rlplace.ray.nodes`.
"""

from __future__ import annotations

import os
import socket

from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.model import JobSpec
from rlplace.ray import _compat
from rlplace.ray.auth import Access, authenticate
from rlplace.ray.labels import LOOPBACK_ENV
from rlplace.ray.ray_port import RAY

JOIN_TIMEOUT_S = 3.0  # a head that does not accept a TCP connection in this time is not there
START_HEAD = "rlplace start --head --node-rank 0"
JOIN_HINT = f"start one with `{START_HEAD}`, or pass --address HOST:PORT of a running head node"


def address_to_join(given: str | None, spec: JobSpec | None = None) -> str | None:
    """Where to connect: `given` (`connect(address=...)`, `--address`), else "auto" when $RAY_ADDRESS is set or the
    config writes `ray_address: auto`; None when nothing says (`connect()` then lets `ray.init()` find or start a
    cluster, the CLI joins "auto").

    A config's `ray_address: HOST:PORT` (RLightning's key) is never joined on its own say: joining presents the
    user's Ray token, and a config may come from anyone (docs/guide.md, "Security"). It is joined only when the
    user names the same address ($RAY_ADDRESS, or `given`, which wins anyway); otherwise a ConfigError says how to
    join it on purpose. `local` is passed on, and refused by `reachable_address` as starting a cluster."""
    if given:
        return given
    configured = spec.ray_address if spec is not None else None
    named = os.environ.get("RAY_ADDRESS") or None
    if configured in (None, "auto"):
        return "auto" if named or configured else None
    if configured == "local":
        return configured
    if configured == named:
        return "auto"
    assert spec is not None and configured is not None
    raise ConfigError(configured_address_problem(spec, None))


def configured_address_problem(spec: JobSpec, joining: str | None) -> Problem:
    """The problem with a config whose `ray_address` names a cluster the user did not (`joining`: what the command
    joins instead, e.g. "the simulated cluster"; None: nothing else). Shows the address as written (an address from
    `${oc.env:...}` stays unresolved)."""
    assert spec.ray_address is not None
    shown = next((e.written for e in spec.from_env if e.path.endswith("ray_address")), spec.ray_address)
    instead = f", and this command joins {joining}" if joining else ""
    return Problem(
        path="cluster.ray_address",
        value=shown,
        file=spec.written_at("ray_address"),
        message=f"the config names {shown} as the Ray cluster to join{instead}; rlplace joins a cluster, and presents "
        "your Ray token to it, only where you send it: to join it, pass --address (rlplace run, plan, status), "
        "connect(address=...) or set $RAY_ADDRESS to it; or write `ray_address: auto` (the cluster --address or "
        "$RAY_ADDRESS names)",
    )


def reachable_address(address: str, *, hint: str = JOIN_HINT) -> str:
    """The HOST:PORT of the Ray head `address` names ("auto", HOST:PORT), once its port accepts a connection.

    Fails within JOIN_TIMEOUT_S with an RlplaceError naming the address as typed (and what Ray resolved it
    to, when that differs: Ray turns 127.0.0.1 into the node's IP): Ray alone retries an unreachable GCS
    for more than a minute, and "auto" with nothing running ends in a ConnectionError traceback.
    """
    typed = address
    if address == "auto":
        env = os.environ.get("RAY_ADDRESS")
        typed = f"RAY_ADDRESS={env}" if env else "auto (the cluster started on this machine)"
    try:
        resolved = _compat.bootstrap_address(address)
    except ConnectionError:
        raise RlplaceError(
            f"no Ray cluster to join: address auto finds none running on this machine and $RAY_ADDRESS is not "
            f"set; {hint}"
        ) from None
    except ValueError:
        raise RlplaceError(f"{address!r} is not a Ray address: write HOST:PORT (e.g. 10.0.0.1:6379) or auto") from None
    if resolved is None:  # "local": Ray would start a new cluster, which joining must never do
        raise RlplaceError(f"address {address!r} asks Ray to start a new cluster, not to join one; {hint}")
    host, _, port = resolved.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=JOIN_TIMEOUT_S).close()
    except (OSError, ValueError) as e:
        tried = "" if resolved == address else f"tried {resolved}: "
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        if _listens_on_loopback_only(address, resolved):
            hint = f"the head listens on 127.0.0.1 only (--node-ip-address 127.0.0.1): set {LOOPBACK_ENV}=0 here"
        raise RlplaceError(f"no Ray cluster reachable at {typed} ({tried}{reason}); {hint}") from None
    return resolved


def _listens_on_loopback_only(typed: str, resolved: str) -> bool:
    """Ray turned a typed 127.0.0.1 into this machine's address, where nothing listens, but 127.0.0.1 answers: a
    head started on loopback (see LOOPBACK_ENV)."""
    host, _, port = typed.rpartition(":")
    if host not in ("127.0.0.1", "localhost") or resolved == typed or not port.isdigit():
        return False
    try:
        socket.create_connection((host, int(port)), timeout=JOIN_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def join(address: str, *, hint: str = JOIN_HINT, quiet: bool = True) -> Access:
    """Join an existing cluster, failing within seconds; never start one (ray.init without an address would).

    A cluster that requires a token is joined with the token found where Ray looks for it (rlplace.ray.auth); a
    missing or refused token is a ClusterAccessError within seconds, where Ray alone would retry for 20 s.
    `quiet` (the CLI): Ray logs only errors and the workers' output stays in the cluster's log files, since
    the CLI prints plans and reports instead; the Python API keeps Ray's defaults (worker output shown).
    """
    resolved = reachable_address(address, hint=hint)
    access = authenticate(resolved)
    options = dict(logging_level="ERROR", log_to_driver=False, configure_logging=False) if quiet else {}
    try:
        RAY.connect(resolved, **options)
    except (ConnectionError, RuntimeError) as e:
        raise RlplaceError(f"could not join the Ray cluster at {resolved}: {e}") from None
    return access


def named_address(given: str | None, spec: JobSpec | None = None) -> str:
    """The cluster `rlplace run` joins: the one the user named (`--address`, $RAY_ADDRESS; `--address auto`: the one
    running on this machine, on purpose), as `address_to_join` tells. With none named, a cluster that happens to run
    on this machine (another user's, a test's) is not joined: a ConfigError names it and how to join it, or to
    simulate one."""
    address = address_to_join(given, spec)
    if address is not None:
        return address
    try:
        found = _compat.bootstrap_address("auto")
    except (ConnectionError, ValueError):
        found = None
    ways = "--simulate NODES (an embedded cluster of its own, e.g. --simulate 2x8) or --address HOST:PORT"
    if found is None:
        message = f"no cluster named: pass {ways} (or set $RAY_ADDRESS)"
    else:
        message = (
            f"not given, and a Ray cluster runs on this machine (head at {found}); rlplace run joins only a cluster "
            f"you name: --address {found} (or --address auto: the cluster running here) to run there, or --simulate "
            "NODES for an embedded cluster of its own (e.g. --simulate 2x8)"
        )
    raise ConfigError(Problem(path="--address", value=None, message=message))
