"""Command-line overrides (`cluster=4t4e_manual cluster.train_worker_num=8`): hydra-core composes, rlplace locates.

hydra-core's compose API does the composition (the optional extra `rlplace[hydra]`), with the version base
RLinf's entry points use ("1.1", which also reads every 1.2+ config). Around it, rlplace:

- composes the same tree itself first, with the overrides' group choices (`compose_file(..., choices=...)`): a
  limit it goes over (size, aliases, depth, configs loaded) is the error, as without overrides, before
  hydra-core reads anything; hydra-core then reads every file through rlplace's reader (`hydra_guard`);
- resolves the primary's `hydra.searchpath` itself and hands hydra-core the folders (`file://`) in an override
  of `hydra.searchpath`: `pkg://` entries are found without importing the package (`search_path`), an entry
  whose variable is not set is left out (hydra-core would stop on it), and a config only that entry could
  supply is stood in for by an empty one in a scratch folder, so the rest composes; each is a `Gap`, warned
  about once, and an error only where placement reads a value it could have supplied. A stand-in is written
  only inside the scratch folder; a `hydra.searchpath` override on the command line naming anything but a
  folder is refused (a `pkg://` one would make hydra-core import the package), judged on what hydra-core's own
  parser reads in it, as are the group choices of the preflight (`overrides`);
- locates every value in the files of Hydra's final defaults list (file, line, merge position), and a value
  set by an override at the override itself;
- turns hydra-core's exceptions into one line with their root cause (a missing variable, a missing option
  with the closest ones, an override of a key that does not exist with did-you-mean).
"""

from __future__ import annotations

import os
import pathlib
import re
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rlplace.config import from_env, hydra_guard
from rlplace.config import overrides as parsed_overrides
from rlplace.config.compose import (
    OVERRIDE_ORIGIN,
    Choice,
    Composition,
    Gap,
    compose_file,
    has_defaults,
    locate,
    searchpath_entries,
    warn_skipped,
)
from rlplace.config.problems import Reporter, near_miss
from rlplace.config.search_path import SearchPath, package_folder, search_path
from rlplace.config.sections import NODE_GROUPS_KEYS, NODE_GROUPS_SECTION, PLACEMENT_BLOCK, POOLS_SECTION
from rlplace.config.yaml_source import Budget
from rlplace.errors import ConfigError, Problem

if TYPE_CHECKING:
    from omegaconf import DictConfig, ListConfig

VERSION_BASE = "1.1"
#: Stand-ins for configs of skipped search paths; more than this many missing configs is not a search path gap.
_MAX_STANDINS = 64
_COULD_NOT_OVERRIDE = re.compile(r"Could not override '([^']+)'")
_NOISE = ("See http", "full_key:", "object_type=", "reference_type=", "Set the environment variable HYDRA_FULL_ERROR")
_SEARCHPATH_KEY = "hydra.searchpath"
_CLOSEST = 5


