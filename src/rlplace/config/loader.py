"""`load`: any config source -> a validated JobSpec, or one ConfigError listing every problem.

Sources: a YAML file (str or Path; its Hydra `defaults:` list composed, Hydra overrides applied, see
`compose`), YAML text, a dict, or an OmegaConf/Hydra DictConfig (recognised only when omegaconf is
already imported, so it stays an optional dependency). The `cluster:` section may be the top level itself
(e.g. Hydra's `cfg.cluster` or a config-group file) or under `cluster:`, where the other top-level keys
belong to the rest of the user's config: rlplace reads them only where a framework launches workers from
them (`training`). `resource_pool` may sit under `cluster:` or beside it. `${...}` interpolations are
resolved where rlplace reads (`values`). The dialect is told by its keys; each dialect has its own
builder module. Things worth knowing that are not errors come back as `JobSpec.warnings`.

Every file is read by the one hardened reader (`files`, `yaml_source`: size, aliases, depth, a defaults tree's
configs), with the same limits whether rlplace or hydra-core composes it; values read from the environment are
shown as written in problems and warnings (`from_env`), and listed in `JobSpec.from_env`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeGuard, TypeVar

from rlplace.config import elastic, names, node_groups, pools, topology, training, verl
from rlplace.config.compose import OVERRIDE_ORIGIN, Composition, compose_file, has_defaults
from rlplace.config.fields import INVALID, written
from rlplace.config.files import read_config_text
from rlplace.config.from_env import hide
from rlplace.config.hydra_compose import compose_with_hydra
from rlplace.config.problems import Path, Reporter, did_you_mean, format_path, show
from rlplace.config.sections import (
    BOTH_DIALECTS,
    NODE_GROUPS_KEYS,
    NODE_GROUPS_SECTION,
    POOLS_SECTION,
    RESOURCE_POOLS,
)
from rlplace.config.values import Values
from rlplace.config.yaml_source import MAX_DEPTH, Budget, check_tree, read_yaml
from rlplace.errors import ConfigError, Problem
from rlplace.model import EnvValue, JobSpec

if TYPE_CHECKING:
    from omegaconf import DictConfig

POOLS_KEYS = tuple(k for k in POOLS_SECTION.fields if k not in BOTH_DIALECTS)
_ALL_KEYS = frozenset(POOLS_KEYS) | frozenset(NODE_GROUPS_KEYS) | frozenset(BOTH_DIALECTS)
#: The key of the node-groups dialect's placements, whose entries' lines JobSpec.locations keeps.
PLACEMENTS = "component_placement"
_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def load(
    source: object, *, filename: str | None = None, overrides: Sequence[str] = (), show_env: bool = False
) -> JobSpec:
    """Load and validate a cluster config; raise ConfigError with every problem found.

    `filename` names the source in messages when it is text, a dict or a DictConfig. `overrides` are Hydra
    overrides (`["cluster=4t4e_manual", "cluster.train_worker_num=8"]`) for a file: it is composed by
    hydra-core (the optional extra `rlplace[hydra]`). Values read from the environment are written as in the
    config (`${oc.env:VAR}`) in problems and warnings unless `show_env`.
    """
    return load_with(source, None, filename=filename, overrides=overrides, show_env=show_env)[0]


T = TypeVar("T")


def load_with(
    source: object,
    reader: Callable[[JobSpec, Values], T] | None,
    *,
    filename: str | None = None,
    overrides: Sequence[str] = (),
    show_env: bool = False,
) -> tuple[JobSpec, T | None]:
    """`load`, and what `reader` reads from the same composed document (the whole training config, beside the
    cluster section: RLinf's `profile_data` for `rlplace tune`); its problems (`values.rep.add`) join the one
    ConfigError. Only commands that need more than placement read more, so a key placement ignores never blocks
    `validate` or `plan`."""
    rep, composed = _read(source, filename, tuple(overrides), show_env)
    data = composed.data
    if data is None and not rep.problems:
        data = {}  # an empty file: RLightning's defaults (warned about with the empty section)
    values = Values(data, rep, composed.root, composed.gaps, composed.stamps)
    spec = _interpret(data, rep, values) if data is not None else None
    extra = reader(spec, values) if reader is not None and spec is not None and not rep.problems else None
    from_env = tuple(dict.fromkeys(rep.from_env))  # a value read twice is recorded twice
    shown = () if show_env else from_env
    if rep.problems or spec is None:
        raise ConfigError([_hidden(p, shown) for p in rep.sorted_problems()])
    warnings = tuple(hide(w, shown) for w in rep.warning_texts())
    spec = dataclasses.replace(
        spec,
        source=rep.file,
        warnings=warnings,
        locations={**_locations(rep, data), **spec.locations},
        from_env=from_env,
    )
    return spec, extra


def _hidden(problem: Problem, values: tuple[EnvValue, ...]) -> Problem:
    """`problem` with the values read from the environment written as in the config (from_env.hide)."""
    if not values:
        return problem
    return dataclasses.replace(
        problem,
        message=hide(problem.message, values),
        value=hide(problem.value, values) if isinstance(problem.value, str) else problem.value,
        file=hide(problem.file, values) if problem.file else problem.file,
    )


def _locations(rep: Reporter, data: object) -> dict[str, str]:
    """`file:line` of the keys the planner and the CLI name in their messages (JobSpec.locations): the cluster
    section's own keys and each component placement (`component_placement.rollout`), relative to the section, and
    each node group's hardware (`cluster.node_groups[0].hardware`, as the robots' refusals name it)."""
    base: Path = ("cluster",) if isinstance(data, Mapping) and "cluster" in data else ()
    out = {}
    for path, line in rep.lines.items():
        rest = path[len(base) :]
        if path[: len(base)] != base or not rest or len(rest) > 2 or (len(rest) == 2 and rest[0] != PLACEMENTS):
            continue
        file = rep.files.get(path, rep.file)
        out[format_path(rest)] = f"{file}:{line}" if line is not None else str(file)
    section = data.get("cluster") if base and isinstance(data, Mapping) else data
    groups = section.get("node_groups") if isinstance(section, Mapping) else None
    hardware = [(*base, "node_groups", i, "hardware") for i in range(len(groups) if isinstance(groups, list) else 0)]
    for path in hardware:  # named with the section's key, as the robots' refusals name them
        if path in rep.lines:
            line = rep.lines[path]
            file = rep.files.get(path, rep.file)
            out[format_path(path)] = f"{file}:{line}" if line is not None else str(file)
    return out


def _read(
    source: object, filename: str | None, overrides: tuple[str, ...], show_env: bool = False
) -> tuple[Reporter, Composition]:
    """(reporter, the plain data with what came with it: Hydra's gaps, the DictConfig it came from)."""
    if isinstance(source, str) and _looks_like_path(source):
        source = pathlib.Path(source)
    if isinstance(source, pathlib.Path):
        rep = Reporter(filename or str(source))
        if source.suffix == ".py":  # the script given where its config belongs (`rlplace run train.py`)
            raise ConfigError(
                Problem(
                    "",
                    "this is a Python file, not a YAML config: name the config with the cluster: section here; to "
                    f"run this script on its plan: rlplace run CONFIG.yaml -- python {source}",
                    file=rep.file,
                )
            )
        try:
            return rep, _compose(source, overrides, rep)
        except ConfigError as e:  # a defaults entry's choice read from the environment names a missing option
            raise ConfigError([_hidden(p, () if show_env else tuple(rep.from_env)) for p in e.problems]) from None
    if overrides:
        raise ConfigError(
            Problem(
                "",
                "Hydra overrides apply to a config file; pass the file's path (or apply them to your DictConfig)",
                file=OVERRIDE_ORIGIN.format(" ".join(overrides)),
            )
        )
    if isinstance(source, str):
        rep = Reporter(filename or "<string>")
        return rep, Composition(read_yaml(source, rep))
    rep = Reporter(filename)
    root = source if _is_dictconfig(source) else None
    container = source if root is None else _from_omegaconf(root, rep)
    if root is not None or isinstance(source, Mapping):
        check_tree(container, rep)  # Python data: a YAML file's limits
        if rep.problems:
            raise ConfigError(rep.sorted_problems())
        return rep, Composition(container, root=root)
    raise ConfigError(
        Problem(
            "", f"cannot load a config from a {type(source).__name__}; pass a path, YAML text or a dict", file=filename
        )
    )


def _compose(source: pathlib.Path, overrides: tuple[str, ...], rep: Reporter) -> Composition:
    """The config file `source` read, its defaults composed (by hydra-core with `overrides`)."""
    text = read_config_text(source, rep.file)
    budget = Budget(files={os.path.realpath(source)})  # this config's limits: its files, its tree's
    budget.take_config()
    data = read_yaml(text, rep, budget)
    if overrides and not rep.problems:
        return compose_with_hydra(source, overrides, rep, data, budget)
    if has_defaults(data) and not rep.problems:
        composed = compose_file(str(source), rep, data, text, budget)
        if rep.problems:  # a missing option file: the rest would only be knock-on problems
            raise ConfigError(rep.sorted_problems())
        return composed
    return Composition(data)


def _looks_like_path(text: str) -> bool:
    """A one-line string naming a YAML file (existing or not) or an existing path is a path; anything else
    is YAML text."""
    return "\n" not in text and (text.strip().lower().endswith(_YAML_SUFFIXES) or os.path.exists(text))


def _is_dictconfig(source: object) -> TypeGuard[DictConfig]:
    """Whether `source` is a DictConfig (omegaconf is only imported to tell when it is loaded: else it is not)."""
    omegaconf = sys.modules.get("omegaconf")
    return omegaconf is not None and isinstance(source, omegaconf.DictConfig)


def _from_omegaconf(source: DictConfig, rep: Reporter) -> object:
    """A DictConfig's plain containers, interpolations left in place (`Values` resolves what is read)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(source, resolve=False)
    except OmegaConfBaseException as e:
        raise ConfigError(Problem("", f"cannot read the OmegaConf config: {e}", file=rep.file)) from None
    except RecursionError:
        raise ConfigError(
            Problem("", f"the config is nested more than {MAX_DEPTH} levels deep", file=rep.file)
        ) from None


def _interpret(data: object, rep: Reporter, values: Values) -> JobSpec | None:
    if verl.is_verl(data):  # verl's trainer configs: placement is what its trainers build (config/verl)
        return verl.build(values, rep)
    located = _locate(data, rep, values)
    if located is None:
        return None
    section, base, top_pools = located
    if section is INVALID:
        return None  # already reported (a refused tag)
    section = values.tree(section, base)
    if section is INVALID:
        return None  # reported: an interpolation that stands for the whole section could not be resolved
    if section is None or section == {}:
        section = {}
        rep.warn(
            base,
            f"the {'cluster section' if base else 'config'} is empty: RLightning's ClusterConfig defaults apply "
            "(placement mode auto, strategy default: 1 train and 1 eval worker of 1 GPU each, Ray schedules every "
            "worker); env workers follow rlplace's defaults (one per eval worker, 1 GPU each) unless a training "
            "config gives env groups",
        )
    if not isinstance(section, Mapping):
        rep.add(
            base,
            f"cluster must be a mapping of keys such as num_nodes or train_worker_num, got {show(section)}",
            section,
        )
        return None
    if top_pools is not _ABSENT:
        top_pools = values.tree(top_pools, ("resource_pool",))
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
        checked = NODE_GROUPS_SECTION.check_mapping(section, base, rep)
        spec = node_groups.build(checked, base, rep)
        spec = training.apply(spec, data, checked, base, values, rep)
        names.warn_near_misses(spec, data, base, rep)
        return _both_dialects(spec, checked, base, rep)
    checked = POOLS_SECTION.check_mapping(section, base, rep)
    pools_path: Path = (*base, "resource_pool")
    pool_list = checked.get("resource_pool")
    if top_pools is not _ABSENT:
        pools_path = ("resource_pool",)
        if "resource_pool" in section:
            rep.add(pools_path, "resource_pool is written twice, under cluster: and beside it; keep one")
        pool_list = RESOURCE_POOLS.check(top_pools, pools_path, rep)
    spec = pools.build(checked, base, pool_list, pools_path, rep)
    spec = training.apply(spec, data, checked, base, values, rep)
    return _both_dialects(spec, checked, base, rep)


def _both_dialects(spec: JobSpec, checked: Mapping[str, object], base: Path, rep: Reporter) -> JobSpec:
    """`spec` with the keys either dialect may write: `topology`, `elastic`, and rlplace's `model_bytes` and
    `disaggregated_stages`."""
    size = written(checked, "model_bytes")
    spec = dataclasses.replace(spec, model_bytes=size) if isinstance(size, int) else spec
    stages = written(checked, "disaggregated_stages")
    spec = dataclasses.replace(spec, disaggregated_stages=stages) if isinstance(stages, str) else spec
    spec = topology.apply(spec, checked, base, rep)
    return elastic.apply(spec, checked, base, rep)


_ABSENT = object()


def _locate(data: object, rep: Reporter, values: Values) -> tuple[object, Path, object] | None:
    """(cluster section, its key path, top-level resource_pool or _ABSENT), or None when there is none."""
    if data == {}:
        return data, (), _ABSENT
    if not isinstance(data, Mapping):
        rep.add((), f"the config must be a mapping with a cluster: section, got {show(data)}", data)
        return None
    if not values.present(("cluster",)):
        if rep.problems:
            return None  # a left-out config could have supplied the section
        if not _ALL_KEYS & {k for k in data if isinstance(k, str)}:
            hints = "".join(did_you_mean(k, ["cluster"]) for k in data)
            local = (
                " (RLightning runs a training config without one in local mode, every component in the driver: "
                "there is nothing to place)"
                if all(k in data for k in training.RLIGHTNING_KEYS)
                else ""
            )
            rep.add(
                (),
                f"no cluster: section found{hints or ''}{local}; write it as cluster: with keys such as num_nodes, "
                "node_groups, component_placement or train_worker_num, placement, resource_pool",
            )
            return None
        return data, (), _ABSENT
    return data["cluster"], ("cluster",), data.get("resource_pool", _ABSENT)
