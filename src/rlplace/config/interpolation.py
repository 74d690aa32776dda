"""How much work resolving a config's interpolations may take: a number of resolutions and of resolved values.

The YAML reader bounds a config's bytes, but interpolations multiply work without bytes: `a1: ${a0}${a0}`,
`a2: ${a1}${a1}`, ... doubles a text per line (20 lines of 388 bytes ask for 16 MiB of text and took more than
30 s), `b1: ${oc.select:b0,${b0}}` resolves `b0` twice per line for a result that never grows (2^23
resolutions for 680 bytes), and `l1: ['${l0}', '${l0}', ...]` makes lists of lists (10^9 items for 8 lines).
So one `Work` per load counts, wherever an interpolation is resolved (rlplace's own following of `${a.b}` in
`values.py`, and OmegaConf's for everything else):

- resolutions: each interpolation evaluated, at most MAX_RESOLUTIONS (what rlplace reads of RLinf's 369 configs
  takes at most 7; OmegaConf took 1-1.5 ms for one of these bombs on the loaded 2-core machine, so 500 are
  refused in 0.4-0.7 s);
- resolved size: the characters of the texts and the items of the lists and mappings they produce, at most
  MAX_RESOLVED (a config is at most 1 MiB, `yaml_source.MAX_BYTES`; its values resolved need not be more).

The first one gone over stops the resolution: `Exhausted` is raised from the next step, and the reader reports
the limit once, at the key it was reading.

OmegaConf has no budget of its own; its one seam for resolving an interpolation is `Container.resolve_parse_tree`
(omegaconf/base.py, every interpolation of every node goes through it, nested ones included), which `counting`
wraps while a block runs: the wrapper counts only for the thread (context) that opened the block, and is
removed when the last block ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf.base import Container, DictKeyType

MAX_RESOLUTIONS = 500
MAX_RESOLVED = 2**20


class Exhausted(Exception):
    """The work of resolving interpolations went over a limit (the message names it)."""


class Work:
    """What the interpolations of one load took so far."""

    def __init__(self) -> None:
        self.resolutions = 0
        self.resolved = 0
        #: The message of the limit gone over, once one is, and the key of the outermost interpolation OmegaConf was
        #: resolving then (when it was).
        self.over: str | None = None
        self.key: str | None = None

    def start(self) -> None:
        """Count one resolution more, before it runs; Exhausted when that is one too many (or a limit is gone)."""
        if self.over is None:
            self.resolutions += 1
            if self.resolutions > MAX_RESOLUTIONS:
                self.over = (
                    f"the config's interpolations take more than {MAX_RESOLUTIONS} resolutions (the cluster "
                    "sections of RLinf's 369 configs take at most 7): interpolations that refer to each other "
                    "several times multiply"
                )
        if self.over is not None:
            raise Exhausted(self.over)

    def produced(self, value: object) -> None:
        """Count what a resolution produced: a text's characters, a list's or mapping's items."""
        if isinstance(value, str | Mapping | Sequence):  # OmegaConf's DictConfig and ListConfig too
            self.resolved += len(value)
        else:
            self.resolved += 1
        if self.over is None and self.resolved > MAX_RESOLVED:
            self.over = (
                f"the config's interpolations resolve to more than {MAX_RESOLVED // 2**20} MiB of values (more than "
                "the config itself may hold); interpolations that refer to each other several times multiply"
            )
        if self.over is not None:
            raise Exhausted(self.over)


_current: contextvars.ContextVar[Work | None] = contextvars.ContextVar("rlplace_interpolation_work", default=None)
_lock = threading.Lock()
_blocks = 0
_original: Any = None


@contextlib.contextmanager
def counting(work: Work) -> Iterator[None]:
    """OmegaConf's resolutions in this context, for the time of the block, counted against `work`."""
    _install()
    token = _current.set(work)
    try:
        yield
    finally:
        _current.reset(token)
        _uninstall()


def _install() -> None:
    global _blocks, _original
    from omegaconf.base import Container

    with _lock:
        if _blocks == 0:
            _original = Container.resolve_parse_tree
            original = _original

            def resolve_parse_tree(self: Any, *args: Any, **kwargs: Any) -> Any:
                work = _current.get()
                if work is None:
                    return original(self, *args, **kwargs)
                try:
                    work.start()
                    value = original(self, *args, **kwargs)
                    work.produced(value)
                except Exception:  # OmegaConf wraps Exhausted in its own errors on the way out
                    if work.over is not None:
                        work.key = _full_key(self, kwargs.get("key"))  # the outermost, once all have returned
                    raise
                return value

            Container.resolve_parse_tree = resolve_parse_tree  # type: ignore[method-assign]  # OmegaConf has no hook
        _blocks += 1


def _uninstall() -> None:
    global _blocks
    from omegaconf.base import Container

    with _lock:
        _blocks -= 1
        if _blocks == 0:
            Container.resolve_parse_tree = _original  # type: ignore[method-assign]  # put back what _install wrapped


def _full_key(container: Container, key: DictKeyType | None) -> str | None:
    """The dotted key of the value OmegaConf is resolving (`key` of `container`), for the message (None where it
    has no name)."""
    try:
        return str(container._get_full_key(key)) or None
    except Exception:  # a private method of OmegaConf's: a message does without the key rather than fail
        return None
