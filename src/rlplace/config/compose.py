"""Hydra configs as their users run them: `defaults:` lists, config groups and search paths, composed by rlplace.

RLightning's and RLinf's configs are Hydra config trees: a primary config (`conf/train_ppo.yaml`,
`examples/embodiment/config/maniskill_ppo_openvlaoft.yaml`) whose `defaults:` list picks configs of config
groups (`- cluster: 4t4e` -> `conf/cluster/4t4e.yaml` under `cluster:`; `- env/libero_spatial@env.train` ->
`env/libero_spatial.yaml` under `env.train:`), which may have defaults lists of their own. Without
command-line overrides rlplace composes the tree itself, with Hydra's whole defaults grammar (`defaults`) and
search path (`search_path`), so that every value keeps the file and line it was written at and no Hydra
install is needed. Overrides go through hydra-core (`hydra_compose`).

Every file is read by the hardened reader (`files.read_text`, `read_yaml`) against one `Budget` for the whole
tree: its bytes and alias values together, and at most MAX_CONFIGS configs loaded; the first limit gone over
stops the composition with that one problem. Before hydra-core composes a file with overrides, the same tree is
composed here with the overrides' group choices (`compose_file(..., choices=...)`), so that the limits hold
whoever composes.

What placement does not read never blocks it: a config that cannot be found because a `hydra.searchpath`
entry's variable is not set (RLinf's `${oc.env:EMBODIED_PATH}`) is left out, recorded as a `Gap`, and the
loader warns once naming the variable and what was left out; only a value rlplace reads that such a config
could have supplied is an error (`values.Values` checks each read against the gaps).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

from rlplace.config.defaults import SELF, Default, GrammarError, parse_entry
from rlplace.config.files import Unreadable, read_text
from rlplace.config.from_env import is_token_variable, token_variable_refused
from rlplace.config.problems import Path, Reporter, near_miss
from rlplace.config.search_path import SearchPath, env_variables, resolve_env, search_path
from rlplace.config.yaml_source import MAX_DEPTH, Budget, read_yaml
from rlplace.errors import Problem
from rlplace.model import EnvValue

if TYPE_CHECKING:
    from omegaconf import DictConfig

#: The file a value set by a command-line override comes from, in messages: `command line 'a.b=1'`.
OVERRIDE_ORIGIN = "command line {!r}"
_HEADER_LINE = re.compile(r"^\s*#\s*@")
_MISSING = "???"
_CLOSEST = 5


@dataclasses.dataclass(frozen=True)
class Gap:
    """A config left out because it can only come from a skipped search path entry."""

    entry: str  # the defaults entry as written: "model/pi0@actor.model"
    config_path: str  # what was looked for, from the config root: "model/pi0"
    package: Path  # where its content would have been merged
    variables: tuple[str, ...]  # the environment variables that would have found it
    file: str  # where the entry is written
    line: int | None
    position: int  # its place in the merge order (a later config's value is certain)


@dataclasses.dataclass(frozen=True)
class Choice:
    """A command-line override that may choose a config group's option, as hydra-core parsed it
    (`config/overrides.py`): the group (`env`, `env/sub`, `extra@pkg`), its option or options, whether it adds the
    group (`+`), and the override as typed (for messages)."""

    key: str
    value: str | list[str]
    adds: bool
    typed: str


@dataclasses.dataclass
class Composition:
    """A composed config: plain data, the gaps, and the merge position of the config that last wrote each key
    path (`stamps`; a gap only matters for a value written before it or not at all). `root` is hydra-core's
    DictConfig when hydra-core composed it."""

    data: object
    gaps: tuple[Gap, ...] = ()
    stamps: dict[Path, int] = dataclasses.field(default_factory=dict)
    root: DictConfig | None = None


def has_defaults(data: object) -> bool:
    return isinstance(data, Mapping) and "defaults" in data


def compose_file(
    path: str,
    rep: Reporter,
    data: object,
    text: str | None = None,
    budget: Budget | None = None,
    choices: Sequence[Choice] = (),
) -> Composition:
    """The primary config `path` (its `text`, read as `data`, located in `rep`) with its defaults lists
    composed in.

    Problems (a missing option, a malformed entry) go to `rep`; a skipped search path is warned about there.
    `budget` holds what the primary took of the limits (default: nothing yet); the first limit gone over stops
    the composition: its problem is in `rep` and the data is None. `choices` are command-line overrides: the
    group choices among them (`cluster=4t4e`, `+extra=x`) are applied as hydra-core would apply them.
    """
    if text is None:
        try:
            text = read_text(path)
        except Unreadable:
            text = None
    composer = _Composer(rep, search_path(path, searchpath_entries(data, rep)), budget or Budget(configs=1), choices)
    try:
        result = composer.compose(path, data, text)
    except _Stopped:
        refusal = composer.budget.refusal
        assert refusal is not None, "_Stopped is raised once the budget holds its refusal"
        if refusal not in rep.problems:
            rep.problems.append(refusal)
        return Composition(None)
    warn_skipped(rep, composer.search, composer.gaps)
    return Composition(result, tuple(composer.gaps), composer.stamps)


def searchpath_entries(data: object, rep: Reporter) -> list:
    """The primary's `hydra.searchpath` (a problem in `rep` if it is not a list of strings); an entry naming one
    of Ray's token variables is a problem and left out."""
    hydra = data.get("hydra") if isinstance(data, Mapping) else None
    entries = hydra.get("searchpath") if isinstance(hydra, Mapping) else None
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        rep.add(("hydra", "searchpath"), "hydra.searchpath must be a list of strings (folders)", entries)
        return []
    kept = []
    for i, entry in enumerate(entries):
        refused = [v for v in env_variables(entry) if is_token_variable(v)]
        if refused:
            rep.add(("hydra", "searchpath", i), f"cannot resolve {entry!r}: {token_variable_refused(refused[0])}")
        kept.append(None if refused else entry)
    return kept


