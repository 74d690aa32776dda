"""Where a Hydra tree's configs are found: the primary config's folder, then its `hydra.searchpath` entries.

As hydra-core looks them up: the primary's folder first, then each entry of the primary's
`hydra.searchpath` in order (`file://DIR`, a bare `DIR`, or `pkg://python.package`); the first source that
holds a config wins. Entries are written with `${oc.env:VAR}` or `${oc.env:VAR,default}` (RLinf's
`file://${oc.env:EMBODIED_PATH}/config/`): they are resolved here from the environment without OmegaConf. An
entry whose variable is not set (or that names a package that cannot be found) is *skipped*: the configs only
it would have supplied are left out by the composer, with a warning naming the variable.

Reading a config never runs code: a `pkg://a.b.conf` entry is found by looking for the folders `a/b/conf` on
`sys.path`, the way Python's path finder looks for packages, without importing `a` or `a.b` (whose
`__init__.py` would run; `importlib.util.find_spec` imports every parent). A package that is not a folder on
`sys.path` (inside a zip, or served by an import hook) is skipped with a message saying to name its folder.
A primary config that lies inside the package it names (verl's `fully_async_ppo_trainer.yaml`, inside `verl/`,
with `pkg://verl.trainer.config`) finds that copy of the package first: the one its trainer runs from
(`python -m` from a checkout's root puts the checkout first on the path), whether or not it is on `sys.path`.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import os
import posixpath
import re
import sys
from collections.abc import Mapping, Sequence

from rlplace.config.problems import Path

#: `${oc.env:NAME}` or `${oc.env:NAME,default}`; any other `${...}` in an entry cannot be resolved here.
_ENV = re.compile(r"\$\{\s*oc\.env\s*:\s*([^,}\s]+)\s*(?:,([^}]*))?\}")
_OTHER_INTERPOLATION = re.compile(r"\$\{[^}]*\}")
CONFIG_SUFFIX = ".yaml"
_SUFFIXES = tuple(importlib.machinery.all_suffixes())  # .py, .pyc, .so, ...: what makes a module


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
        entry = resolve_entry(text, ("hydra", "searchpath", i), environ, primary)
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


def resolve_entry(text: str, key: Path, environ: Mapping[str, str], primary: str | None = None) -> Entry:
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
        name = rest.replace("/", ".").rstrip(".")
        own = _own_package_root(primary, name.split(".")[0]) if primary else None
        folder = (own and package_folder(name, [own])) or package_folder(name)
        if folder is None:
            return Entry(
                text,
                key,
                None,
                (),
                f"no folder {name.replace('.', '/')} of a Python package is on sys.path (rlplace looks for it "
                "without importing the package; for one inside a zip or behind an import hook, write its folder as "
                "file://FOLDER)",
            )
        return Entry(text, key, folder)
    return Entry(text, key, None, (), f"rlplace reads file:// and pkg:// search paths, not {scheme}://")


def _own_package_root(primary: str, top: str) -> str | None:
    """The folder holding the package `top` that `primary` lies inside (`/src/verl` for
    `/src/verl/verl/experimental/x/config/a.yaml` and `verl`), or None when it lies in no such package. Relative
    to the current folder when inside it (`.` from a checkout's root), so messages name the files as the user's
    own paths do."""
    folder = os.path.dirname(os.path.abspath(primary))
    while True:
        parent = os.path.dirname(folder)
        if os.path.basename(folder) == top and any(
            os.path.isfile(os.path.join(folder, f"__init__{s}")) for s in _SUFFIXES
        ):
            inside = os.path.relpath(parent)
            return parent if inside.startswith(os.pardir) else inside
        if parent == folder:
            return None
        folder = parent


def _default(text: str) -> str:
    """An `oc.env` default as OmegaConf turns it into text: quotes removed, `null` -> 'None'."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return "None" if text == "null" else text


def package_folder(name: str, path: Sequence[str] | None = None) -> str | None:
    """The folder of the Python package `name` (`a.b.conf`), found on `path` (default: sys.path) as Python's path
    finder would find it, level by level, without importing anything (no `__init__.py` runs); None when there is
    no such package folder."""
    parts = name.split(".")
    if not name or not all(p.isidentifier() for p in parts):
        return None
    locations = list(sys.path if path is None else path)
    for part in parts:
        locations = _package_locations(part, locations)
        if not locations:
            return None
    return locations[0]


def _package_locations(part: str, entries: Sequence[str]) -> list[str]:
    """Where the package `part` is in `entries` (a parent package's folders): the folder of the first regular
    package (one with `__init__`), else every namespace portion; nothing when a module of that name comes first."""
    portions = []
    for entry in entries:
        base = os.path.join(entry or os.curdir, part)
        if os.path.isdir(base) and any(os.path.isfile(os.path.join(base, f"__init__{s}")) for s in _SUFFIXES):
            return [base]
        if any(os.path.isfile(base + s) for s in _SUFFIXES):
            return []  # a module, not a package: nothing below it
        if os.path.isdir(base):
            portions.append(base)
    return portions


def env_variables(text: str) -> list[str]:
    """The variables `${oc.env:VAR}` interpolations in `text` read."""
    return [m.group(1) for m in _ENV.finditer(text)]


def _is(names: list[str]) -> str:
    return "are" if len(names) > 1 else "is"
