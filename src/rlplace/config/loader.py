"""`load`: any config source -> a validated JobSpec, or one ConfigError listing every problem.

Sources: a YAML file (str or Path), YAML text, a dict, or an OmegaConf/Hydra DictConfig (recognised
only when omegaconf is already imported, so it stays an optional dependency). The `cluster:` section
may be the top level itself (e.g. Hydra's `cfg.cluster`) or under `cluster:`, where other top-level keys
belong to the rest of the user's config and are left alone. `resource_pool` may sit under `cluster:` or
beside it. The dialect is told by its keys; each dialect has its own builder module.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
from collections.abc import Mapping

from rlplace.config import node_groups, pools
from rlplace.config.problems import Path, Reporter, did_you_mean, show
from rlplace.config.sections import NODE_GROUPS_KEYS, NODE_GROUPS_SECTION, POOLS_SECTION, RESOURCE_POOLS
from rlplace.config.yaml_source import read_yaml
from rlplace.errors import ConfigError, Problem
from rlplace.model import JobSpec

POOLS_KEYS = tuple(POOLS_SECTION.fields)
_ALL_KEYS = frozenset(POOLS_KEYS) | frozenset(NODE_GROUPS_KEYS)
_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def load(source: object, *, filename: str | None = None) -> JobSpec:
    """Load and validate a cluster config; raise ConfigError with every problem found.

    `filename` names the source in messages when it is text, a dict or a DictConfig.
    """
    rep, data = _read(source, filename)
    spec = _interpret(data, rep) if data is not None or not rep.problems else None
    if rep.problems or spec is None:
        raise ConfigError(rep.sorted_problems())
    return dataclasses.replace(spec, source=rep.file)


def _read(source: object, filename: str | None) -> tuple[Reporter, object]:
    if isinstance(source, str) and _looks_like_path(source):
        source = pathlib.Path(source)
    if isinstance(source, pathlib.Path):
        rep = Reporter(filename or str(source))
        try:
            text = source.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(Problem("", "no such file", file=rep.file)) from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(Problem("", f"cannot read the file: {e}", file=rep.file)) from None
        return rep, read_yaml(text, rep)
    if isinstance(source, str):
        rep = Reporter(filename or "<string>")
        return rep, read_yaml(source, rep)
    rep = Reporter(filename)
    container = _from_omegaconf(source, rep)
    if container is not None:
        return rep, container
    if isinstance(source, Mapping):
        return rep, source
    raise ConfigError(
        Problem(
            "", f"cannot load a config from a {type(source).__name__}; pass a path, YAML text or a dict", file=filename
        )
    )


def _looks_like_path(text: str) -> bool:
    """A one-line string naming a YAML file (existing or not) is a path; anything else is YAML text."""
    return "\n" not in text and (text.strip().lower().endswith(_YAML_SUFFIXES) or os.path.isfile(text))


def _from_omegaconf(source: object, rep: Reporter) -> object | None:
    omegaconf = sys.modules.get("omegaconf")
    if omegaconf is None or not isinstance(source, omegaconf.DictConfig):
        return None
    try:
        return omegaconf.OmegaConf.to_container(source, resolve=True)
    except omegaconf.errors.OmegaConfBaseException as e:
        raise ConfigError(Problem("", f"cannot resolve the OmegaConf config: {e}", file=rep.file)) from None


def _interpret(data: object, rep: Reporter) -> JobSpec | None:
    located = _locate(data, rep)
    if located is None:
        return None
    section, base, top_pools = located
    keys = {k for k in section if isinstance(k, str)}
    pool_keys = sorted(keys & set(POOLS_KEYS) | ({"resource_pool"} if top_pools is not _ABSENT else set()))
    group_keys = sorted(keys & set(NODE_GROUPS_KEYS))
    if pool_keys and group_keys:
        rep.add(
            base,
            f"the config mixes the two dialects: {', '.join(group_keys)} (node groups) with {', '.join(pool_keys)} "
            "(worker counts and pools); write one of them",
        )
        return None
    if group_keys:
        return node_groups.build(NODE_GROUPS_SECTION.check(section, base, rep), base, rep)  # type: ignore[arg-type]
    checked = POOLS_SECTION.check(section, base, rep)
    pools_path: Path = (*base, "resource_pool")
    pool_list = checked.get("resource_pool")  # type: ignore[union-attr]
    if top_pools is not _ABSENT:
        pools_path = ("resource_pool",)
        if "resource_pool" in section:
            rep.add(pools_path, "resource_pool is written twice, under cluster: and beside it; keep one")
        pool_list = RESOURCE_POOLS.check(top_pools, pools_path, rep)
    return pools.build(checked, base, pool_list, pools_path, rep)  # type: ignore[arg-type]


_ABSENT = object()


def _locate(data: object, rep: Reporter) -> tuple[Mapping[object, object], Path, object] | None:
    """(cluster section, its key path, top-level resource_pool or _ABSENT), or None when there is none."""
    if data is None:
        rep.add((), "the config is empty; expected a cluster: section")
        return None
    if not isinstance(data, Mapping):
        rep.add((), f"the config must be a mapping with a cluster: section, got {show(data)}", data)
        return None
    if "cluster" not in data:
        if not _ALL_KEYS & {k for k in data if isinstance(k, str)}:
            hints = "".join(did_you_mean(k, ["cluster"]) for k in data)
            rep.add(
                (),
                f"no cluster: section found{hints or ''}; write it as cluster: with keys such as num_nodes, "
                "node_groups, component_placement or train_worker_num, placement, resource_pool",
            )
            return None
        return data, (), _ABSENT
    section = data["cluster"]
    if not isinstance(section, Mapping):
        rep.add(
            ("cluster",),
            f"cluster must be a mapping of keys such as num_nodes or train_worker_num, got {show(section)}",
            section,
        )
        return None
    return section, ("cluster",), data.get("resource_pool", _ABSENT)