def warn_skipped(rep: Reporter, search: SearchPath, gaps: list[Gap]) -> None:
    if not gaps:
        return
    entries = ", ".join(repr(e.text) for e in search.skipped)
    reasons = "; ".join(dict.fromkeys(e.reason for e in search.skipped))
    left_out = ", ".join(dict.fromkeys(g.entry for g in gaps))
    variables = search.variables()
    fix = f"set {' and '.join(variables)} to compose them" if variables else "fix the entry to compose them"
    many = len(search.skipped) > 1
    rep.warn(
        search.skipped[0].key,
        f"the search path{'s' if many else ''} {entries} {'are' if many else 'is'} skipped ({reasons}), so rlplace "
        f"composes without what only {'they' if many else 'it'} could supply: {left_out}; placement reads none of "
        f"their values ({fix})",
    )


@dataclasses.dataclass
class _Config:
    """One loaded config of the tree: its entry, file, own content and the lines of its own keys."""

    default: Default
    file: str
    content: object
    lines: dict[Path, int | None]
    raw: dict[Path, str]
    entry: tuple[str, int | None] | None = None  # file and line of the defaults entry that chose it
    children: list[_Config | Gap | str] | None = None  # str: SELF, this config's own content


@dataclasses.dataclass
class _Override:
    value: str | list[str] | None
    file: str
    line: int | None
    used: bool = False
    command_line: bool = False  # a command-line choice that no entry matches is a value for hydra-core, not ours


class _Stopped(Exception):
    """The composition stops: a limit of the config's Budget was gone over, or an entry is refused (the Budget's
    `refusal` holds the problem)."""