def compose_with_hydra(
    path: pathlib.Path, overrides: Sequence[str], rep: Reporter, data: object, budget: Budget | None = None
) -> Composition:
    """`path` (read as `data`, `budget` what it took of the limits) composed by hydra-core with `overrides`;
    values located in `rep`."""
    try:
        import hydra  # noqa: F401  (the package itself: its submodules may be importable while it is not)
        from hydra.core.global_hydra import GlobalHydra
        from omegaconf import OmegaConf, open_dict
    except ImportError as e:
        raise ConfigError(
            Problem(
                "",
                f"Hydra overrides ({' '.join(overrides)}) need hydra-core, which is not installed ({e.name}): "
                "pip install 'rlplace[hydra]'",
                file=OVERRIDE_ORIGIN.format(" ".join(overrides)),
            )
        ) from None
    if GlobalHydra.instance().is_initialized():
        raise ConfigError(
            Problem(
                "",
                "Hydra is already initialized in this process (inside @hydra.main?): pass the composed config "
                "(cfg, or cfg.cluster) to rlplace.config.load instead of a file with overrides",
                file=str(path),
            )
        )
    budget = budget or Budget()
    entries = searchpath_entries(data, rep)
    if rep.problems:
        raise ConfigError(rep.sorted_problems())
    search = search_path(str(path), entries)
    parsed = parsed_overrides.parse(overrides)
    parsed_overrides.refuse_non_folders(parsed)
    user_searchpath = parsed_overrides.search_path_overrides(parsed)
    preflight = _preflight(path, data, parsed_overrides.group_choices(parsed), budget, rep)
    with tempfile.TemporaryDirectory(prefix="rlplace-standins-") as standins:
        extra = [] if user_searchpath or not entries else [_searchpath_override(search, standins)]
        if extra:  # the configs missing without overrides: stood in for at once, not one retry each
            for gap in preflight.gaps:
                _write_stand_in(standins, gap.config_path)
        added = [_added_if_in_schema(o) for o in overrides]
        env = from_env.EnvReads()
        try:
            cfg, defaults, reading = _compose(
                path, [*added, *extra], search if extra else None, standins, budget, overrides, env
            )
        finally:  # a choice read from the environment is a secret too, in hydra-core's messages as well
            rep.from_env.extend(env.env_values("defaults"))
        choices = cfg.hydra.runtime.choices
        sources = _sources(cfg.hydra.runtime.config_sources, path)
        with open_dict(cfg):
            del cfg["hydra"]
        composition = Composition(OmegaConf.to_container(cfg, resolve=False), root=cfg)
        gaps = _locate_defaults(defaults, sources, standins, search, rep, composition.stamps, reading)
    composition.gaps = tuple(gaps)
    warn_skipped(rep, search, gaps)
    for override in overrides:
        _locate_override(override, choices, rep)
    return composition


def _preflight(
    path: pathlib.Path, data: object, choices: Sequence[Choice], budget: Budget, rep: Reporter
) -> Composition:
    """The tree composed by rlplace with the overrides' group choices, for its gaps; a limit it goes over (or an
    entry it refuses) is the ConfigError, before hydra-core reads a file (its other problems are hydra-core's to
    find, with the overrides)."""
    if not has_defaults(data):
        return Composition(data)
    scratch = Reporter(rep.file)  # its problems are not the user's (the overrides may fix them); its lines are
    scratch.lines, scratch.raw_text = dict(rep.lines), dict(rep.raw_text)
    composed = compose_file(str(path), scratch, data, budget=budget, choices=choices)
    if budget.refusal is not None:
        raise ConfigError(budget.refusal)
    return composed


def _searchpath_override(search: SearchPath, standins: str) -> str:
    """`hydra.searchpath=[...]`: the primary's entries that resolve, then the folder of stand-ins."""
    folders = [*search.folders[1:], standins]
    quoted = ",".join("'" + f"file://{f}".replace("\\", "\\\\").replace("'", "\\'") + "'" for f in folders)
    return f"{_SEARCHPATH_KEY}=[{quoted}]"


def _added_if_in_schema(override: str) -> str:
    """`cluster.train_each_cpu_num=0.25` as Hydra's add-or-override `++cluster.train_each_cpu_num=0.25` when the key
    is one of the cluster section's (either dialect, or `placement`'s): a valid key the file does not write is set,
    as written, rather than refused by Hydra (which adds a key only with `+`). Any other override is left as typed."""
    key, sep, _ = override.partition("=")
    parts = key.split(".")
    if not sep or key.startswith(("+", "~")) or parts[0] != "cluster" or len(parts) not in (2, 3):
        return override
    sections = (POOLS_SECTION, NODE_GROUPS_SECTION) if len(parts) == 2 else (PLACEMENT_BLOCK,)
    known = parts[-1] in {k for s in sections for k in s.fields}
    return f"++{override}" if known and (len(parts) == 2 or parts[1] == "placement") else override


