"""Command-line overrides as hydra-core reads them, for the checks rlplace makes before hydra-core composes.

rlplace used to judge an override by its text, and hydra-core then unescaped it: `hydra.searchpath=[pkg\\://x]`
holds no `pkg://` as typed, hydra-core reads `pkg://x` and imports the package `x` (its code runs); and a group
choice written `+extra='fan'` or `+extra=[fan]` was no choice to rlplace's preflight composition, so hydra-core
merged a tree rlplace refuses in a third of a second (1,728 configs, 29 s). So every override is parsed here by
hydra-core's own parser (`OverridesParser`, the one its composition uses), and the checks read what it parsed:

- `refuse_non_folders`: a search path set on the command line must be a folder (`file://DIR` or a bare `DIR`),
  however it was quoted, escaped or computed (`sort([...])`); a `pkg://` source would import its package;
- `group_choices`: the overrides that may choose a config group's option, with the option(s) hydra-core reads,
  for the preflight (`compose.compose_file(..., choices=...)`).

An override hydra-core cannot parse is left to hydra-core, which refuses it before it reads any file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rlplace.config.compose import OVERRIDE_ORIGIN, Choice
from rlplace.errors import ConfigError, Problem

SEARCHPATH_KEY = "hydra.searchpath"


@dataclasses.dataclass(frozen=True)
class Parsed:
    """One override as hydra-core reads it."""

    typed: str  # as the user typed it, for messages
    key: str  # `cluster.train_worker_num`, `env/sub`, `hydra.searchpath` (hydra-core's key_or_group)
    package: str | None  # `extra@pkg=...`: pkg
    adds: bool  # `+key=...` or `++key=...`
    deletes: bool  # `~key`
    value: object  # what hydra-core reads after the `=`: text (unquoted, unescaped), a number, a list, a sweep

    @property
    def group_key(self) -> str:
        return self.key if self.package is None else f"{self.key}@{self.package}"


def parse(overrides: Sequence[str]) -> list[Parsed]:
    """The overrides hydra-core can parse (those it cannot are its to refuse, before it reads a file)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            o = parser.parse_override(text)
            value = o.value()
        except HydraException:
            continue
        parsed.append(Parsed(text, o.key_or_group, o.package, o.is_add() or o.is_force_add(), o.is_delete(), value))
    return parsed


def refuse_non_folders(parsed: Sequence[Parsed]) -> None:
    """A ConfigError for the first `hydra.searchpath` override that names anything but a folder, by the scheme
    hydra-core reads in each entry (the text before `://`; none is a folder)."""
    for o in parsed:
        if o.key != SEARCHPATH_KEY:
            continue
        for entry in _strings(o.value):
            scheme = entry.partition("://")[0] if "://" in entry else "file"
            if scheme == "file":
                continue
            why = (
                "would make hydra-core import the package (its code runs); write the package's folder as "
                "file://FOLDER, or put the pkg:// entry in the primary's hydra.searchpath, which rlplace resolves "
                "without importing"
                if scheme == "pkg"
                else "is no folder: a search path on the command line is a folder, written file://FOLDER"
            )
            raise ConfigError(
                Problem(
                    "",
                    f"the search path {entry!r}, as hydra-core reads it, {why}",
                    file=OVERRIDE_ORIGIN.format(o.typed),
                )
            )


def search_path_overrides(parsed: Sequence[Parsed]) -> list[str]:
    """The overrides (as typed) that set `hydra.searchpath` (with or without `+`)."""
    return [o.typed for o in parsed if o.key == SEARCHPATH_KEY and not o.deletes]


def group_choices(parsed: Sequence[Parsed]) -> list[Choice]:
    """The overrides that may choose a config group's option (`env=maniskill`, `+extra=fan`, `db=[a,b]`), with
    the option(s) hydra-core reads; whether the group exists is the composer's to find."""
    choices = []
    for o in parsed:
        options = _options(o.value)
        if o.deletes or options is None or not o.key:
            continue
        if "." in o.key and "/" not in o.key:
            continue  # a value: cluster.train_worker_num=8
        choices.append(Choice(o.group_key, options, o.adds, o.typed))
    return choices


def _options(value: object) -> str | list[str] | None:
    """A group's option, or its options (`db=[a,b]`); None when `value` is neither (a number, a mapping)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    texts = [v for v in value if isinstance(v, str)]
    return texts if len(texts) == len(value) else None


def _strings(value: object) -> list[str]:
    """Every text in a parsed value: itself, or inside its lists, mappings and sweeps."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    items = value if isinstance(value, list | tuple) else getattr(value, "list", None)
    if not isinstance(items, list | tuple):
        return []
    return [s for item in items for s in _strings(item)]
