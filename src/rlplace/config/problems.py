"""Collecting problems with their key paths and lines, so one load reports every mistake at once.

Checks never raise on a bad value: they `add` a Problem and carry on with the rest of the config.
The loader raises one ConfigError with everything at the end.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from rlplace.errors import Problem
from rlplace.model import EnvValue

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
    close = _closest(word, options, 0.6)
    return f"; did you mean '{close}'?" if close else ""


#: How alike a word must be to a known one to count as its typo (an error), not as a key of its own (a
#: warning). 0.8 catches `remote_storge`, `Frank`, `stratgy`, `num_node` and lets `seed` or `profile` pass.
NEAR_MISS = 0.8


def near_miss(word: object, options: Iterable[str]) -> str | None:
    """The known word `word` is a typo of (same letters in another case, or very alike), else None."""
    return _closest(word, options, NEAR_MISS)


def _closest(word: object, options: Iterable[str], cutoff: float) -> str | None:
    if not isinstance(word, str):
        return None
    options = list(options)
    lowered = {o.lower(): o for o in options}
    if word.lower() in lowered and word not in options:
        return lowered[word.lower()]
    close = difflib.get_close_matches(word, options, n=1, cutoff=cutoff)
    return close[0] if close else None


def show(value: object, limit: int = 60) -> str:
    """A value as the user would recognise it in a message, shortened."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Reporter:
    """Accumulates Problems and warnings, locating each by the nearest line known for its key path.

    A composed config (Hydra defaults, overrides) comes from several files: `files` names the file of a
    key path where it is not `file` (an override from the command line is the file `<command line>`).
    """

    def __init__(self, file: str | None):
        self.file = file
        #: Line of each key path and text of each plain YAML scalar; filled by `read_yaml`, empty for dicts.
        self.lines: dict[Path, int | None] = {}  # None: known, without a line (a command-line override)
        self.files: dict[Path, str] = {}
        self.raw_text: dict[Path, str] = {}
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        #: Values read from the environment (`${oc.env:VAR}`), for outputs to show as written (config/from_env.py).
        self.from_env: list[EnvValue] = []

    def add(self, path: Path, message: str, value: object = None, *, line: int | None = None) -> None:
        """Record a problem at `path`; `line` overrides the looked-up line (YAML syntax errors)."""
        self.problems.append(self._locate(path, message, value, line))

    def warn(self, path: Path, message: str, value: object = None) -> None:
        """Record something that is not an error but that the user should read (it goes to JobSpec.warnings)."""
        self.warnings.append(self._locate(path, message, value, None))

    def where(self, path: Path) -> tuple[str | None, int | None]:
        """(file, line) a problem at `path` is reported with: for problems found after loading (the planner's)."""
        p = self._locate(path, "", None, None)
        return p.file, p.line

    def _locate(self, path: Path, message: str, value: object, line: int | None) -> Problem:
        where = self._written_at(path)
        file = self.files.get(path[:where], self.file) if where is not None else self.file
        if line is None and where is not None:
            line = self.lines.get(path[:where])
        return Problem(path=format_path(path), message=message, value=value, file=file, line=line)

    def _written_at(self, path: Path) -> int | None:
        """Length of the longest prefix of `path` whose line is known (a missing key points at its parent)."""
        for n in range(len(path), -1, -1):
            if path[:n] in self.lines:
                return n
        return None

    def line(self, path: Path) -> int | None:
        """The line of `path`, or of its nearest written ancestor (a missing key points at its parent)."""
        n = self._written_at(path)
        return None if n is None else self.lines[path[:n]]

    def raw(self, path: Path) -> str | None:
        """The text of a plain (unquoted) YAML scalar as written, e.g. ``0123`` that YAML read as 83."""
        return self.raw_text.get(path)

    def sorted_problems(self) -> list[Problem]:
        """Problems in file order (those without a line last), discovery order within a line."""
        return _in_file_order(self.problems)

    def warning_texts(self) -> tuple[str, ...]:
        """The warnings as `file:line: key.path: message`, in file order, each once."""
        return tuple(dict.fromkeys(str(w) for w in _in_file_order(self.warnings)))


def _in_file_order(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.file or "", p.line if p.line is not None else float("inf")))
