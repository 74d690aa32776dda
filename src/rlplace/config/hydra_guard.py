"""While hydra-core composes for rlplace, it reads every config file through rlplace's reader, with its limits.

With overrides, hydra-core composes (`hydra_compose`), and its `file://` source would parse each file with
OmegaConf's loader, without any limit: a billion-laughs group file ran past 40 s, a 28.6 MiB one past 30 s, where
the same files without overrides were refused in milliseconds. So for the time of a composition (`reading`) the
`file://` source is one that reads each file once with `files.read_text` and `read_yaml`, against the config's
`Budget` (a file the preflight composition already counted is not counted again), and hands hydra-core the data
read, which OmegaConf would have typed alike (the equality tests of tests/config/test_hydra.py compose both
ways); a file rlplace refuses ends the composition with its ConfigError. OmegaConf's `oc.env` is watched
meanwhile (`from_env.watching`: Ray's token variables are refused), and the interpolations hydra-core resolves (its
own `hydra:` keys) are counted against a budget (`interpolation.Work`: a bomb there took minutes). All are
restored afterwards.

hydra-core's `pkg://` source imports its package to find it (`importlib.resources.files`), which runs the
package's code. rlplace hands hydra-core folders only (`hydra_compose`, `overrides.refuse_non_folders`); should a
`pkg://` source be asked for all the same (by a way in nobody has thought of), it is found as rlplace finds the
primary's (`search_path.package_folder`, no import) and read like a `file://` one; a package that is imported
already (hydra-core's own `hydra.conf`) is left to hydra-core, since importing it again runs nothing.

This replaces an entry of hydra-core's registry of config sources (hydra/_internal/sources_registry.py, stable
since 1.1), the one seam hydra-core has for reading files.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from rlplace.config import from_env, interpolation
from rlplace.config.compose import not_a_config
from rlplace.config.files import Unreadable, read_text
from rlplace.config.problems import Reporter
from rlplace.config.search_path import package_folder
from rlplace.config.yaml_source import Budget, read_yaml
from rlplace.errors import ConfigError, Problem


@dataclass
class Read:
    """A file hydra-core loaded through rlplace: its text, and where each of its keys was written."""

    text: str
    data: dict[object, object] | list[object] | None
    rep: Reporter


@dataclass
class Reading:
    """What a composition read (by real path), what OmegaConf's `oc.env` read or refused meanwhile, and the work
    of the interpolations it resolved."""

    files: dict[str, Read]
    env: from_env.EnvReads
    work: interpolation.Work


@contextlib.contextmanager
def reading(budget: Budget, env: from_env.EnvReads | None = None) -> Iterator[Reading]:
    """hydra-core's `file://` configs read by rlplace, against `budget`, for the time of the block; what `oc.env`
    reads meanwhile is added to `env` (if given)."""
    import omegaconf
    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.plugins.config_source import ConfigResult, ConfigSource
    from omegaconf import OmegaConf

    files: dict[str, Read] = {}

    class ReadByRlplace(FileConfigSource):
        def load_config(self, config_path: str) -> ConfigResult:
            full = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
            if not os.path.exists(full):
                return super().load_config(config_path)  # hydra-core's own "not found"
            if full not in files:
                files[full] = _read(full, budget)
            read = files[full]
            return ConfigResult(
                config=OmegaConf.create({} if read.data is None else read.data),
                path=f"{self.scheme()}://{self.path}",
                provider=self.provider,
                header=ConfigSource._get_header_dict(read.text[:512]),
            )

    ReadByRlplace.__name__ = FileConfigSource.__name__  # hydra-core registers its own again, by this name
    registry = SourcesRegistry.instance()
    saved = registry.types.get("file", FileConfigSource)  # before hydra-core's first start it registers none yet
    saved_pkg = registry.types.get("pkg", ImportlibResourcesConfigSource)

    def found_without_importing(provider: str, path: str) -> ConfigSource:
        name = path.partition("://")[2].replace("/", ".").rstrip(".")
        if name in sys.modules:
            return saved_pkg(provider, path)
        folder = package_folder(name)
        if folder is None:
            raise ConfigError(
                Problem(
                    "",
                    f"no folder {name.replace('.', '/')} of a Python package is on sys.path (rlplace finds packages "
                    "without importing them); write its folder as file://FOLDER",
                    file=path,
                )
            )
        return ReadByRlplace(provider, f"file://{folder}")

    found_without_importing.__name__ = ImportlibResourcesConfigSource.__name__  # as above
    registry.types["file"] = ReadByRlplace
    registry.types["pkg"] = found_without_importing  # type: ignore[assignment]  # hydra-core only calls it: a factory stands in for the class
    try:
        work = interpolation.Work()
        with from_env.watching(omegaconf, env) as reads, interpolation.counting(work):
            yield Reading(files, reads, work)
    finally:
        registry.types["file"] = saved
        registry.types["pkg"] = saved_pkg


def refusal(e: BaseException) -> ConfigError | None:
    """The ConfigError of rlplace's reader behind a hydra-core exception (hydra-core wraps what a source raises)."""
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen:
        if isinstance(current, ConfigError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _read(file: str, budget: Budget) -> Read:
    """One file, as the composer reads it; a file the preflight composition read is not counted again."""
    counted = file in budget.files
    own = Budget() if counted else budget
    if not counted:
        budget.files.add(file)
        over = budget.take_config()
        if over is not None:
            raise ConfigError(Problem("", over, file=file))
    rep = Reporter(file)
    try:
        text = read_text(file)
    except Unreadable as e:
        raise ConfigError(Problem("", str(e), file=file)) from None
    data = read_yaml(text, rep, own)
    shape = not_a_config(data) if not rep.problems else None
    if shape is not None:
        rep.add((), shape)
    if rep.problems:
        raise ConfigError(rep.sorted_problems())
    assert data is None or isinstance(data, dict | list), data  # read_yaml's mappings are dicts; not_a_config
    return Read(text, data, rep)
