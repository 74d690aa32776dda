"""Where a Hydra tree's configs are found: the primary config's folder, then its `hydra.searchpath` entries.

As hydra-core looks them up: the primary's folder first, then each entry of the primary's
`hydra.searchpath` in order (`file://DIR`, a bare `DIR`, or `pkg://python.package`); the first source that
holds a config wins. Entries are written with `${oc.env:VAR}` or `${oc.env:VAR,default}` (RLinf's
`file://${oc.env:EMBODIED_PATH}/config/`): they are resolved here from the environment without OmegaConf. An
entry whose variable is not set (or that names a package that cannot be found) is *skipped*: the configs only
it would have supplied are left out by the composer, with a warning naming the variable.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import posixpath
import re
from collections.abc import Mapping

from rlplace.config.problems import Path

#: `${oc.env:NAME}` or `${oc.env:NAME,default}`; any other `${...}` in an entry cannot be resolved here.
_ENV = re.compile(r"\$\{\s*oc\.env\s*:\s*([^,}\s]+)\s*(?:,([^}]*))?\}")
_OTHER_INTERPOLATION = re.compile(r"\$\{[^}]*\}")
CONFIG_SUFFIX = ".yaml"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One `hydra.searchpath` entry: its folder, or why it has none (`missing`: the variables not set)."""

    text: str  # as written
    key: Path  # ("hydra", "searchpath", i), for its line
    folder: str | None
    missing: tuple[str, ...] = ()  # environment variables not set
    reason: str = ""  # why the folder is unknown, for messages


@dataclasses.dataclass
class SearchPath:
    """The folders configs are looked up in, in Hydra's order, and the entries that were skipped."""

    folders: list[str]
    skipped: list[Entry] = dataclasses.field(default_factory=list)

    def find(self, config_path: str) -> str | None:
        """The file of `config_path` (`env/libero`, from the config root) in the first folder that has it."""
        name = config_path if config_path.endswith((".yaml", ".yml")) else config_path + CONFIG_SUFFIX
        for folder in self.folders:
            candidate = posixpath.normpath(posixpath.join(folder, name))
            if os.path.isfile(candidate):
                return candidate
        return None

    def where(self, config_path: str) -> list[str]:
        """The files `find` looked at, for a message."""
        name = config_path if config_path.endswith((".yaml", ".yml")) else config_path + CONFIG_SUFFIX
        return [posixpath.normpath(posixpath.join(folder, name)) for folder in self.folders]

    def options(self, group_path: str) -> list[str]:
        """Every option of a config group, across the folders (as Hydra lists them)."""
        found: set[str] = set()
        for folder in self.folders:
            path = posixpath.normpath(posixpath.join(folder, group_path))
            try:
                names = os.listdir(path)
            except OSError:
                continue
            found.update(n[: -len(CONFIG_SUFFIX)] for n in names if n.endswith(CONFIG_SUFFIX))
        return sorted(found)

    def variables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for e in self.skipped for v in e.missing))


def search_path(primary: str, entries: object, environ: Mapping[str, str] | None = None) -> SearchPath:
    """The search path of the primary config file `primary` whose `hydra.searchpath` is `entries` (as read)."""
    environ = os.environ if environ is None else environ
    path = SearchPath([posixpath.dirname(primary) or "."])
    for i, text in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(text, str):
            continue  # Hydra refuses such a list; the loader reports it
        entry = resolve_entry(text, ("hydra", "searchpath", i), environ)
        if entry.folder is None:
            path.skipped.append(entry)
        else:
            path.folders.append(entry.folder)
    return path


def resolve_env(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """`text` with its `${oc.env:VAR[,default]}` resolved, and the variables that are not set (no default)."""
    missing: list[str] = []

    def env(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is None:
            missing.append(name)
            return ""
        return _default(default)

    return _ENV.sub(env, text), missing


def resolve_entry(text: str, key: Path, environ: Mapping[str, str]) -> Entry:
    resolved, missing = resolve_env(text, environ)
    if missing:
        return Entry(text, key, None, tuple(missing), f"{' and '.join(missing)} {_is(missing)} not set")
    other = _OTHER_INTERPOLATION.search(resolved)
    if other:
        return Entry(text, key, None, (), f"rlplace resolves only ${{oc.env:...}} here, not {other.group(0)}")
    scheme, sep, rest = resolved.partition("://")
    if not sep:
        return Entry(text, key, resolved)
    if scheme == "file":
        return Entry(text, key, rest)
    if scheme == "pkg":
        folder = package_folder(rest.replace("/", ".").rstrip("."))
        if folder is None:
            return Entry(text, key, None, (), f"no Python package {rest!r} is importable")
        return Entry(text, key, folder)
    return Entry(text, key, None, (), f"rlplace reads file:// and pkg:// search paths, not {scheme}://")


def _default(text: str) -> str:
    """An `oc.env` default as OmegaConf turns it into text: quotes removed, `null` -> 'None'."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return "None" if text == "null" else text


def package_folder(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return locations[0] if locations else None


def _is(names: list[str]) -> str:
    return "are" if len(names) > 1 else "is"
