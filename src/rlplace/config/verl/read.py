"""Reading a verl trainer config's values as verl's code reads them (`config.a.b`, `.get(key, default)`).

verl reads its OmegaConf config attribute by attribute, so a key its own tree defines is always there; a value
rlplace needs that the composed config lacks is verl's default (the one its YAML writes). Every value is read
through `Values` (interpolations resolved, file and line kept), checked once, and an invalid one is reported and
read as None, so the caller skips what depends on it and goes on checking the rest. A value left `???` (verl's
trees leave `actor_rollout_ref.rollout.name: ???` for the command line to set) is refused as verl refuses it: its
OmegaConf config raises MissingMandatoryValue when the trainer reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlplace.config.fields import INVALID, Flag, Integer, checked
from rlplace.config.problems import Path, Reporter
from rlplace.config.values import Values

#: OmegaConf's mandatory value that the config leaves to be set.
MISSING = "???"


def key(path: str) -> Path:
    """`"a.b.c"` -> `("a", "b", "c")`: verl's keys are written dotted in messages and code alike."""
    return tuple(path.split("."))


@dataclass
class Reader:
    """The values of one verl config and the reporter its problems go to."""

    values: Values
    rep: Reporter

    def integer(self, path: str, default: int, minimum: int = 0) -> int | None:
        """An integer >= `minimum` at `path` (`default` when the key is missing); None when invalid (reported)."""
        raw = self._read(path, default)
        value = raw if raw is INVALID else checked(Integer(minimum), raw, key(path), self.rep)
        return None if value is INVALID else value

    def flag(self, path: str, default: bool) -> bool | None:
        """A boolean at `path` (`default` when missing or null, as verl's truthiness reads null)."""
        raw = self._read(path, default)
        if raw is None:
            return default
        value = raw if raw is INVALID else checked(Flag(), raw, key(path), self.rep)
        return None if value is INVALID else value

    def text(self, path: str, default: str | None = None) -> str | None:
        raw = self._read(path, default)
        return raw if isinstance(raw, str) else default

    def _read(self, path: str, default: object) -> object:
        """The value at `path`; INVALID (reported) when it is the mandatory `???` not set."""
        raw = self.values.at(key(path), default)
        if raw == MISSING:
            self.rep.add(
                key(path),
                f"is {MISSING}, a mandatory value not set: verl stops with MissingMandatoryValue when its trainer "
                f"reads it; set it ({path}=VALUE)",
                raw,
            )
            return INVALID
        return raw

    def raw(self, path: str, default: object = None) -> object:
        return self.values.at(key(path), default)

    def present(self, path: str) -> bool:
        return self.values.present(key(path))

    def refuse(self, path: str, message: str, value: object = None) -> None:
        """What verl refuses before (or while) it starts, at the key it names."""
        self.rep.add(key(path), message, value)

    def warn(self, path: str, message: str) -> None:
        self.rep.warn(key(path), message)