class _Composer:
    """Hydra's defaults-tree algorithm (hydra/_internal/defaults_list.py): entries are expanded last to first
    so that an `override` written later in a list (or deeper in a later entry) wins, then the tree is
    merged depth first with each config's own content where its `_self_` is."""

    def __init__(self, rep: Reporter, search: SearchPath, budget: Budget, choices: Sequence[Choice] = ()):
        self.rep = rep
        self.search = search
        self.budget = budget
        self.overrides: dict[str, _Override] = {}
        self.added: list[Default] = []  # `+group=option` on the command line: appended to the primary's list
        for choice in choices:
            self._command_line_choice(choice)
        self.choices: dict[str, object] = {}
        self.chosen_at: dict[str, tuple[str, int | None]] = {}
        self.stack: list[str] = []
        self.gaps: list[Gap] = []
        self.stamps: dict[Path, int] = {}
        self.position = 0

    def _command_line_choice(self, choice: Choice) -> None:
        """A command-line group choice, as hydra-core applies it: `group=option` replaces the choice wherever the
        group is chosen, `+group=option` adds the group to the primary's list (when the search path has such a
        group)."""
        if choice.adds:
            group, _, package = choice.key.partition("@")
            if self.search.options(group):
                self.added.append(Default(path=group, group=group, value=choice.value, package=package or None))
            return
        origin = OVERRIDE_ORIGIN.format(choice.typed)
        self.overrides.setdefault(choice.key, _Override(choice.value, origin, None, command_line=True))

    def compose(self, path: str, data: object, text: str | None) -> object:
        primary = Default(path=path.rsplit("/", 1)[-1].rsplit(".", 1)[0])
        root = _Config(primary, path, _own(data), dict(self.rep.lines), dict(self.rep.raw_text))
        primary.set_header(package_header(text))
        self.stack.append(path)
        self._expand(root, data)
        self._check_overrides_used()
        out = self._emit(root, {})
        if isinstance(out, dict):
            out.pop("hydra", None)  # Hydra's own settings: hydra-core keeps them apart from the config
        return out

    # --- building the tree ---------------------------------------------------------------------------

    def _expand(self, config: _Config, data: object) -> None:
        entries = self._entries(config, data)
        if len(self.stack) == 1 and self.added:  # the primary's own list
            entries = [*(entries or [Default(path=SELF)]), *self.added]  # hydra-core appends them to the primary
        if entries is None:
            return
        base, package = config.default.group_path(), config.default.final_package()
        self._register_overrides(config, entries, base, package)
        children: list[_Config | Gap | str | None] = []  # None: where an interpolated entry goes (below)
        deferred: list[tuple[int, Default]] = []
        for d in reversed(entries):
            if d.is_self:
                children.append(SELF)
                continue
            if d.override:
                continue
            d.set_parent(base, package)
            if d.group is not None and d.override_key() in self.overrides:
                chosen = self.overrides[d.override_key()]
                d.value, chosen.used = chosen.value, True
            if d.group is not None and isinstance(d.value, list):
                for item in reversed(d.value):
                    each = Default(path=f"{d.group}/{item}", package=d.package, optional=d.optional, index=d.index)
                    each.set_parent(base, package)
                    self._add(children, each, config)
            elif d.interpolation() is not None:
                deferred.append((len(children), d))
                children.append(None)  # once the other choices are known
            else:
                self._add(children, d, config)
        for at, d in reversed(deferred):  # from the end, so that earlier indices stay valid
            resolved = self._resolve_interpolation(d, config)
            children[at : at + 1] = [] if resolved is None else self._added(resolved, config)
        if children:
            config.children = [child for child in reversed(children) if child is not None]  # each None replaced

    def _entries(self, config: _Config, data: object) -> list[Default] | None:
        if not isinstance(data, Mapping) or "defaults" not in data:
            return None
        raw = data["defaults"]
        if not isinstance(raw, list):  # `defaults:` with nothing after it too: Hydra refuses it
            self._problem(config, ("defaults",), f"defaults must be a list like '- cluster: 1t1e', got {raw!r}")
            return None
        entries = []
        for i, item in enumerate(raw):
            try:
                entries.append(parse_entry(item, i))
            except GrammarError as e:
                self._problem(config, ("defaults", i), str(e))
        selves = [d for d in entries if d.is_self]
        if len(selves) > 1:
            self._problem(config, ("defaults", selves[1].index), "_self_ is written twice in this defaults list")
        if not selves and (any(not d.override for d in entries) or not entries):
            entries.append(Default(path=SELF, index=len(raw)))  # Hydra 1.1+: the file's own content comes last
        return entries

    def _register_overrides(self, config: _Config, entries: list[Default], base: str, package: str) -> None:
        seen_override: Default | None = None
        for d in entries:
            if d.is_self:
                continue
            d.set_parent(base, package)
            if seen_override is not None and not d.override:
                self._problem(
                    config,
                    ("defaults", d.index),
                    f"'{d.text()}' comes after 'override {seen_override.override_key()}': Hydra requires overrides "
                    "at the end of the defaults list",
                )
            if d.override and d.group is not None:
                seen_override = d
                if d.group_path().split("/")[0] != "hydra":
                    line = config.lines.get(("defaults", d.index))
                    self.overrides.setdefault(d.override_key(), _Override(d.value, config.file, line))

    def _check_overrides_used(self) -> None:
        for key, o in self.overrides.items():
            if not o.used and not o.command_line:
                self.rep.problems.append(
                    Problem(
                        "defaults",
                        f"'override {key}: {o.value}' matches no entry of the defaults lists (nothing chooses "
                        f"config group {key.split('@')[0]})",
                        file=o.file,
                        line=o.line,
                    )
                )

    def _add(self, children: list, d: Default, parent: _Config) -> None:
        children.extend(reversed(self._added(d, parent)))

    def _added(self, d: Default, parent: _Config) -> list:
        """What one entry adds to its parent's children: a loaded config, a gap, or nothing."""
        if d.group_path().split("/")[0] == "hydra":
            return []  # Hydra's own configs (hydra/job_logging, ...): they configure Hydra, not the config
        if d.group is not None and not self._known_choice(d, parent):
            return []
        name = d.name()
        if name is None:
            return []  # `- group: null`
        if name == _MISSING:
            key = d.override_key()
            self._problem(
                parent,
                ("defaults", d.index),
                f"no option is chosen for config group '{key}' (???): "
                f"choose one with {key}=OPTION; options: {', '.join(self.search.options(d.group_path()))}",
            )
            return []
        file = self.search.find(d.config_path())
        if file is None:
            return self._not_found(d, parent)
        if file in self.stack:
            self._problem(parent, ("defaults", d.index), f"the defaults lists include {file} again (a cycle)")
            return []
        over = self.budget.take_config()
        if over is not None:
            self._stop(Problem("defaults", over, file=parent.file, line=parent.lines.get(("defaults", d.index))))
        self.budget.files.add(os.path.realpath(file))
        sub = Reporter(file)
        try:
            text: str | None = read_text(file)
        except Unreadable as e:
            text = None
            sub.add((), str(e))
        d.set_header(package_header(text))
        if len(_path(d.final_package())) > MAX_DEPTH:
            self._problem(parent, ("defaults", d.index), f"its package is nested more than {MAX_DEPTH} levels deep")
            return []
        data = read_yaml(text, sub, self.budget) if text is not None else None
        if self.budget.refusal is not None:
            self.rep.problems.extend(sub.problems)
            raise _Stopped
        shape = not_a_config(data)
        if shape is not None:
            sub.add((), shape)
            data = None
        self.rep.problems.extend(sub.problems)
        data = {} if data is None else data
        config = _Config(
            d, file, _own(data), sub.lines, sub.raw_text, (parent.file, parent.lines.get(("defaults", d.index)))
        )
        self.stack.append(file)
        try:
            self._expand(config, data)
        finally:
            self.stack.pop()
        return [config]

    def _known_choice(self, d: Default, parent: _Config) -> bool:
        """Each group is chosen once: Hydra refuses a second choice, and the same choice listed twice."""
        key, name = d.override_key(), d.name()
        if key not in self.choices:
            self.choices[key] = name
            self.chosen_at[key] = (parent.file, parent.lines.get(("defaults", d.index)))
            return True
        later, (file, line) = self.choices[key], self.chosen_at[key]  # entries are expanded last to first
        fix = "delete one of them" if later == name else f"write the later one as '- override {key}: {later}'"
        message = f"config group {key} is chosen twice ({name}, then {later}); {fix}"
        self.rep.problems.append(Problem("defaults", message, file=file, line=line))
        return False

    def _resolve_interpolation(self, d: Default, parent: _Config) -> Default | None:
        """`- db: ${choice}` or `${oc.env:VAR}`, resolved as Hydra does: against the other choices."""
        written = d.interpolation() or ""
        refused = [v for v in env_variables(written) if is_token_variable(v)]
        if refused:
            self._problem(
                parent, ("defaults", d.index), f"cannot resolve {d.text()!r}: {token_variable_refused(refused[0])}"
            )
            return None
        text, unset = resolve_env(written, os.environ)
        if env_variables(written) and not unset:
            self.rep.from_env.append(EnvValue(f"defaults: {d.text()}", written, text, tuple(env_variables(written))))
        if unset:
            self._problem(parent, ("defaults", d.index), f"cannot resolve {d.text()!r}: {unset[0]} is not set")
            return None

        def choice(match: re.Match[str]) -> str:
            value = self.choices.get(match.group(1).strip())
            if not isinstance(value, str):
                raise KeyError(match.group(1))
            return value

        try:
            resolved = re.sub(r"\$\{([^}]*)\}", choice, text)
        except KeyError as e:
            known = ", ".join(k for k in self.choices if isinstance(self.choices[k], str))
            self._problem(
                parent,
                ("defaults", d.index),
                f"cannot resolve {text!r}: no config group {e.args[0]!r} is "
                f"chosen before it (chosen: {known or 'none'})",
            )
            return None
        if d.group is None:
            d.path = resolved
        else:
            d.value = resolved
        return d

    def _not_found(self, d: Default, parent: _Config) -> list:
        if d.optional:
            return []
        group, name = d.group_path(), d.name() or ""
        options = self.search.options(group)
        if self.search.skipped and climbs_out(d.config_path()):  # a stand-in for it would be written outside
            message = (
                f"'{d.text()}' is not found, and it climbs out of the search path's folders (../ above their top), "
                "so no skipped search path entry could supply it from inside its folder: rlplace does not leave it "
                "out; fix the entry"
            )
            self._stop(Problem("defaults", message, file=parent.file, line=parent.lines.get(("defaults", d.index))))
        if self.search.skipped and not near_miss(name, options):
            line = parent.lines.get(("defaults", d.index))
            return [
                Gap(d.text(), d.config_path(), _path(d.final_package()), self.search.variables(), parent.file, line, -1)
            ]
        what = f"config group {group}: no option '{name}'" if d.group is not None or group else f"no config '{name}'"
        looked = self.search.where(d.config_path())
        where = looked[0] if len(looked) == 1 else "any of " + ", ".join(looked)
        skipped = "".join(f"; the search path {e.text!r} is skipped ({e.reason})" for e in self.search.skipped)
        self._problem(parent, ("defaults", d.index), f"{what} ({where}){_options_hint(name, options, group)}{skipped}")
        return []

    def _stop(self, problem: Problem) -> NoReturn:
        """End the composition with `problem` (whoever composes: hydra_compose's preflight raises it too)."""
        self.budget.refusal = problem
        raise _Stopped

    def _problem(self, config: _Config, path: Path, message: str) -> None:
        line = config.lines.get(path, config.lines.get(path[:1]))
        self.rep.problems.append(Problem("defaults" if path else "", message, file=config.file, line=line))

    # --- merging ---------------------------------------------------------------------------------------

    def _emit(self, config: _Config, result: object) -> object:
        package = _path(config.default.final_package())
        if config.entry is not None:  # keys only the package makes (`env` of `env.train`): at the entry
            for n in range(1, len(package)):
                if package[:n] not in self.rep.lines:
                    self.rep.files[package[:n]], self.rep.lines[package[:n]] = config.entry
        if config.children is None:
            return self._merge(config, result)
        for child in config.children:
            if isinstance(child, str):  # SELF, the only text a config's children hold
                result = self._merge(config, result)
            elif isinstance(child, Gap):
                self.gaps.append(dataclasses.replace(child, position=self.position))
                self.position += 1
            else:
                result = self._emit(child, result)
        return result

    def _merge(self, config: _Config, result: object) -> object:
        package = _path(config.default.final_package())
        self.position += 1
        locate(self.rep, self.stamps, self.position, config.file, package, config.lines, config.raw)
        conflicts: list[Path] = []
        merged = merge_at(result, package, config.content, conflicts)
        for path in conflicts:
            self.rep.add(
                path,
                f"{config.file} merges a list and a mapping at this key (one over the other); Hydra "
                "cannot merge them: make both a list or both a mapping",
            )
        return merged


