"""A driver that Ctrl-C ends exits 130, as shells and `rlplace run` report an interrupted command.

Python ends a script that an uncaught KeyboardInterrupt stops by SIGINT (status 130 in a shell), but a process that
has joined a Ray cluster exits 1 instead (measured on Ray 2.60: a driver that called `ray.init()` exits 1, with or
without `ray.shutdown()` first; Ray's finalisation ends the process before Python re-raises SIGINT). `rlplace run`
reports its command's status, so a user who pressed Ctrl-C saw a failure. `rlplace.connect()` therefore chains a
`sys.excepthook` that, after the traceback is printed, runs the exit handlers (Ray's shutdown among them) and ends
the process with 130 before Ray's finalisation can make it 1.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from types import TracebackType

#: The status of a process that Ctrl-C ended (128 + SIGINT).
EXIT_INTERRUPTED = 130

_installed = False


def exit_130_on_interrupt() -> None:
    """Chain the hook (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        previous(kind, value, tb)
        if issubclass(kind, KeyboardInterrupt):
            atexit._run_exitfuncs()  # Ray's shutdown, the user's own handlers: as a normal exit runs them
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):  # closed, or a broken pipe: nothing more to say
                    stream.flush()
            os._exit(EXIT_INTERRUPTED)

    sys.excepthook = hook
