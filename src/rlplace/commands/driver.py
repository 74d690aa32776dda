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
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rlplace.errors import CommandError, ConfigError
from rlplace.model import JobSpec
from rlplace.plan import Plan

#: How long the command may take to end after Ctrl-C (or SIGTERM), then after SIGTERM, before the next step.
STOP_GRACE_S = 10.0
#: The exit status of a command that could not be started: as shells report a command not found.
EXIT_NOT_STARTED = 127


def run_command(args: argparse.Namespace, spec: JobSpec, command: Sequence[str]) -> int:
    """Plan, start (or join), run `command` as the job's driver, stop what was started; the command's status.

    Ctrl-C (or SIGTERM) before the command starts stops `run` at once: a simulated cluster being started is
    killed, its processes checked gone, and `run` exits 130."""
    from rlplace.config.driver_env import driver_environment
    from rlplace.planner.profile_record import check_profile_request

    _check_configured_address(spec, args)
    check_profile_request(args.profile_out, args.profile_phase, spec)
    driver_env = driver_environment(args.config, args.overrides)
    say = _say()
    stopper = _Stopper()
    with stopper.installed(), tempfile.TemporaryDirectory(prefix="rlplace-run-") as private:
        try:
            if args.simulate:
                return _run_simulated(args, spec, command, {**driver_env}, private, stopper, say)
            address, token_env, handed, planned, inventory = _join_live(spec, args, command, private, say)
            code = _drive(command, {"RAY_ADDRESS": address, **token_env, **driver_env, **handed}, stopper, say)
            return _write_profile(args, spec, planned, inventory, handed, code, say)
        except KeyboardInterrupt as e:  # only before the command started: the stopper raises it then
            from rlplace.ray.local_raylets import StartInterrupted

            said = e.describe() if isinstance(e, StartInterrupted) else "nothing had started"
            say.print(f"rlplace: interrupted before the command started; {said}", highlight=False)
            return EXIT_INTERRUPTED


#: `run`'s status when Ctrl-C stopped it before the command started (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 128 + signal.SIGINT


def _run_simulated(
    args: argparse.Namespace,
    spec: JobSpec,
    command: Sequence[str],
    driver_env: dict[str, str],
    private: str,
    stopper: _Stopper,
    say: Any,
) -> int:
    """Plan on the simulated nodes and show it, start them, run the command on that plan, stop them."""
    from rlplace.ray.local_raylets import check_machine_holds, simulated_cluster, simulated_inventory

    nodes = simulated_inventory(args.simulate)
    check_machine_holds(len(nodes), args.simulate, "--simulate")  # at once: before anything is planned or started
    planned = _show(spec, nodes, say, args)
    _check_runnable(command)
    handed = _handoff(planned, nodes, private, args)
    say.print(f"rlplace: starting a simulated cluster of {args.simulate} (logical GPUs) ...")
    cluster = None
    try:
        with simulated_cluster(nodes, connect=False, on_interrupt=_exit_interrupted(say, private)) as cluster:
            env = {"RAY_ADDRESS": cluster.address, "RAY_AUTH_MODE": "disabled", **driver_env, **handed}
            code = _drive(command, env, stopper, say)
    finally:
        if cluster is not None:
            left = f"; had to kill: {', '.join(cluster.killed)}" if cluster.killed else ", none of its processes left"
            say.print(f"rlplace: simulated cluster stopped{left}")
    return _write_profile(args, spec, planned, nodes, handed, code, say)


def _handoff(planned: Plan, inventory: Any, private: str, args: argparse.Namespace) -> dict[str, str]:
    """The variables that hand the command the plan, and with --profile-out where its Job writes its phase times."""
    from rlplace.ray.handoff import phase_times_handoff, write_handoff

    handed = write_handoff(planned, inventory, private)
    return {**handed, **phase_times_handoff(private)} if args.profile_out else handed


def _write_profile(
    args: argparse.Namespace,
    spec: JobSpec,
    planned: Plan,
    inventory: Any,
    handed: Mapping[str, str],
    code: int,
    say: Any,
) -> int:
    """With --profile-out, the profile of the phases the command's Job finished (planner/profile_record.py); when
    none did, no file but a line saying why, and exit 1 where the command itself succeeded. Else the command's
    status."""
    if not args.profile_out:
        return code
    from rlplace.commands.arguments import invoked
    from rlplace.errors import RlplaceError
    from rlplace.phases import PhaseTimes
    from rlplace.planner.profile_record import recorded_profile, write_profile
    from rlplace.ray.handoff import phase_times_path

    path = phase_times_path(handed)
    times = PhaseTimes.read(path) if path else None
    try:
        recorded = recorded_profile(
            planned,
            inventory,
            times.seconds if times else {},
            times.memory_gb if times else {},
            mapping=dict(args.profile_phase),
            model_bytes=spec.model_bytes,
            written_by=invoked(args),
        )
    except RlplaceError as e:
        say.print(f"rlplace: {args.profile_out} not written: {e}", highlight=False, soft_wrap=True)
        return code or 1
    written = write_profile(args.profile_out, recorded)
    say.print(f"rlplace: {recorded.describe(written, args.config)}", highlight=False, soft_wrap=True)
    return code


