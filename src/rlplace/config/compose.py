"""Hydra configs as their users run them: `defaults:` lists, config groups and command-line overrides.

RLightning's (and many RLinf users') configs are Hydra config trees: a primary config (`conf/train_ppo.yaml`)
whose `defaults:` list picks one file per config group (`- cluster: 4t4e` -> `conf/cluster/4t4e.yaml`,
merged under `cluster:`), and group files with defaults lists of their own (`- resource_pool: global_pool`
in `conf/cluster/2t2e_manual.yaml` -> `conf/cluster/resource_pool/global_pool.yaml`, merged under
`resource_pool:`).

- Without overrides, rlplace composes a file's defaults list itself, the way Hydra does for the forms
  configs use (`- group: option`, `- group@package: option`, `- override group: option`, `- optional ...`,
  `- other_config`, `_self_` where written, else last; `# @package _global_`). Every value keeps the file
  and line it was written at, and no Hydra install is needed.
- With overrides (`cluster=4t4e_manual cluster.train_worker_num=8`), hydra-core's compose API does the
  composition (optional extra `rlplace[hydra]`); values are then located in the files of the options Hydra
  chose, and a value set on the command line points at the override that set it.
"""

from __future__ import annotations

import pathlib
import re
import warnings
from collections.abc import Mapping, Sequence

from rlplace.config.problems import Path, Reporter, show
from rlplace.config.yaml_source import read_yaml
from rlplace.errors import ConfigError, Problem

#: The file a value set by a command-line override comes from, in messages: `command line 'a.b=1'`.
OVERRIDE_ORIGIN = "command line {!r}"
_PACKAGE_HEADER = re.compile(r"^\s*#\s*@package\s+(\S+)", re.MULTILINE)
_SUFFIXES = (".yaml", ".yml")


def has_defaults(data: object) -> bool:
    return isinstance(data, Mapping) and "defaults" in data


def compose_file(path: pathlib.Path, rep: Reporter, data: object, choices: Mapping[str, str] | None = None) -> object:
    """The file's content with its defaults list composed in (recursively), located in `rep`.

    `choices` (group path -> option) replaces the options written in defaults lists (Hydra's choices after
    overrides). Problems (a missing option file, a malformed entry) go to `rep`.
    """
    return _Composer(rep, dict(choices or {})).primary(path, data)


