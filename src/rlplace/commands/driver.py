"""`rlplace run CONFIG [OVERRIDE ...] [--simulate NODES | --address A] -- COMMAND ...`: the user's command as the
job's driver.

Before anything starts, the config is loaded and planned, on the simulated nodes or on the live cluster's
inventory, and the plan is shown (on stderr: stdout is the command's). Then a simulated cluster is started for
`--simulate` (fake GPUs, node ranks and accelerator labels, as `rlplace demo`), or the live cluster's access is
checked (its token found where Ray looks for it, as for every client), and COMMAND runs with:

- `RAY_ADDRESS`: the cluster's GCS address, so `rlplace.connect()` and `ray.init()` join it;
- `RAY_AUTH_MODE` (and `RAY_AUTH_TOKEN` where the cluster requires one): the cluster's token mode, and the token
  `run` checked, as a value (a file read again later could have been swapped meanwhile);
- `RLPLACE_CONFIG`, `RLPLACE_OVERRIDES` (`rlplace.config.driver_env`): `rlplace.connect()` with no argument
  plans this config, with these overrides, as `run` did.

Its stdin, stdout and stderr are this process's, and its exit status is `run`'s (128 + N when a signal N ended
it, as shells report it). Ctrl-C reaches the command (from the terminal, or passed on when it was sent to `run`
alone; SIGTERM too) and `run` waits for it to end, then sends SIGTERM, then SIGKILL, `STOP_GRACE_S` apart; a
simulated cluster is stopped when the command ends, however it ends, and its Ray session's processes checked
gone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rlplace.errors import ConfigError, RlplaceError
from rlplace.model import JobSpec

#: How long the command may take to end after Ctrl-C (or SIGTERM), then after SIGTERM, before the next step.
STOP_GRACE_S = 10.0
#: The exit status of a command that could not be started: as shells report a command not found.
EXIT_NOT_STARTED = 127


def run_command(args: argparse.Namespace, spec: JobSpec, command: Sequence[str]) -> int:
    """Plan, start (or join), run `command` as the job's driver, stop what was started; the command's status."""
    from rlplace.config.driver_env import driver_environment

    _check_configured_address(spec, args)
    driver_env = driver_environment(args.config, args.overrides)
    say = _say()
    stopper = _Stopper()
    with stopper.installed():
        if args.simulate:
            from rlplace.ray.local_raylets import simulated_cluster, simulated_inventory

            nodes = simulated_inventory(args.simulate)
            _show(spec, nodes, say)
            _check_runnable(command[0])
            say.print(f"rlplace: starting a simulated cluster of {args.simulate} (logical GPUs) ...")
            cluster = None
            try:
                with simulated_cluster(nodes, connect=False) as cluster:
                    env = {"RAY_ADDRESS": cluster.address, "RAY_AUTH_MODE": "disabled", **driver_env}
                    return _drive(command, env, stopper, say)
            finally:
                if cluster is not None:
                    left = (
                        f"; had to kill: {', '.join(cluster.killed)}"
                        if cluster.killed
                        else ", none of its processes left"
                    )
                    say.print(f"rlplace: simulated cluster stopped{left}")
        address, token_env = _join_live(spec, args.address, say)
        _check_runnable(command[0])
        return _drive(command, {"RAY_ADDRESS": address, **token_env, **driver_env}, stopper, say)


def _say() -> Any:
    from rlplace.viz.console import console

    return console(stderr=True)


def _show(spec: JobSpec, inventory: Any, say: Any) -> None:
    """Plan on `inventory` (a plan that cannot fit stops here, before anything starts) and print it, values the
    config reads from the environment written as in the config (`rlplace plan` without --show-env)."""
    from rlplace.planner import capacity, plan
    from rlplace.viz.shown import shown_plan
    from rlplace.viz.table import render

    result = capacity.checked(plan(spec, inventory), inventory)
    say.print(render(shown_plan(result, spec.from_env), inventory))


def _join_live(spec: JobSpec, address: str | None, say: Any) -> tuple[str, dict[str, str]]:
    """Join the live cluster (within seconds, or an error naming the address), plan on its nodes, leave it again;
    the GCS address and the token variables the command joins with."""
    from rlplace.ray import auth
    from rlplace.ray.join import address_to_join, join
    from rlplace.ray.nodes import live_inventory
    from rlplace.ray.ray_port import RAY

    access = join(address_to_join(address, spec) or "auto")
    try:
        inventory = live_inventory()
        say.print(f"rlplace: planning on the live Ray cluster at {access.address}: {len(inventory)} node(s)")
        _show(spec, inventory, say)
    finally:
        RAY.disconnect()
    token = auth.ray_start_environment(access.token)  # the cluster's mode, and the token run checked
    return access.address, {k: v for k, v in token.items() if v is not None}


def _check_configured_address(spec: JobSpec, args: argparse.Namespace) -> None:
    """A config that writes `ray_address: HOST:PORT` (RLightning's key) is joined only where the user sends `run`
    too: the command's `connect()` refuses a configured address that $RAY_ADDRESS does not name, so with
    --simulate, or another --address, it would fail after the cluster started. Refused here, before anything runs
    (without either, `_join_live` refuses it: rlplace.ray.join.address_to_join)."""
    from rlplace.ray.join import configured_address_problem

    configured = spec.ray_address
    if configured in (None, "auto") or not (args.simulate or (args.address and args.address != configured)):
        return
    raise ConfigError(
        configured_address_problem(spec, "the simulated cluster" if args.simulate else f"--address {args.address}")
    )


def _check_runnable(program: str) -> None:
    """A command that cannot be started is refused before any cluster starts for it."""
    found = shutil.which(program)
    if found is None:
        why = "no such file" if os.sep in program else "not found on PATH"
        raise RlplaceError(f"cannot run {program!r}: {why} (the command after -- is started without a shell)")


def _drive(command: Sequence[str], env: Mapping[str, str], stopper: _Stopper, say: Any) -> int:
    """Run `command` with `env` added to this environment, wait for it (through Ctrl-C), return its status."""
    if stopper.signalled is not None:  # Ctrl-C while the cluster started: the command never runs
        return 128 + stopper.signalled
    from rlplace.ray.auth import AUTH_ENV_VARS, TOKEN_ENV

    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k not in AUTH_ENV_VARS)
    if TOKEN_ENV in env:
        shown += " and the cluster's token"
    say.print(f"rlplace: running {shlex.join(command)} with {shown}", highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        proc = subprocess.Popen(list(command), env={**os.environ, **env})
    except OSError as e:
        say.print(f"rlplace: cannot run {command[0]!r}: {e.strerror or e}", highlight=False)
        return EXIT_NOT_STARTED
    return stopper.wait(proc)


#: The signals `run` passes on to its command.
PASSED_ON = (signal.SIGINT, signal.SIGTERM)
#: Linux's si_code of a signal the kernel sent (the terminal's Ctrl-C), as against a process's kill() (SI_USER).
SI_KERNEL = 0x80


class _Stopper:
    """While `run` runs: Ctrl-C and SIGTERM are recorded and passed to the command, never raised in `run` (so
    that stopping the simulated cluster is never cut short); `wait` ends the command in steps when it does not
    end by itself.

    A Ctrl-C typed at the terminal reaches the command by itself (one foreground process group), so it is not
    sent again (a second one would interrupt the command's own clean-up); one sent to `run` alone (`kill -INT`)
    is passed on. Where Linux says who sent a signal (`sigtimedwait`'s si_code) that decides; before the command
    starts, and elsewhere, a SIGINT counts as the terminal's when `run` is in the terminal's foreground group.
    """

    def __init__(self) -> None:
        self.signalled: int | None = None
        self._at = 0.0
        self._proc: subprocess.Popen | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        saved = {s: signal.signal(s, self._handle) for s in PASSED_ON}
        try:
            yield
        finally:
            for s, handler in saved.items():
                signal.signal(s, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self._received(signum, from_terminal=signum == signal.SIGINT and _in_the_foreground())

    def _received(self, signum: int, *, from_terminal: bool) -> None:
        if self.signalled is None:
            self.signalled, self._at = signum, time.monotonic()
        if self._proc is not None and self._proc.poll() is None and not from_terminal:
            self._proc.send_signal(signum)

    def wait(self, proc: subprocess.Popen) -> int:
        """The command's exit status; after a signal, SIGTERM then SIGKILL once each grace period has passed."""
        self._proc = proc
        steps = [signal.SIGTERM, signal.SIGKILL]
        told = hasattr(signal, "sigtimedwait")  # Linux: wait for the signals themselves, with who sent them
        if told:
            signal.pthread_sigmask(signal.SIG_BLOCK, PASSED_ON)
        try:
            while (code := proc.poll()) is None:
                if told:
                    info = signal.sigtimedwait(PASSED_ON, 0.2)
                    if info is not None:
                        self._received(info.si_signo, from_terminal=info.si_code == SI_KERNEL)
                else:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=0.2)
                if self.signalled is not None and steps and time.monotonic() - self._at > STOP_GRACE_S:
                    proc.send_signal(steps.pop(0))
                    self._at = time.monotonic()
        finally:
            if told:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)
        return 128 - code if code < 0 else code


def _in_the_foreground() -> bool:
    """Whether `run` is in the foreground process group of its terminal (a Ctrl-C typed there reached the
    command too)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY)
    except OSError:  # no controlling terminal: the signal was sent to `run` alone
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """`run CONFIG ... -- COMMAND ...` -> (the words before `--`, COMMAND); None when there is no `--`."""
    words = list(argv)
    if "--" not in words:
        return words, None
    i = words.index("--")
    return words[:i], words[i + 1 :]