def _compose(
    path: pathlib.Path,
    overrides: list[str],
    search: SearchPath | None,
    standins: str,
    budget: Budget,
    typed: Sequence[str],
    env: from_env.EnvReads,
) -> tuple[DictConfig, list, hydra_guard.Reading]:
    """(DictConfig with the hydra node, Hydra's final defaults list, what was read); a config missing only because
    of a skipped search path gets an empty stand-in and the composition is retried. Errors name the overrides as
    `typed`."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException
    from hydra.types import RunMode

    user = list(typed)
    for _ in range(_MAX_STANDINS):
        with hydra_guard.reading(budget, env) as reading:
            try:
                with warnings.catch_warnings():  # Hydra's migration notices are not the user's problem
                    warnings.simplefilter("ignore")
                    with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=VERSION_BASE):
                        cfg = compose(config_name=path.stem, overrides=overrides, return_hydra_config=True)
                        loader = GlobalHydra.instance().config_loader()
                        defaults = loader.compute_defaults_list(path.stem, overrides, RunMode.RUN).defaults
                _within_work(reading, path)  # hydra-core swallows some failed resolutions (`"name" in cfg`)
                return cfg, defaults, reading
            except MissingConfigException as e:
                if _refused(e, reading, path, user) or search is None or not _stand_in(e, search, standins):
                    raise _hydra_error(path, user, e, overrides) from None
            except Exception as e:  # Hydra's own errors: a bad override, a grammar error, an unset variable
                _refused(e, reading, path, user)
                raise _hydra_error(path, user, e, overrides) from None
    raise ConfigError(Problem("", f"more than {_MAX_STANDINS} configs are missing", file=str(path)))


def _refused(e: Exception, reading: hydra_guard.Reading, path: pathlib.Path, overrides: Sequence[str]) -> bool:
    """Raise what rlplace refused while hydra-core composed (a file over a limit, a token variable); False when
    `e` is hydra-core's own error."""
    refused = hydra_guard.refusal(e)
    if refused is not None:
        raise refused from None
    _within_work(reading, path)
    if reading.env.refused:
        name = reading.env.refused[0]
        culprit = next((o for o in overrides if name in o), None)
        where = OVERRIDE_ORIGIN.format(culprit) if culprit else str(path)
        raise ConfigError(
            Problem("", f"cannot resolve ${{oc.env:{name}}}: {from_env.token_variable_refused(name)}", file=where)
        )
    return False


def _within_work(reading: hydra_guard.Reading, path: pathlib.Path) -> None:
    """The ConfigError when the interpolations hydra-core resolved went over their budget."""
    if reading.work.over is not None:
        raise ConfigError(Problem(reading.work.key or "", reading.work.over, file=str(path)))


def _stand_in(e: Exception, search: SearchPath, standins: str) -> bool:
    """Write an empty stand-in for the config `e` misses, when only a skipped search path could supply it."""
    missing = getattr(e, "missing_cfg_file", None)
    options = getattr(e, "options", None) or []
    if not missing or "Cannot find primary config" in str(e):
        return False
    if near_miss(missing.rsplit("/", 1)[-1], options):
        return False  # a typo of an option that exists: an error, whatever the search path
    return _write_stand_in(standins, missing)


def _write_stand_in(standins: str, config_path: str) -> bool:
    """An empty config at `config_path` in the stand-ins folder; False if there is one already, or if the path
    leads out of the folder (`../`): nothing is ever written outside it."""
    folder = pathlib.Path(standins).resolve()
    target = (folder / f"{config_path}.yaml").resolve()
    if not target.is_relative_to(folder) or target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("{}\n")
    return True


