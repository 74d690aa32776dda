"""Safe YAML loading that remembers the line of every key, so each Problem can name its line.

PyYAML's SafeLoader composes the node tree (which carries marks); we build the Python values from it
ourselves, recording the line of every mapping key and list item under its key path. Scalars are
constructed by the safe constructor, so no object is ever built from a tag. Things PyYAML accepts
silently but a user never means are reported: duplicate keys (PyYAML keeps the last), custom tags, and
YAML 1.1 base-60 numbers (`placement: 1:1` would otherwise be the int 61; it stays the string "1:1").
"""

from __future__ import annotations

import yaml

from rlplace.config.problems import Path, Reporter

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
#: Aliases can expand a short file into an enormous tree ("billion laughs"); refuse past this.
MAX_NODES = 100_000
MAX_DEPTH = 64


class _TooLarge(Exception):
    pass


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, rep: Reporter):
        self.loader = loader
        self.rep = rep
        self.visited = 0

    def build(self, node: yaml.Node, path: Path) -> object:
        self.visited += 1
        if self.visited > MAX_NODES or len(path) > MAX_DEPTH:
            raise _TooLarge(path)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            self._plain_tag(node, _SEQ_TAG, path)
            out = []
            for i, item in enumerate(node.value):
                self.rep.lines[(*path, i)] = item.start_mark.line + 1
                out.append(self.build(item, (*path, i)))
            return out
        return self._scalar(node, path)

    def _plain_tag(self, node: yaml.Node, expected: str, path: Path) -> None:
        if node.tag != expected:
            self.rep.add(path, f"the tag {node.tag} is not allowed here; remove it (plain YAML only)", node.tag)

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict:
        self._plain_tag(node, _MAP_TAG, path)
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict = {}
        first_line: dict[object, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                self.rep.add(path, f"line {line}: a key must be a plain word, not a list or mapping")
                continue
            key = self._scalar(key_node, path)
            key_path = (*path, str(key))
            self.rep.lines.setdefault(key_path, line)
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

    def _scalar(self, node: yaml.Node, path: Path) -> object:
        value = self.loader.construct_object(node, deep=True)
        if node.style is None and isinstance(node.value, str):
            if ":" in node.value and isinstance(value, int | float) and not isinstance(value, bool):
                return node.value  # YAML 1.1 sexagesimal: `1:1` is a placement, not 61
            self.rep.raw_text[path] = node.value
        return value


def read_yaml(text: str, rep: Reporter) -> object:
    """Parse one YAML document into plain data, recording lines and raw scalars in `rep`.

    Syntax errors and the oddities above are added to `rep` as problems; the data is None when the text
    could not be parsed at all.
    """
    data = None
    try:
        loader = yaml.SafeLoader(text)  # the reader already refuses control characters
    except yaml.YAMLError as e:
        rep.add((), f"YAML syntax: {e}".replace("\n", " "))
        return None
    try:
        node = loader.get_single_node()
        if node is not None:
            rep.lines[()] = node.start_mark.line + 1
            data = _Builder(loader, rep).build(node, ())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        rep.add((), f"YAML syntax: {_yaml_message(e)}", line=mark.line + 1 if mark else None)
    except yaml.YAMLError as e:
        rep.add((), f"YAML syntax: {e}".replace("\n", " "))
    except _TooLarge as e:
        rep.add(
            e.args[0][:3],
            f"the document is too large: aliases expand it past {MAX_NODES} values or {MAX_DEPTH} levels of nesting",
        )
    except RecursionError:
        rep.add((), f"the document is nested too deeply (more than {MAX_DEPTH} levels)")
    finally:
        loader.dispose()
    return data


def _yaml_message(e: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (e.context, e.problem) if p]
    return ", ".join(parts) or str(e)
