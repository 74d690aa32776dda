"""Safe YAML loading that remembers the line of every key, so each Problem can name its line.

libyaml (PyYAML's C parser, `CSafeLoader`) composes the node tree, which carries marks; we build the Python
values from it ourselves, recording the line of every mapping key and list item under its key path. That
is about ten times faster than PyYAML's pure-Python loader, and where libyaml is missing the pure-Python
SafeLoader composes the same tree. Scalars are built by the safe constructor's functions for the standard
tags only, so no object is ever built from a tag. Things PyYAML accepts silently but a user never means are
reported: duplicate keys (PyYAML keeps the last), custom tags, and YAML 1.1 base-60 numbers (`placement:
1:1` would otherwise be the int 61; it stays the string "1:1").

Limits, each named in its message: MAX_BYTES of text (checked before parsing, so a huge file is refused at
once; a file under it is read in time proportional to its size), MAX_ALIAS_VALUES values built again by
expanding aliases (a "billion laughs" document is small but expands without end), MAX_DEPTH levels of nesting.
A config composed of several files (a Hydra defaults tree, whoever composes it) shares one `Budget`: the bytes
and alias values of all its files count against the same limits, and it loads at most MAX_CONFIGS configs, so
splitting a bomb over many files gains nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import yaml

from rlplace.config.fields import INVALID
from rlplace.config.problems import Path, Reporter
from rlplace.errors import Problem


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml's loader where built: a base chosen at run time
    """Scalars typed as OmegaConf's loader (so Hydra) types them: `1e-5` is a float, `2024-01-01` stays text."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
        |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}

_YAML = "tag:yaml.org,2002:"
_MAP_TAG, _SEQ_TAG, _STR_TAG, _MERGE_TAG = _YAML + "map", _YAML + "seq", _YAML + "str", _YAML + "merge"
_INT_TAG = _YAML + "int"
_NUMBER_TAGS = frozenset({_INT_TAG, _YAML + "float"})
#: The scalar tags a plain YAML config uses; anything else (`!include`, `!!python/name:...`) is refused.
_CONSTRUCT = {
    _YAML + "int": yaml.SafeLoader.construct_yaml_int,
    _YAML + "float": yaml.SafeLoader.construct_yaml_float,
    _YAML + "bool": yaml.SafeLoader.construct_yaml_bool,
    _YAML + "null": yaml.SafeLoader.construct_yaml_null,
}

#: A config with every file its defaults lists load. A refusal of a tree at its last file costs parsing what
#: came before it: about 0.8 s on a quiet machine at 1 MiB of the densest YAML (one value per 6 bytes; issue 15's
#: 0.86 MiB list took 0.7 s, and loads), twice that at 2 MiB; the largest real trees are a few hundred KiB.
MAX_BYTES = 2**20
MAX_ALIAS_VALUES = 100_000
MAX_DEPTH = 64
#: Configs one composition may load (RLinf's largest trees load about 20).
MAX_CONFIGS = 256
_TOO_DEEP = f"the document is nested more than {MAX_DEPTH} levels deep"
_TOO_MANY_ALIASES = f"the document is too large: aliases expand it by more than {MAX_ALIAS_VALUES} values"


class _TooLarge(Exception):
    """(key path, message)"""