def locate(
    rep: Reporter,
    stamps: dict[Path, int],
    position: int,
    file: str,
    package: Path,
    lines: Mapping[Path, int | None],
    raw: Mapping[Path, str],
) -> None:
    """Record where a config's own keys (merged at `package`) were written: file, line and merge position."""
    rep_lines, rep_files = rep.lines, rep.files
    for path, line in lines.items():
        if path and path[0] == "defaults":
            continue
        full = (*package, *path)
        rep_lines[full] = line
        rep_files[full] = file
        stamps[full] = position
    for path, text in raw.items():
        rep.raw_text[(*package, *path)] = text


def merge_at(base: object, package: Path, value: object, conflicts: list[Path]) -> object:
    """`base` with `value` merged at key path `package`, as OmegaConf merges: mappings key by key, anything else
    (lists too) replaces, and `???` never replaces a value. A mapping over a list (or the reverse) is kept as
    it was and its path added to `conflicts` (Hydra refuses it)."""
    nested: object = value
    for part in reversed(package):
        nested = {part: nested}
    return _merge(base, nested, (), conflicts)


def _merge(base: object, over: object, path: Path, conflicts: list[Path]) -> object:
    if isinstance(base, dict) and isinstance(over, Mapping):
        out = dict(base)
        for k, v in over.items():
            if k in out:
                out[k] = _merge(out[k], v, (*path, k), conflicts)
            else:
                out[k] = v
        return out
    if over == _MISSING and base is not None:
        return base
    if (isinstance(base, Mapping) and isinstance(over, list)) or (isinstance(base, list) and isinstance(over, Mapping)):
        conflicts.append(path)
        return base
    return over


