"""Reading values of a loaded document, with `${...}` interpolations resolved where rlplace reads them.

Whole training configs are full of OmegaConf interpolations (`num_workers: ${cluster.eval_worker_num}`,
`video_base_dir: ${log.log_dir}/...`). rlplace resolves only the values it reads (the cluster section, a
few keys of `env:`, `buffer:`, `policy:`, `actor:`, `rollout:`), so an interpolation elsewhere that needs
the application's own resolvers does not stop a load. A plain reference (`${cluster.eval_worker_num}`) is
followed here; anything else is resolved by OmegaConf on the whole document (so `${..sibling}` and
`${oc.env:VAR}` work as in the application): omegaconf is imported only then, and its absence is a clear
problem naming the extra to install.

OmegaConf's `oc.env` is watched meanwhile (`from_env.watching`): Ray's token variables are refused, and every
value read from the environment is recorded in the reporter, so that outputs show it as written. The work of all
the resolutions of one load, rlplace's and OmegaConf's, is bounded (`interpolation.Work`): the first limit gone
over is one problem at the key being read, and nothing more is resolved.

Every read is also checked against the composition's gaps (configs left out because a search path's variable
is not set, `compose.Gap`): a value that such a config could have supplied (under its package, and not
written by a config merged after it) is an error naming the variable; any other value is certain.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from rlplace.config import from_env, interpolation
from rlplace.config.compose import Gap
from rlplace.config.fields import INVALID
from rlplace.config.problems import Path, Reporter, format_path, show
from rlplace.errors import Problem, first_line
from rlplace.model import EnvValue

if TYPE_CHECKING:
    from omegaconf import DictConfig

_MARK = "${"
_ABSENT = object()
#: `${a.b.c}`: an absolute reference to another key, followed without OmegaConf.
_REFERENCE = re.compile(r"\$\{\s*([A-Za-z_][\w-]*(?:\.[\w-]+)*)\s*\}")
_MAX_REFERENCES = 32  # a chain longer than this (a cycle) goes to OmegaConf, which names it


def has_interpolation(value: object) -> bool:
    """Whether any string in `value` (walked recursively) is or contains an interpolation."""
    if isinstance(value, str):
        return _MARK in value
    if isinstance(value, Mapping):
        return any(has_interpolation(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_interpolation(v) for v in value)
    return False


class Values:
    """The document `data` (plain containers, as read), and its OmegaConf view when one is needed.

    `root` is the DictConfig the data came from, when it came from one (Hydra's `cfg`); otherwise it is
    built from `data` on the first interpolation.
    """

    def __init__(
        self,
        data: object,
        rep: Reporter,
        root: DictConfig | None = None,
        gaps: tuple[Gap, ...] = (),
        stamps: Mapping[Path, int] | None = None,
    ):
        self.data = data
        self.rep = rep
        self._root = root
        self._needed = root is not None or has_interpolation(data)
        self._gaps = gaps
        self._stamps = stamps or {}
        self._reported: set[tuple[str, Path]] = set()
        self._depth = 0
        self.work = interpolation.Work()
        self._resolving: tuple[str, Path] | None = None  # the last interpolation rlplace resolved: text, key

    def at(self, path: Path, default: object = None) -> object:
        """The value at `path` (resolved), or `default` when a key on the way is missing."""
        node = self._find(path)
        self._check(path, node)
        return default if node is _ABSENT else self._resolved(node, path)

    def certain(self, path: Path, default: object = None) -> object:
        """As `at`, for a value placement can do without: `default` (and no problem) when a config left out could
        have supplied it."""
        node = self._find(path)
        if any(self._uncertain(gap, path, node) for gap in self._gaps):
            return default
        return default if node is _ABSENT else self._resolved(node, path)

    def present(self, path: Path) -> bool:
        """Whether the document has a key at `path` (nothing is resolved); a key a gap could have supplied is
        an error."""
        node = self._find(path)
        if node is _ABSENT:
            self._check(path, node)
        return node is not _ABSENT

    def shape(self, path: Path, *, certain: bool = False) -> object:
        """The value at `path` as written, for its structure: a mapping or list is not resolved inside (its
        keys are read one by one with `at`), an interpolation standing for the whole value is. `certain`: as
        `certain` does, None (and no problem) where a config left out could have supplied it."""
        node = self._find(path)
        if certain:
            if any(self._uncertain(gap, path, node) for gap in self._gaps):
                return None
        else:
            self._check(path, node)
        if node is _ABSENT:
            return None
        return self._resolved(node, path) if isinstance(node, str) else node

    def tree(self, value: object, path: Path) -> object:
        """`value` (found at `path`) with every interpolation inside it resolved (INVALID where one could not
        be: that problem is reported)."""
        self._check(path, value)
        return self._resolved(value, path)

    def _resolved(self, value: object, path: Path) -> object:
        """`value` with its interpolations resolved, within the load's work (`interpolation.Work`): INVALID once
        that is spent (said once, at the key where it ran out)."""
        if not self._needed:
            return value
        if self.work.over is not None:
            return INVALID
        try:
            return self._tree(value, path)
        except interpolation.Exhausted as e:
            text, where = self._resolving or (value, path)
            self.rep.add(where, f"cannot resolve {show(text)}: {e}", text)
            return INVALID

    def _find(self, path: Path) -> object:
        node = self.data
        for part in path:
            node = _child(node, part)
            if node is _ABSENT:
                return _ABSENT
        return node

    def _tree(self, value: object, path: Path) -> object:
        if not self._needed:
            return value
        if isinstance(value, str) and _MARK in value:
            return self._resolve(value, path)
        if self._depth:
            self.work.produced(value)  # what a followed reference produces
        if isinstance(value, Mapping):
            return {k: self._tree(v, (*path, k if isinstance(k, str | int) else str(k))) for k, v in value.items()}
        if isinstance(value, list):
            return [self._tree(v, (*path, i)) for i, v in enumerate(value)]
        return value

    def _check(self, path: Path, value: object) -> None:
        """A problem when a gap could have supplied the value read at `path`."""
        for gap in self._gaps:
            if not self._uncertain(gap, path, value) or (gap.entry, path) in self._reported:
                continue
            self._reported.add((gap.entry, path))
            names = " and ".join(gap.variables)
            why = (
                f"{names} {'is' if len(gap.variables) == 1 else 'are'} not set (the search path that finds it); set "
                f"{names} and run again"
                if names
                else "its search path entry cannot be resolved (hydra.searchpath); fix the entry"
            )
            self.rep.problems.append(
                Problem(
                    format_path(path),
                    f"placement reads this value, and '{gap.entry}' may supply it, but that config is left out: {why}",
                    file=gap.file,
                    line=gap.line,
                )
            )
            return

    def _uncertain(self, gap: Gap, path: Path, value: object) -> bool:
        package = gap.package
        if path[: len(package)] == package:  # the value is at or below where the gap would have merged
            if value is _ABSENT or isinstance(value, Mapping):
                return True  # it could have written the value, or keys of the mapping
            return self._stamps.get(path, -1) < gap.position  # else certain if a later config wrote it
        return package[: len(path)] == path  # the gap is inside the mapping read

    def _resolve(self, text: str, path: Path) -> object:
        self._resolving = (text, path)
        reference = _REFERENCE.fullmatch(text)
        if reference is not None and self._depth < _MAX_REFERENCES:
            return self._follow(reference.group(1), text, path)
        return self._resolve_with_omegaconf(text, path)

    def _follow(self, key: str, text: str, path: Path) -> object:
        """`${a.b.c}`, the common interpolation, without OmegaConf: the value at that key path, resolved in
        turn (OmegaConf's answer for an absolute reference; anything else goes to OmegaConf)."""
        target_path: Path = tuple(int(p) if p.isdigit() else p for p in key.split("."))
        target = self._find(target_path)
        if target is _ABSENT:
            self.rep.add(path, f"cannot resolve {show(text)}: there is no key {key} in the config", text)
            return INVALID
        if target == "???":
            return self._resolve_with_omegaconf(text, path)  # OmegaConf's message for a missing value
        self._check(target_path, target)
        self.work.start()
        self._depth += 1
        try:
            return self._tree(target, target_path)
        finally:
            self._depth -= 1

    def _resolve_with_omegaconf(self, text: str, path: Path) -> object:
        omegaconf = _omegaconf()
        if omegaconf is None:
            self.rep.add(
                path,
                f"{show(text)} is an interpolation; resolving it needs omegaconf: pip install 'rlplace[hydra]' "
                "(or write the value itself)",
                text,
            )
            return INVALID
        with from_env.watching(omegaconf) as reads, interpolation.counting(self.work):
            try:
                node = self._omega_root(omegaconf)
                for part in path[:-1]:
                    node = node[part]
                value = node[path[-1]]
                if isinstance(value, omegaconf.DictConfig | omegaconf.ListConfig):
                    value = omegaconf.OmegaConf.to_container(value, resolve=True)
            except Exception as e:  # OmegaConf raises many kinds (grammar, missing key, unknown resolver)
                if self.work.over is not None:
                    raise interpolation.Exhausted(self.work.over) from None  # OmegaConf wrapped it
                why = from_env.token_variable_refused(reads.refused[0]) if reads.refused else first_line(e, limit=None)
                self.rep.add(path, f"cannot resolve {show(text)}: {why}", text)
                return INVALID
        if reads.read:
            self.rep.from_env.extend(_env_values(path, text, value, tuple(reads.read)))
        return value

    def _omega_root(self, omegaconf: ModuleType) -> DictConfig:
        """The document as a DictConfig (it is a mapping: the loader reads no value of any other document)."""
        if self._root is None:
            self._root = omegaconf.OmegaConf.create(self.data)
        return self._root


def _env_values(path: Path, written: str, value: object, variables: tuple[str, ...]) -> list[EnvValue]:
    """The values an interpolation that read the environment produced, each shown as `written`: a text, a number
    (`${oc.decode:${oc.env:PIN}}` is an int, and as secret), and every one inside a list or mapping it decoded."""
    if isinstance(value, Mapping):
        return [e for k, v in value.items() for e in _env_values((*path, str(k)), written, v, variables)]
    if isinstance(value, list | tuple):
        return [e for i, v in enumerate(value) for e in _env_values((*path, i), written, v, variables)]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return []  # true/false and null are no secrets, and would hide every such word
    return [EnvValue(format_path(path), written, str(value), variables)]


def _child(node: object, part: str | int) -> object:
    """`node[part]`, or _ABSENT when `node` has no such key or index."""
    if isinstance(node, Mapping):
        return node.get(part, _ABSENT)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return _ABSENT


def _omegaconf() -> ModuleType | None:
    if "omegaconf" in sys.modules:
        return sys.modules["omegaconf"]
    try:
        import omegaconf
    except ImportError:
        return None
    return omegaconf