@dataclasses.dataclass
class Budget:
    """What the files of one config have taken of the limits so far (one file alone, or a whole defaults tree)."""

    bytes: int = 0
    alias_values: int = 0
    configs: int = 0
    #: The problem that stopped the composition: the first limit gone over (the rest would only be slow), or an
    #: entry refused (one rlplace would have to write a stand-in outside its folder for).
    refusal: Problem | None = None
    #: The files counted (real paths): hydra-core reading a file again after rlplace's preflight counts nothing.
    files: set[str] = dataclasses.field(default_factory=set)

    def take_config(self) -> str | None:
        """Count one more config loaded; the message when that is more than MAX_CONFIGS."""
        self.configs += 1
        if self.configs > MAX_CONFIGS:
            return f"the defaults lists load more than {MAX_CONFIGS} configs (RLinf's largest trees load about 20)"
        return None

    def take_bytes(self, size: int) -> str | None:
        """Count a file of `size` bytes; the message when the config's files then hold more than MAX_BYTES."""
        self.bytes += size
        return too_large(self.bytes, composed=self.configs > 1) if self.bytes > MAX_BYTES else None


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, rep: Reporter, budget: Budget):
        self.loader = loader
        self.rep = rep
        self.lines = rep.lines
        self.raw_text = rep.raw_text
        self.collections: set[int] = set()  # ids of mapping/list nodes built once: a second visit is an alias
        self.in_alias = False
        self.budget = budget  # its alias_values: values built again through aliases, in this config's files
        self.flattened: dict[int, list[tuple[yaml.Node, yaml.Node]]] = {}  # mappings with merge keys, resolved

    def build(self, node: yaml.Node, path: Path) -> object:
        if self.in_alias:
            self.budget.alias_values += 1
            if self.budget.alias_values > MAX_ALIAS_VALUES:
                raise _TooLarge(path[:3], _TOO_MANY_ALIASES)
        if len(path) > MAX_DEPTH:
            raise _TooLarge(path[:3], _TOO_DEEP)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if id(node) in self.collections and not self.in_alias:
            self.in_alias = True  # a collection built again: everything inside it counts against the limit
            try:
                return self._collection(node, path)
            finally:
                self.in_alias = False
        self.collections.add(id(node))
        return self._collection(node, path)

    def _collection(self, node: yaml.Node, path: Path) -> object:
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        self._plain_tag(node, _SEQ_TAG, path)
        out = []
        lines = self.lines
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            out.append(self.build(item, (*path, i)))
        return out

    def _plain_tag(self, node: yaml.Node, expected: str, path: Path) -> None:
        if node.tag != expected:
            self.rep.add(path, f"the tag {node.tag} is not allowed here; remove it (plain YAML only)", node.tag)

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict:
        self._plain_tag(node, _MAP_TAG, path)
        pairs = self._merged(node, path) if any(k.tag == _MERGE_TAG for k, _ in node.value) else node.value
        out: dict = {}
        first_line: dict[object, int] = {}
        lines = self.lines
        for key_node, value_node in pairs:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                self.rep.add(path, f"line {line}: a key must be a plain word, not a list or mapping")
                continue
            key = key_node.value if key_node.tag == _STR_TAG else self._value(key_node, path)
            key_path = (*path, key if isinstance(key, str) else str(key))
            lines.setdefault(key_path, line)
            if key in first_line:
                self.rep.add(
                    key_path,
                    f"key '{key}' is written twice (lines {first_line[key]} and {line}); YAML would keep only "
                    f"the last one, delete one of them",
                    key,
                )
                continue
            first_line[key] = line
            out[key] = self.build(value_node, key_path)
        return out

    def _merged(self, node: yaml.MappingNode, path: Path) -> list[tuple[yaml.Node, yaml.Node]]:
        """The pairs of a mapping with merge keys (`<<: *a`, `<<: [*a, *b]`), as YAML merges them: the merged
        mappings' pairs (an earlier mapping's key wins over a later's), less those the mapping writes itself, then
        its own, which win. Each merged pair is a value built again, counted against MAX_ALIAS_VALUES as an alias
        is: PyYAML's own `flatten_mapping` copies every pair of every merge (before 6.0.3 with no deduplication:
        `<<: [*a, *a, ...]` ten times a line grows tenfold a line), so a few lines would build millions."""
        flat = self.flattened.get(id(node))
        if flat is not None:
            return flat
        merged: dict[tuple[str, str], tuple[yaml.Node, yaml.Node]] = {}
        own = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"expected a mapping or list of mappings for merging, but found {source.id}",
                        source.start_mark,
                    )
                pairs = (
                    self._merged(source, path) if any(k.tag == _MERGE_TAG for k, _ in source.value) else source.value
                )
                self.budget.alias_values += len(pairs)
                if self.budget.alias_values > MAX_ALIAS_VALUES:
                    raise _TooLarge(path[:3], _TOO_MANY_ALIASES)
                for pair in pairs:
                    merged.setdefault(_key_of(pair[0]), pair)
        written = {_key_of(k) for k, _ in own}
        flat = [pair for key, pair in merged.items() if key not in written] + own
        self.flattened[id(node)] = flat
        return flat

    def _scalar(self, node: yaml.ScalarNode, path: Path) -> object:
        if not node.style:  # plain (None from PyYAML's parser, "" from libyaml's)
            self.raw_text[path] = node.value
        return node.value if node.tag == _STR_TAG else self._value(node, path)

    def _value(self, node: yaml.ScalarNode, path: Path) -> object:
        construct = _CONSTRUCT.get(node.tag)
        if construct is None:
            self.rep.add(path, f"the tag {node.tag} is not allowed here; remove it (plain YAML only)", node.tag)
            return INVALID  # reported: no knock-on problem about its value
        text = node.value
        if not node.style and node.tag in _NUMBER_TAGS and ":" in text:
            return text  # YAML 1.1 sexagesimal: `1:1` is a placement, not 61
        if node.tag == _INT_TAG and text.isdigit() and (text[0] != "0" or text == "0"):
            return int(text)  # the common case, without the constructor's generality (0o, 0x, 1_000, 0123)
        return construct(self.loader, node)


def _key_of(node: yaml.Node) -> tuple[str, str]:
    """What makes two keys of a mapping the same key: their tag and text (`=`, YAML's value key, is text)."""
    tag = _STR_TAG if node.tag == _YAML + "value" else node.tag
    return (tag, node.value) if isinstance(node, yaml.ScalarNode) else (tag, str(id(node)))