def _own(data: object) -> object:
    """A config's content without its own `defaults:` list (Hydra removes the top-level one only)."""
    if isinstance(data, Mapping) and "defaults" in data:
        return {k: v for k, v in data.items() if k != "defaults"}
    return {} if data is None else data


def package_header(text: str | None) -> str | None:
    """The `# @package` header, read as Hydra reads it: leading `# @key value` lines of the first 512 chars."""
    for line in (text or "")[:512].splitlines():
        line = line.strip()
        if not line:
            continue
        if not _HEADER_LINE.match(line):
            break
        words = line.lstrip("#").strip().split()
        if len(words) == 2 and words[0] == "@package":
            return words[1]
    return None


def not_a_config(data: object) -> str | None:
    """What is wrong with a config file's data that is neither a mapping nor a list (None: nothing)."""
    if data is None or isinstance(data, Mapping | list):
        return None
    return f"a config file holds a mapping or a list, not {data!r} (Hydra cannot load it)"


def climbs_out(config_path: str) -> bool:
    """Whether a config path (from the config root) leads above the root of the folder it is looked up in."""
    normal = posixpath.normpath(config_path)
    return normal == ".." or normal.startswith("../") or posixpath.isabs(normal)


def _path(package: str) -> Path:
    return tuple(p for p in package.split(".") if p) if package else ()


def _options_hint(name: str, options: list[str], group: str) -> str:
    """`; options there: a, b` (few), `; closest of the 38 options there: ...` (many), or that the group is
    not there."""
    if not options:
        return f"; there is no config group {group} on the search path" if group else ""
    if len(options) <= _CLOSEST:
        return f"; options there: {', '.join(options)}"
    close = difflib.get_close_matches(name, options, n=_CLOSEST, cutoff=0.3) or options[:_CLOSEST]
    return f"; closest of the {len(options)} options there: {', '.join(close)}"
