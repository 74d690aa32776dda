"""Collecting problems with their key paths and lines, so one load reports every mistake at once.

Checks never raise on a bad value: they `add` a Problem and carry on with the rest of the config.
The loader raises one ConfigError with everything at the end.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from rlplace.errors import Problem

#: A key path: mapping keys as str, list indices as int. ``("cluster", "node_groups", 1, "label")``.
Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """``("cluster", "node_groups", 1, "env_configs")`` -> ``cluster.node_groups[1].env_configs``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]"  # component_placement['actor,rollout']
        else:
            out += f".{part}" if out else part
    return out


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def did_you_mean(word: object, options: Iterable[str]) -> str:
    """A hint like ``; did you mean 'node_ranks'?``, or an empty string when nothing is close."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    if not close:
        lowered = {o.lower(): o for o in options}
        close = [lowered[word.lower()]] if word.lower() in lowered else []
    return f"; did you mean '{close[0]}'?" if close else ""


def show(value: object, limit: int = 60) -> str:
    """A value as the user would recognise it in a message, shortened."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Reporter:
    """Accumulates Problems, locating each by the nearest line known for its key path."""

    def __init__(self, file: str | None):
        self.file = file
        #: Line of each key path and text of each plain YAML scalar; filled by `read_yaml`, empty for dicts.
        self.lines: dict[Path, int] = {}
        self.raw_text: dict[Path, str] = {}
        self.problems: list[Problem] = []

    def add(self, path: Path, message: str, value: object = None, *, line: int | None = None) -> None:
        """Record a problem at `path`; `line` overrides the looked-up line (YAML syntax errors)."""
        where = line if line is not None else self.line(path)
        self.problems.append(Problem(path=format_path(path), message=message, value=value, file=self.file, line=where))

    def line(self, path: Path) -> int | None:
        """The line of `path`, or of its nearest written ancestor (a missing key points at its parent)."""
        for n in range(len(path), -1, -1):
            line = self.lines.get(path[:n])
            if line is not None:
                return line
        return None

    def raw(self, path: Path) -> str | None:
        """The text of a plain (unquoted) YAML scalar as written, e.g. ``0123`` that YAML read as 83."""
        return self.raw_text.get(path)

    def sorted_problems(self) -> list[Problem]:
        """Problems in file order (those without a line last), discovery order within a line."""
        return sorted(self.problems, key=lambda p: p.line if p.line is not None else float("inf"))