def read_yaml(text: str, rep: Reporter, budget: Budget | None = None) -> object:
    """Parse one YAML document into plain data, recording lines and raw scalars in `rep`.

    Syntax errors, the limits and the oddities above are added to `rep` as problems; the data is None when
    the text could not be parsed at all. `budget` is shared by the files of one composed config (default: this
    text alone); a limit this text goes over is also recorded there (`Budget.refusal`), so that a composer
    stops at once.
    """
    if type(text) is not str:
        text = str(text)  # libyaml takes exact str only (a str subclass, like a docs tool's, is refused)
    budget = Budget() if budget is None else budget

    def over_limit(path: Path, message: str, line: int | None = None) -> None:
        rep.add(path, message, line=line)
        budget.refusal = rep.problems[-1]

    size = len(text.encode("utf-8")) if len(text) > MAX_BYTES // 4 else len(text)
    over = budget.take_bytes(size)
    if over is not None:
        over_limit((), over)
        return None
    data = None
    try:
        loader = _Loader(text)
    except yaml.YAMLError as e:
        rep.add((), f"YAML syntax: {e}".replace("\n", " "))
        return None
    try:
        node = loader.get_single_node()
        if node is not None:
            rep.lines[()] = node.start_mark.line + 1
            data = _Builder(loader, rep, budget).build(node, ())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        message = _tab_message(text, mark) or _yaml_message(e)
        if message == _TOO_DEEP:
            over_limit((), message, line)
        else:
            rep.add((), f"YAML syntax: {message}", line=line)
    except yaml.YAMLError as e:
        rep.add((), f"YAML syntax: {e}".replace("\n", " "))
    except _TooLarge as e:
        over_limit(*e.args)
    except RecursionError:
        over_limit((), _TOO_DEEP)
    finally:
        loader.dispose()
    return data


def check_tree(data: object, rep: Reporter) -> None:
    """A config handed over as Python data (`load(dict)`, `connect(dict)`) gets the limits a YAML file gets: at most
    MAX_DEPTH levels, at most MAX_ALIAS_VALUES values reached again through a list or mapping it holds twice, and
    no list or mapping that holds itself (a cycle: walking it never ends; the planner's recursion died with
    RecursionError). The first one gone over is a problem in `rep` (and the Budget refusal of a file)."""
    try:
        _Tree().walk(data, ())
    except _TooLarge as e:
        rep.add(*e.args)


class _Tree:
    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.on_path: set[int] = set()
        self.again = 0  # values walked again, inside a list or mapping walked before
        self.inside_again = False

    def walk(self, node: object, path: Path) -> None:
        if self.inside_again:
            self.again += 1
            if self.again > MAX_ALIAS_VALUES:
                raise _TooLarge(
                    path[:3],
                    f"the config is too large: lists and mappings it holds more than once expand it by "
                    f"more than {MAX_ALIAS_VALUES} values",
                )
        if len(path) > MAX_DEPTH:
            raise _TooLarge(path[:3], _TOO_DEEP)
        if not isinstance(node, Mapping | list | tuple):
            return
        key = id(node)
        if key in self.on_path:
            raise _TooLarge(path, "this list or mapping holds itself (a config is a tree: write the values out)")
        outer = self.inside_again
        self.inside_again = outer or key in self.seen
        self.seen.add(key)
        self.on_path.add(key)
        try:
            items = node.items() if isinstance(node, Mapping) else enumerate(node)
            for k, value in items:
                self.walk(value, (*path, k if isinstance(k, str | int) else str(k)))
        finally:
            self.on_path.discard(key)
            self.inside_again = outer


def too_large(size: int, *, composed: bool = False) -> str:
    """The message for `size` bytes over MAX_BYTES: a file's (the loader checks the size before reading), or the
    files' of a composed config together."""
    what = "the config is too large: its files hold" if composed else "the file is too large:"
    together = " together" if composed else ""
    return (
        f"{what} {size / 2**20:.1f} MiB{together}, and rlplace reads configs of up to {MAX_BYTES // 2**20} MiB "
        "(a cluster config is a few KiB)"
    )


def _tab_message(text: str, mark: yaml.Mark | None) -> str | None:
    """A tab where YAML met something it cannot read, said as a tab: YAML's own words ("found character that
    cannot start any token") do not name it, and a tab looks like spaces in an editor."""
    if mark is None or mark.index >= len(text) or text[mark.index] != "\t":
        return None
    column = mark.column + 1
    return (
        f"a tab (column {column}); YAML indents with spaces only: replace the tab with spaces"
        if not text[mark.index - mark.column : mark.index].strip()
        else f"a tab (column {column}) where YAML cannot take one: replace it with spaces"
    )


def _yaml_message(e: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (e.context, e.problem) if p]
    if any("maximum nesting depth" in p for p in parts):
        return _TOO_DEEP
    return ", ".join(parts) or str(e)