class _Composer:
    def __init__(self, rep: Reporter, choices: dict[str, str]):
        self.rep = rep
        self.choices = choices
        self.stack: list[pathlib.Path] = []

    def primary(self, path: pathlib.Path, data: object) -> object:
        self._collect_overrides(data)
        return self._compose(path, data, "", (), dict(self.rep.lines), dict(self.rep.raw_text))

    def _collect_overrides(self, data: object) -> None:
        """`- override group: option` in the primary's list changes the option wherever the group is chosen."""
        entries = data.get("defaults") if has_defaults(data) else None  # type: ignore[union-attr]
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, Mapping) and len(entry) == 1:
                ((key, option),) = entry.items()
                words = str(key).split()
                if len(words) == 2 and words[0] == "override" and isinstance(option, str):
                    self.choices.setdefault(words[1].split("@")[0], option)

    def _compose(
        self, file: pathlib.Path, data: object, group: str, package: Path, lines: dict[Path, int], raw: dict[Path, str]
    ) -> object:
        """This file's defaults and own content, placed at `package` (from the root); `lines`/`raw` are the
        file's own (key paths relative to the file)."""
        if file in self.stack:
            self._problem(file, lines, ("defaults",), f"the defaults lists include {file} again (a cycle)")
            return {}
        self.stack.append(file)
        try:
            return self._merge_defaults(file, data, group, package, lines, raw)
        finally:
            self.stack.pop()

    def _merge_defaults(
        self, file: pathlib.Path, data: object, group: str, package: Path, lines: dict[Path, int], raw: dict[Path, str]
    ) -> object:
        own = {k: v for k, v in data.items() if k != "defaults"} if isinstance(data, Mapping) else data
        entries = data.get("defaults") if has_defaults(data) else []  # type: ignore[union-attr]
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            self._problem(
                file, lines, ("defaults",), f"defaults must be a list like '- cluster: 1t1e', got {show(entries)}"
            )
            entries = []
        if "_self_" not in entries:
            entries = [*entries, "_self_"]  # Hydra 1.1+: the file's own content comes last
        result: object = {}
        for i, entry in enumerate(entries):
            if entry == "_self_":
                self._locate(file, package, lines, raw)
                result = _at(result, package, own)
                continue
            for sub_file, sub_group, sub_package in self._entry(file, lines, group, package, entry, i):
                result = _merge(result, self._include(sub_file, sub_group, sub_package))
        return result

    def _entry(
        self, file: pathlib.Path, lines: dict[Path, int], group: str, package: Path, entry: object, i: int
    ) -> list[tuple[pathlib.Path, str, Path]]:
        """The files one defaults entry includes, with the group and package of each."""
        where = ("defaults", i)
        folder = file.parent
        if isinstance(entry, str):  # another config of this group, merged at this package
            found = _find(folder, entry)
            if found is None:
                self._missing(file, lines, where, folder, group or "(primary)", entry)
                return []
            return [(found, group, package)]
        if not isinstance(entry, Mapping) or len(entry) != 1:
            self._problem(
                file,
                lines,
                where,
                f"a defaults entry is '- group: option', '- config' or '- _self_', got {show(entry)}",
            )
            return []
        ((key, option),) = entry.items()
        words = str(key).split()
        if len(words) == 2 and words[0] in ("override", "optional"):
            optional, key = words[0] == "optional", words[1]
        elif len(words) == 1:
            optional = False
        else:
            self._problem(file, lines, where, f"cannot read the defaults entry {show(entry)}")
            return []
        name, _, at = str(key).partition("@")
        full = _join(group, name)
        if full.split("/")[0] == "hydra":
            return []  # Hydra's own groups (hydra/job_logging, ...): they configure Hydra, not the config
        option = self.choices.get(full, option)
        if option is None:
            return []
        if option == "???":
            self._problem(
                file,
                lines,
                where,
                f"no option is chosen for config group '{full}' (???): choose one with {full}=OPTION",
            )
            return []
        target = _package(package, name, at)
        out = []
        for opt in option if isinstance(option, list) else [option]:
            found = _find(folder / name, str(opt))
            if found is not None:
                out.append((found, full, target))
            elif not optional:
                self._missing(file, lines, where, folder / name, full, str(opt))
        return out

    def _include(self, sub_file: pathlib.Path, group: str, package: Path) -> object:
        sub_rep = Reporter(str(sub_file))
        try:
            text = sub_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            self.rep.problems.append(Problem("", f"cannot read the file: {e}", file=str(sub_file)))
            return {}
        data = read_yaml(text, sub_rep)
        self.rep.problems.extend(sub_rep.problems)
        header = _PACKAGE_HEADER.search(text)
        if header:
            package = _header_package(header.group(1), package)
        return self._compose(sub_file, {} if data is None else data, group, package, sub_rep.lines, sub_rep.raw_text)

    def _locate(self, file: pathlib.Path, package: Path, lines: dict[Path, int], raw: dict[Path, str]) -> None:
        """Record where the file's own keys (placed at `package`) were written."""
        for path, line in lines.items():
            if path[:1] != ("defaults",):
                self.rep.lines[(*package, *path)] = line
                self.rep.files[(*package, *path)] = str(file)
        for path, text in raw.items():
            self.rep.raw_text[(*package, *path)] = text

    def _problem(self, file: pathlib.Path, lines: dict[Path, int], path: Path, message: str) -> None:
        line = lines.get(path, lines.get(path[:1]))
        self.rep.problems.append(Problem("defaults" if path else "", message, file=str(file), line=line))

    def _missing(
        self, file: pathlib.Path, lines: dict[Path, int], where: Path, folder: pathlib.Path, group: str, option: str
    ) -> None:
        found = sorted(p.stem for p in folder.glob("*") if p.suffix in _SUFFIXES) if folder.is_dir() else []
        have = f"; options there: {', '.join(found)}" if found else f"; there is no folder {folder}"
        self._problem(file, lines, where, f"config group {group}: no option '{option}' ({folder / option}.yaml){have}")


def _find(folder: pathlib.Path, option: str) -> pathlib.Path | None:
    for suffix in _SUFFIXES:
        candidate = folder / f"{option}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _join(group: str, name: str) -> str:
    return f"{group}/{name}" if group else name