def _exit_interrupted(say: Any, private: str) -> Callable[[Any], None]:
    """What `run` does when Ctrl-C stopped a simulated cluster's start (`StartInterrupted`, in the thread that
    killed its processes): say so, remove the handed plan, and exit 130 at once (Ray's start-up would hold the main
    thread for half a minute more)."""

    def exit_now(e: Any) -> None:
        say.print(f"rlplace: interrupted before the command started; {e.describe()}", highlight=False)
        shutil.rmtree(private, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)

    return exit_now


def _say() -> Any:
    from rlplace.viz.console import console

    return console(stderr=True)


def _show(spec: JobSpec, inventory: Any, say: Any, args: argparse.Namespace) -> Plan:
    """Plan on `inventory` (a plan that cannot fit stops here, before anything starts) and show it as every run
    does (`rlplace.viz.preview`: the table, the estimate line, the picture in --out), values the config reads
    from the environment written as in the config (`rlplace plan` without --show-env); the plan itself."""
    from rlplace.planner import capacity, plan
    from rlplace.viz.preview import show_plan
    from rlplace.viz.shown import shown_plan

    result = capacity.checked(plan(spec, inventory), inventory)
    args.out.mkdir(parents=True, exist_ok=True)
    show_plan(say, shown_plan(result, spec.from_env), inventory, args.out / PICTURE_STEM)
    return result


#: The picture's file names in --out, as the bundled pipeline's under `rlplace run` (topology.svg, .html).
PICTURE_STEM = "topology"


def _join_live(
    spec: JobSpec, args: argparse.Namespace, command: Sequence[str], private: str, say: Any
) -> tuple[str, dict[str, str], dict[str, str], Plan, Any]:
    """Join the live cluster the user named (within seconds, or an error naming the address), plan on its nodes,
    leave it again; the GCS address, the token variables the command joins with, the handed plan's, the plan and
    the nodes it was made for."""
    from rlplace.ray import auth
    from rlplace.ray.join import join, named_address
    from rlplace.ray.nodes import live_inventory
    from rlplace.ray.ray_port import RAY

    access = join(named_address(args.address, spec))
    try:
        inventory = live_inventory()
        say.print(f"rlplace: planning on the live Ray cluster at {access.address}: {len(inventory)} node(s)")
        planned = _show(spec, inventory, say, args)
    finally:
        RAY.disconnect()
    _check_runnable(command)  # after the plan is shown, as with --simulate
    token = auth.ray_start_environment(access.token)  # the cluster's mode, and the token run checked
    handed = _handoff(planned, inventory, private, args)
    return access.address, {k: v for k, v in token.items() if v is not None}, handed, planned, inventory


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


def _check_runnable(command: Sequence[str]) -> None:
    """A command that cannot be started is refused before any cluster starts for it: a program not found, or a
    Python interpreter told to run a script that does not exist (it would start, then fail with exit 2)."""
    program = command[0]
    if shutil.which(program) is None:
        why = "no such file" if os.sep in program else "not found on PATH"
        raise CommandError(f"cannot run {program!r}: {why} (the command after -- is started without a shell)")
    script = _script_of(command)
    if script is not None and not os.path.isfile(script):
        where = "" if os.path.isabs(script) else f" in {os.getcwd()}"
        raise CommandError(
            f"cannot run {shlex.join(command)}: the script {script!r} does not exist{where} (no such file); check "
            "its path (relative paths start where `rlplace run` runs)"
        )


def _script_of(command: Sequence[str]) -> str | None:
    """The script a Python interpreter is told to run (`python train.py`, `python -u train.py --lr 1`); None for
    `-m module`, `-c code`, stdin, or another program."""
    if not re.fullmatch(r"python[0-9.]*", os.path.basename(command[0])):
        return None
    words = iter(command[1:])
    for word in words:
        if word in PYTHON_OPTIONS_WITH_VALUE:
            next(words, None)
        elif word == "-" or (word.startswith("-") and not word.startswith("--") and word[-1] in "mc"):
            return None  # stdin, -m module, -c code (also after other flags: -um)
        elif not word.startswith("-"):
            return word
    return None


#: Python's options that take the next word as their value (`python -W ignore train.py`).
PYTHON_OPTIONS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def _drive(command: Sequence[str], env: Mapping[str, str], stopper: _Stopper, say: Any) -> int:
    """Run `command` with `env` added to this environment, wait for it (through Ctrl-C), return its status."""
    if stopper.signalled is not None:  # Ctrl-C while the cluster started: the command never runs
        return 128 + stopper.signalled
    stopper.starting = False  # from here a signal is the command's to handle
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
    """While `run` runs: before the command starts, the first Ctrl-C or SIGTERM stops `run` itself (raised as
    KeyboardInterrupt: a cluster being started is killed at once, `rlplace.ray.local_raylets`); once the command runs,
    they are recorded and passed to the command, never raised in `run` (so that stopping the simulated cluster
    is never cut short); `wait` ends the command in steps when it does not end by itself.

    A Ctrl-C typed at the terminal reaches the command by itself (one foreground process group), so it is not
    sent again (a second one would interrupt the command's own clean-up); one sent to `run` alone (`kill -INT`)
    is passed on. Where Linux says who sent a signal (`sigtimedwait`'s si_code) that decides; before the command
    starts, and elsewhere, a SIGINT counts as the terminal's when `run` is in the terminal's foreground group.
    """

    def __init__(self) -> None:
        self.signalled: int | None = None
        self.starting = True  # until the command is started
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
        first = self.signalled is None
        self._received(signum, from_terminal=signum == signal.SIGINT and _in_the_foreground())
        if self.starting and first:
            raise KeyboardInterrupt

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
