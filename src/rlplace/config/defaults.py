"""Hydra's defaults-list grammar: one entry of a `defaults:` list, and where its config goes.

The rules are hydra-core's own (hydra/core/default_element.py, hydra/_internal/config_repository.py, as of
1.3, read with the version base RLinf's entry points use, "1.1"), kept in one place so the composer and its
test against hydra-core agree:

- `- group: option`, `- group@package: option`, `- group: [a, b]` (each option merged), `- group: null`
  (nothing), `- group: ???` (an option must be chosen), with the keywords `optional` and `override`;
- `- path/to/config` and `- path/to/config@package` (a config, not a group choice: RLinf's
  `env/libero_spatial@env.train`, `../hybrid_engines/fsdp@actor.fsdp_config`);
- `- _self_`: where the file's own content is merged (last when not written);
- groups are relative to the group of the config whose list names them; `/group` is absolute, `../group`
  climbs out of it (a file path, as Hydra's file source resolves it);
- a package is relative to the package of the containing config; `_global_` in it makes the rest absolute,
  `_here_` is the containing config's package, `_group_` is the group's own path (absolute), and the
  deprecated `_name_` is the option's name. A `# @package` header in the chosen file is absolute and applies
  when the entry writes no package.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping

SELF = "_self_"
_GLOBAL = "_global_"
_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


class GrammarError(ValueError):
    """A defaults entry Hydra cannot read; the message says what would be valid."""


@dataclasses.dataclass
class Default:
    """One defaults entry. `group` is None for a config entry (`- path/to/config@pkg`), whose `path` is the
    config's path as written; a group entry's options are in `value`."""

    path: str
    group: str | None = None
    value: str | list[str] | None = None
    package: str | None = None
    optional: bool = False
    override: bool = False
    index: int = 0  # position in its defaults list (for the line of a message)
    parent_base: str = ""  # the group path of the config whose list holds this entry
    parent_package: str = ""  # the final package of that config
    header: str | None = None  # the `# @package` header of the chosen file, made absolute

    @property
    def is_self(self) -> bool:
        return self.group is None and self.path == SELF

    def text(self) -> str:
        """The entry as a user writes it, for messages."""
        at = f"@{self.package}" if self.package is not None else ""
        if self.group is None:
            return f"{self.path}{at}"
        words = " ".join([*(["optional"] if self.optional else []), *(["override"] if self.override else [])])
        return f"{words + ' ' if words else ''}{self.group}{at}: {self.value}"

    def set_header(self, header: str | None) -> None:
        """The chosen file's `# @package` header, made absolute as Hydra does (`_group_` (1.1) keeps the default
        package; `_group_` inside a header is the group's path)."""
        if header is None or header == "_group_":
            self.header = None
            return
        if header not in ("", _GLOBAL) and not header.startswith(f"{_GLOBAL}."):
            header = f"{_GLOBAL}.{header}"
        self.header = (header or _GLOBAL).replace("_group_", self.default_package())

    def set_parent(self, base: str, package: str) -> None:
        self.parent_base, self.parent_package = base, package
        if self.package is not None and "_group_" in self.package:
            self.package = f"{_GLOBAL}.{self.package.replace('_group_', self.default_package())}"

    # --- where the config is ---------------------------------------------------------------------------

    def group_path(self) -> str:
        """The config group, from the config root (`cluster/resource_pool`)."""
        written = self.group if self.group is not None else posixpath.dirname(self.path.lstrip("/"))
        absolute = (self.group if self.group is not None else self.path).startswith("/")
        if self.group is not None:
            written = written.lstrip("/")
        if absolute or not self.parent_base:
            return written
        return f"{self.parent_base}/{written}" if written else self.parent_base

    def name(self) -> str | None:
        """The option's (config's) name: `libero_spatial`."""
        if self.group is None:
            return posixpath.basename(self.path)
        return self.value if isinstance(self.value, str) else None

    def config_path(self) -> str:
        """The config's path from the config root, without `.yaml`: `env/libero_spatial`."""
        if self.group is None:
            path = self.path[1:] if self.path.startswith("/") else self.path
            return f"{self.parent_base}/{path}" if self.parent_base and not self.path.startswith("/") else path
        return f"{self.group_path()}/{self.name()}"

    # --- where its content goes ------------------------------------------------------------------------

    def default_package(self) -> str:
        return self.group_path().replace("/", ".")

    def final_package(self) -> str:
        """The dotted key path the config's content is merged at (Hydra's get_final_package)."""
        package = self.package if self.package is not None else self.header
        if package is None:
            relative = self.group if self.group is not None else posixpath.dirname(self.path.lstrip("/"))
            package = relative.lstrip("/").replace("/", ".")
        name = self.name()
        if name is not None and "_name_" in package:
            package = package.replace("_name_", name)
        if not self.parent_package:
            joined = package
        else:
            joined = self.parent_package if not package else f"{self.parent_package}.{package}"
        at = joined.rfind(_GLOBAL)
        return joined if at == -1 else joined[at + len(_GLOBAL) + 1 :]

    def override_key(self) -> str:
        """What a command-line override or an `override` entry names this choice by: `group` or
        `group@package` when the package is not the group's own."""
        default, final = self.default_package(), self.final_package()
        key = self.group_path()
        return key if default == final else f"{key}@{final or _GLOBAL}"

    def interpolation(self) -> str | None:
        """The `${...}` text of an option chosen by interpolation (`- db: ${choice}`), else None."""
        name = self.config_path() if self.group is None else self.name()
        return name if name is not None and _INTERPOLATION.search(name) else None


def parse_entry(entry: object, index: int) -> Default:
    """One item of a defaults list -> Default; GrammarError says what Hydra accepts."""
    if isinstance(entry, str):
        path, package = _split_package(entry)
        if " " in path.strip():
            raise GrammarError(
                f"cannot read {entry!r}: keywords (optional, override) go on a group entry, "
                "like '- optional group: option'"
            )
        return Default(path=path, package=package, index=index)
    if not isinstance(entry, Mapping) or len(entry) != 1:
        raise GrammarError(
            "a defaults entry is '- group: option', '- group@package: option', '- path/to/config[@package]' or "
            f"'- _self_', got {_show(entry)}"
        )
    ((key, value),) = entry.items()
    if not isinstance(key, str) or not key.strip():
        raise GrammarError(f"a defaults entry names a config group, got {_show(entry)}")
    *keywords, group_key = key.split()
    unknown = [k for k in keywords if k not in ("optional", "override")]
    if unknown:
        raise GrammarError(f"unknown keyword {unknown[0]!r} in {key!r}; the keywords are optional and override")
    if value is not None and not isinstance(value, str | list):
        raise GrammarError(f"the option of {key!r} must be a config name or a list of them, got {_show(value)}")
    if isinstance(value, list) and not all(isinstance(v, str) for v in value):
        raise GrammarError(f"the options of {key!r} must be config names, got {_show(value)}")
    group, package = _split_package(group_key)
    if group in ("", "/"):
        raise GrammarError(f"a defaults entry names a config group, got {_show(entry)}")
    return Default(
        path=group,
        group=group,
        value=value,
        package=package,
        optional="optional" in keywords,
        override="override" in keywords,
        index=index,
    )


def _split_package(text: str) -> tuple[str, str | None]:
    """`group@pkg` -> (group, pkg); the 1.0 rename form `group@pkg:pkg2` keeps pkg, as Hydra does."""
    group, at, package = text.strip().partition("@")
    if not at:
        return group, None
    package = package.split(":", 1)[0]
    return group, "" if package == "_here_" else package


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