def _package(current: Path, name: str, at: str) -> Path:
    """Where a group's option is merged: under the group's name, or `group@pkg` (`_here_`, `_global_`)."""
    if not at:
        return (*current, *name.split("/"))
    if at == "_here_":
        return current
    if at.startswith("_global_"):
        return tuple(p for p in at[len("_global_") :].split(".") if p)
    return (*current, *at.split("."))


def _header_package(header: str, default: Path) -> Path:
    if header == "_group_":
        return default
    if header.startswith("_global_"):
        return tuple(p for p in header[len("_global_") :].split(".") if p)
    return tuple(header.split("."))


def _merge(base: object, over: object) -> object:
    """OmegaConf's merge: mappings merge key by key, anything else (lists too) replaces."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(out[k], v) if k in out else v
        return out
    return over


def _at(base: object, package: Path, value: object) -> object:
    """`base` with `value` merged at key path `package`."""
    nested: object = value
    for part in reversed(package):
        nested = {part: nested}
    return _merge(base, nested)


# --- Hydra, for command-line overrides ---------------------------------------------------------------


def compose_with_hydra(path: pathlib.Path, overrides: Sequence[str], rep: Reporter) -> tuple[object, object]:
    """(plain data, DictConfig) of `path` composed by Hydra with `overrides`; values located in `rep`."""
    try:
        from hydra import compose, initialize_config_dir
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
    try:
        with warnings.catch_warnings():  # "Defaults list is missing _self_": Hydra's migration notice, not the user's
            warnings.simplefilter("ignore", UserWarning)
            with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=None):
                cfg = compose(config_name=path.stem, overrides=list(overrides), return_hydra_config=True)
    except Exception as e:  # Hydra's own errors: a bad override, a missing option, a grammar error
        raise ConfigError(
            Problem("", f"Hydra could not compose the config: {_one_line(e)}", file=_blame(path, overrides, e))
        ) from None
    choices = {k: v for k, v in OmegaConf.to_container(cfg.hydra.runtime.choices).items() if not k.startswith("hydra")}
    with open_dict(cfg):
        del cfg["hydra"]
    _locate_composed(path, rep, choices)
    for override in overrides:
        _locate_override(override, choices, rep)
    return OmegaConf.to_container(cfg, resolve=False), cfg


def _locate_composed(path: pathlib.Path, rep: Reporter, choices: Mapping[str, object]) -> None:
    """Lines of the composed config: the same files composed by rlplace, with Hydra's choices."""
    scratch = Reporter(str(path))
    try:
        data = read_yaml(path.read_text(encoding="utf-8"), scratch)
    except (OSError, UnicodeDecodeError):
        return
    compose_file(path, scratch, data, {k: str(v) for k, v in choices.items() if v is not None})
    rep.lines.update(scratch.lines)
    rep.files.update(scratch.files)
    rep.raw_text.update(scratch.raw_text)


def _locate_override(override: str, choices: Mapping[str, object], rep: Reporter) -> None:
    key = override.split("=", 1)[0].lstrip("+~").strip()
    if not key or key in choices or "/" in key or "@" in key:
        return  # a group choice: its values are located in the chosen file
    path = tuple(int(p) if p.isdigit() else p for p in key.split("."))
    for known in [p for p in rep.lines if p[: len(path)] == path]:
        del rep.lines[known]  # the override replaced what the files wrote below it
    rep.lines[path] = None
    rep.files[path] = OVERRIDE_ORIGIN.format(override)


def _blame(path: pathlib.Path, overrides: Sequence[str], e: Exception) -> str:
    """An error about an override names it; anything else names the file."""
    text = str(e)
    culprit = next((o for o in overrides if o in text or o.split("=", 1)[0] in text), None)
    return OVERRIDE_ORIGIN.format(culprit) if culprit else str(path)


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def split_arguments(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Command-line words -> (config files, Hydra overrides): `key=value`, `+key=value`, `~key` are overrides."""
    files: list[str] = []
    overrides: list[str] = []
    for arg in args:
        is_override = arg.startswith(("+", "~")) or ("=" in arg and not pathlib.Path(arg).exists())
        (overrides if is_override else files).append(arg)
    return files, overrides
