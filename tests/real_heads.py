"""Real Ray heads and nodes started the way a user starts them (`rlplace start`), for the token tests.

Each runs on this machine only, on a free port, with a private Ray temp dir and a private HOME (so its token
file and `rlplace start`'s records stay in the test's directory, and ~/.ray/auth_token is never touched); no
RAY_ADDRESS or RAY_AUTH_* variable of the test process reaches it. Every process it starts carries TEST_MARK in
its environment and is stopped by pid (`kill_marked`), whatever `rlplace stop` did.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass

from rlplace.commands import local_nodes
from rlplace.ray.auth import AUTH_ENV_VARS

RLPLACE = str(pathlib.Path(sys.executable).with_name("rlplace"))
#: Set in the environment of every process these helpers start, with a value of its own per start.
TEST_MARK = "RLPLACE_TEST_PROCESS"
#: Left out of every child's environment: where Ray would connect, and the token the test process may hold.
_NOT_INHERITED = ("RAY_ADDRESS", local_nodes.MARKER_ENV, *AUTH_ENV_VARS)
#: Small nodes: logical GPUs (nothing real), a 100 MB object store; heads without dashboard.
NODE_ARGS = ("--object-store-memory=100000000",)
HEAD_ARGS = ("--include-dashboard=false", "--disable-usage-stats")


@dataclass(frozen=True)
class Started:
    """A node `rlplace start` started: its address, HOME, marker, output and how long the start took."""

    address: str
    home: pathlib.Path
    mark: str
    temp_dir: str
    returncode: int
    output: str
    seconds: float

    @property
    def token_file(self) -> pathlib.Path:
        return self.home / ".ray" / "auth_token"

    def processes(self) -> list[tuple[int, str]]:
        return local_nodes.marked_processes(TEST_MARK, self.mark)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(home: pathlib.Path, mark: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child: the test process's, without Ray's address and token variables, with `home`."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env.update(HOME=str(home), **extra)
    if mark is not None:
        env[TEST_MARK] = mark
    return env


def run(
    argv: list[str], home: pathlib.Path, timeout: float = 120, **extra: str
) -> tuple[subprocess.CompletedProcess, float]:
    """Run a command as a user on this machine would (HOME=`home`, and there: what it writes into its folder, such as
    `rlplace run`'s picture, stays out of the checkout), marked; returns it and its seconds."""
    started = time.monotonic()
    done = subprocess.run(
        argv,
        env=environment(home, uuid.uuid4().hex, **extra),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, time.monotonic() - started


def start(
    home: pathlib.Path,
    *flags: str,
    address: str | None = None,
    cpus: int = 8,
    gpus: int = 8,
    ray_args: tuple[str, ...] = (),
    **env: str,
) -> Started:
    """`rlplace start --head FLAGS` (or `--address ADDRESS FLAGS`) with HOME=`home`, `ray_args` after the `--` and
    `env` added to its environment; the caller stops it."""
    mark = uuid.uuid4().hex
    temp_dir = tempfile.mkdtemp(prefix="rlp-", dir="/tmp")  # short: Ray's socket paths live under it
    port = free_port()
    role = ["--head", *flags, "--", f"--port={port}"] if address is None else ["--address", address, *flags, "--"]
    passed = [f"--temp-dir={temp_dir}", f"--num-cpus={cpus}", f"--num-gpus={gpus}", *NODE_ARGS, *ray_args]
    passed += HEAD_ARGS if address is None else ()
    began = time.monotonic()
    argv = [RLPLACE, "start", *role, *passed]
    done = subprocess.run(argv, env=environment(home, mark, **env), capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - began
    at = f"127.0.0.1:{port}" if address is None else address  # loopback; Ray resolves it to this node's IP
    return Started(at, home, mark, temp_dir, done.returncode, done.stdout + done.stderr, seconds)


def records_dir(home: pathlib.Path) -> pathlib.Path:
    """Where `rlplace start` run with HOME=`home` records its nodes."""
    return home / ".rlplace" / "started"


def kill_marked(node: Started) -> None:
    """Stop every process `node`'s start left, by pid (raylet, then the others, then the GCS)."""
    local_nodes.end_marked(TEST_MARK, node.mark, grace_s=6.0)
    shutil.rmtree(node.temp_dir, ignore_errors=True)