def _sources(config_sources: ListConfig, path: pathlib.Path) -> SearchPath:
    """Hydra's search path (after overrides) as folders, in its order; Hydra's own package left out, and the
    primary's folder written as the user wrote it (messages then name the files as typed)."""
    from omegaconf import OmegaConf

    folders = []
    main = str(path.parent.resolve())
    listed = OmegaConf.to_container(config_sources, resolve=False)
    assert isinstance(listed, list), listed  # a ListConfig's container is a list (of dicts: one per source)
    for source in listed:
        if source["provider"] == "hydra" or source["schema"] == "structured" or "${" in source["path"]:
            continue
        folder = source["path"] if source["schema"] == "file" else package_folder(source["path"])
        if folder:
            folders.append(str(path.parent) if folder == main else folder)
    return SearchPath(folders)


def _locate_defaults(
    defaults: list,
    sources: SearchPath,
    standins: str,
    search: SearchPath,
    rep: Reporter,
    stamps: dict,
    reading: hydra_guard.Reading,
) -> list[Gap]:
    """Locate the values of each config of Hydra's final defaults list, in merge order; stand-ins are gaps."""
    gaps: list[Gap] = []
    files: dict[str, str] = {}
    for position, d in enumerate(defaults, start=1):
        if d.config_path.startswith("hydra/") or d.config_path == "_dummy_empty_config_":
            continue
        file = sources.find(d.config_path)
        if file is None:
            continue
        package = tuple(p for p in (d.package or "").split(".") if p)
        files[d.config_path] = file
        if file.startswith(standins):
            parent = files.get(d.parent or "", rep.file or "")
            entry = f"{d.config_path}@{d.package}" if d.package else d.config_path
            gaps.append(Gap(entry, d.config_path, package, search.variables(), parent, None, position))
            continue
        read = reading.files.get(os.path.realpath(file))
        if read is not None:  # every file hydra-core loaded was read by rlplace (hydra_guard)
            locate(rep, stamps, position, file, package, read.rep.lines, read.rep.raw_text)
    return gaps


def _locate_override(override: str, choices: Mapping[str, object], rep: Reporter) -> None:
    key = override.split("=", 1)[0].lstrip("+~").strip()
    if not key or key in choices or "/" in key or "@" in key or key.startswith("hydra."):
        return  # a group choice: its values are located in the chosen file
    path = tuple(int(p) if p.isdigit() else p for p in key.split("."))
    for known in [p for p in rep.lines if p[: len(path)] == path]:
        del rep.lines[known]  # the override replaced what the files wrote below it
    rep.lines[path] = None
    rep.files[path] = OVERRIDE_ORIGIN.format(override)


# --- hydra-core's errors -------------------------------------------------------------------------------


def _hydra_error(path: pathlib.Path, overrides: Sequence[str], e: Exception, given: Sequence[str]) -> ConfigError:
    """One problem with the root cause of a hydra-core failure, at the override it is about (else the file);
    `overrides` are the user's, `given` all that hydra-core was given (rlplace's search path too)."""
    culprit = _culprit(overrides, e)
    message = _missing_config(e) or _unknown_key(path, given, culprit, e) or _root_cause(e)
    where = OVERRIDE_ORIGIN.format(culprit) if culprit else str(path)
    return ConfigError(Problem("", f"Hydra could not compose the config: {message}", file=where))


def _root_cause(e: BaseException) -> str:
    """What each exception of the chain says, outermost first, without Hydra's links and OmegaConf's key
    dumps (hydra-core wraps an unset variable in an empty ConfigCompositionException)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        lines = [line.strip() for line in str(current).strip().splitlines()]
        text = " ".join(line for line in lines if line and not line.startswith(_NOISE))
        if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]  # a KeyError's quotes
        if text and text != "None" and not any(text in p for p in parts):
            parts.append(text)
        current = current.__cause__ or current.__context__
    return ": ".join(parts[:2]) or type(e).__name__


def _missing_config(e: Exception) -> str | None:
    """A missing option: Hydra's first line, the closest options, and where it looked."""
    missing = getattr(e, "missing_cfg_file", None)
    if not missing:
        return None
    first = str(e).strip().splitlines()[0]
    options = list(getattr(e, "options", None) or [])
    name = missing.rsplit("/", 1)[-1]
    typo = near_miss(name, options)
    group = missing.rsplit("/", 1)[0]
    closest = f"; did you mean {group}={typo}?" if typo else ""
    if len(options) <= _CLOSEST:
        closest += f"; options: {', '.join(options)}" if options else ""
    else:
        import difflib

        close = difflib.get_close_matches(name, options, n=_CLOSEST, cutoff=0.3) or options[:_CLOSEST]
        closest += f"; closest of the {len(options)} options: {', '.join(close)}"
    searched = [line.strip() for line in str(e).splitlines() if "path=" in line and "provider=hydra" not in line]
    folders = [s.split("path=", 1)[1] for s in searched if "structured://" not in s]
    return f"{first}{closest}" + (f" (searched {', '.join(folders)})" if folders else "")


