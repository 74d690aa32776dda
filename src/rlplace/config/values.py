"""Reading values of a loaded document, with `${...}` interpolations resolved where rlplace reads them.

Whole training configs are full of OmegaConf interpolations (`num_workers: ${cluster.eval_worker_num}`,
`video_base_dir: ${log.log_dir}/...`). rlplace resolves only the values it reads (the cluster section, a
few keys of `env:`, `buffer:`, `policy:`, `actor:`, `rollout:`), so an interpolation elsewhere that needs
the application's own resolvers does not stop a load. Resolution uses OmegaConf on the whole document (so
`${..sibling}` and `${oc.env:VAR}` work as in the application); omegaconf is imported only when a value
rlplace reads is an interpolation, and its absence is a clear problem naming the extra to install.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from rlplace.config.fields import INVALID
from rlplace.config.problems import Path, Reporter, show

_MARK = "${"


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

    def __init__(self, data: object, rep: Reporter, root: object = None):
        self.data = data
        self.rep = rep
        self._root = root
        self._needed = root is not None or has_interpolation(data)

    def at(self, path: Path, default: object = None) -> object:
        """The value at `path` (resolved), or `default` when a key on the way is missing."""
        node = self.data
        for part in path:
            if not _has(node, part):
                return default
            node = node[part]  # type: ignore[index]
        return self.tree(node, path)

    def tree(self, value: object, path: Path) -> object:
        """`value` (found at `path`) with every interpolation inside it resolved (INVALID where one could not
        be: that problem is reported)."""
        if not self._needed:
            return value
        if isinstance(value, str) and _MARK in value:
            return self._resolve(value, path)
        if isinstance(value, Mapping):
            return {k: self.tree(v, (*path, k if isinstance(k, str | int) else str(k))) for k, v in value.items()}
        if isinstance(value, list):
            return [self.tree(v, (*path, i)) for i, v in enumerate(value)]
        return value

    def _resolve(self, text: str, path: Path) -> object:
        omegaconf = _omegaconf()
        if omegaconf is None:
            self.rep.add(
                path,
                f"{show(text)} is an interpolation; resolving it needs omegaconf: pip install 'rlplace[hydra]' "
                "(or write the value itself)",
                text,
            )
            return INVALID
        try:
            node = self._omega_root(omegaconf)
            for part in path[:-1]:
                node = node[part]
            value = node[path[-1]]
            if isinstance(value, omegaconf.DictConfig | omegaconf.ListConfig):
                value = omegaconf.OmegaConf.to_container(value, resolve=True)
        except Exception as e:  # OmegaConf raises many kinds (grammar, missing key, unknown resolver)
            self.rep.add(path, f"cannot resolve {show(text)}: {_first_line(e)}", text)
            return INVALID
        return value

    def _omega_root(self, omegaconf: object) -> object:
        if self._root is None:
            self._root = omegaconf.OmegaConf.create(self.data)  # type: ignore[attr-defined]
        return self._root


def _has(node: object, part: str | int) -> bool:
    if isinstance(node, Mapping):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _omegaconf() -> object | None:
    if "omegaconf" in sys.modules:
        return sys.modules["omegaconf"]
    try:
        import omegaconf
    except ImportError:
        return None
    return omegaconf


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