def _unknown_key(path: pathlib.Path, overrides: Sequence[str], culprit: str | None, e: Exception) -> str | None:
    """`cluster.train_worker_nm=3`: no such key; did-you-mean from the keys there and rlplace's own."""
    match = _COULD_NOT_OVERRIDE.search(str(e))
    if not match or culprit is None:
        return None
    key = match.group(1)
    parent, _, last = key.rpartition(".")
    known = set(_keys_at(path, [o for o in overrides if o != culprit], parent))
    if parent in ("cluster", ""):
        known |= set(POOLS_SECTION.fields) | set(NODE_GROUPS_KEYS)
    close = _closest(last, known)
    value = culprit.split("=", 1)[1] if "=" in culprit else ""
    if close == last:  # the key exists elsewhere (a group's option, another section): adding it is what works
        return f"there is no key {key} to override here; write +{culprit.lstrip('+')} to add it"
    if close:
        fixed = f"{parent}.{close}" if parent else close
        return f"there is no key {key} to override; did you mean '{fixed}={value}'?"
    return f"there is no key {key} to override (write +{culprit.lstrip('+')} to add it)"


def _closest(word: str, options: set[str]) -> str | None:
    import difflib

    best = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    return best[0] if best else None


def _keys_at(path: pathlib.Path, overrides: list[str], parent: str) -> list[str]:
    """The keys of the config composed without the failing override at `parent` (empty if that fails too)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig, OmegaConf

    try:
        with warnings.catch_warnings(), hydra_guard.reading(Budget()):
            warnings.simplefilter("ignore")
            with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=VERSION_BASE):
                cfg = compose(config_name=path.stem, overrides=overrides)
        node = OmegaConf.select(cfg, parent) if parent else cfg
    except Exception:  # the rest fails too: no keys to suggest
        return []
    return [str(k) for k in node] if isinstance(node, DictConfig) else []


def _culprit(overrides: Sequence[str], e: Exception) -> str | None:
    """The override an error is about: the one whose key or line the message quotes."""
    text = str(e)
    failed = getattr(e, "override", None)
    if isinstance(failed, str):  # an override that does not parse (as typed, or as `_added_if_in_schema` wrote it)
        typed = next((o for o in overrides if o.lstrip("+") == failed.lstrip("+")), None)
        if typed is not None:
            return typed
    quoted = set(re.findall(r"'([^']+)'", text))
    missing = getattr(e, "missing_cfg_file", None)
    for o in overrides:
        key, _, value = o.partition("=")
        bare = key.lstrip("+~")
        if o in quoted or bare in quoted or (missing and missing == f"{bare.split('@')[0]}/{value}"):
            return o
    contained = [o for o in overrides if o in text]
    return max(contained, key=len) if contained else None


def split_arguments(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Command-line words -> (config files, Hydra overrides): `key=value`, `+key=value`, `~key` are overrides."""
    files: list[str] = []
    overrides: list[str] = []
    for arg in args:
        is_override = arg.startswith(("+", "~")) or ("=" in arg and not os.path.exists(arg))
        (overrides if is_override else files).append(arg)
    return files, overrides
