"""A small declarative schema: each config key is declared once, with its kind and its doc.

One declaration does three jobs: structural checking (types, bounds, unknown keys with a did-you-mean,
required keys), the JSON Schema behind `rlplace schema`, and the key list in messages. A check never
raises on bad input: it reports a Problem and returns `INVALID`, so its siblings are still checked and
one load reports every mistake (docs/decisions.md says why this is not pydantic).

Checked sections come back as plain dicts of the keys the user wrote; a bad value is kept as `INVALID`,
so later rules can tell "not written" (absent) from "written wrong" (INVALID, already reported).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Generic, TypeGuard, TypeVar

from rlplace.config.problems import Path, Reporter, did_you_mean, near_miss, show
from rlplace.config.ranges import MAX_RANK


class Invalid(enum.Enum):
    """The value of a key whose problem is already reported. An enum of one member, so that `value is INVALID`
    narrows `value`'s type for mypy (and a deep copy keeps the one instance)."""

    INVALID = "INVALID"

    def __repr__(self) -> str:
        return "INVALID"

    __str__ = __repr__


INVALID: Final = Invalid.INVALID

JsonSchema = dict[str, object]

T = TypeVar("T")
Choose = TypeVar("Choose", bound=str)
#: What a kind's check returns when the value is valid.
Checked = TypeVar("Checked", covariant=True)


def written(section: Mapping[str, object], key: str) -> object:
    """The value of `key` in a checked section if written and valid, else None (bad values are reported)."""
    value = section.get(key)
    return None if value is INVALID else value


def written_as(section: Mapping[str, object], key: str, kind: type[T]) -> T | None:
    """`written`, typed: the section's schema checked the value into a `kind` (an Integer into an int, a Number
    into a float, a Choice into a str); another type is a bug of that schema, not of the input."""
    value = written(section, key)
    assert value is None or isinstance(value, kind), f"{key}: the schema made it a {kind.__name__}, got {value!r}"
    return value


def written_list(section: Mapping[str, object], key: str) -> list[object]:
    """The items of a list the schema checked (ListOf), [] when not written or written wrong (reported)."""
    value = written(section, key)
    assert value is None or isinstance(value, list), f"{key}: the schema made it a list, got {value!r}"
    return value or []


def written_map(section: Mapping[str, object], key: str) -> Mapping[object, object]:
    """The mapping the schema checked (MapOf: keys as written), {} when not written or written wrong (reported)."""
    value = written(section, key)
    assert value is None or isinstance(value, Mapping), f"{key}: the schema made it a mapping, got {value!r}"
    return value or {}


def written_section(section: Mapping[str, object], key: str) -> Mapping[str, object]:
    """The section the schema checked (Section: the keys the user wrote), {} when not written or written wrong."""
    value = written(section, key)
    return {} if value is None else section_of(value)


def section_of(value: object) -> Mapping[str, object]:
    """A value the schema checked with a Section: a mapping of the keys the user wrote, each checked."""
    assert isinstance(value, Mapping), f"the schema made it a section, got {value!r}"
    return value


def sections(items: object) -> list[Mapping[str, object]]:
    """The items of a ListOf(Section) value, each a checked section."""
    assert isinstance(items, list), f"the schema made it a list, got {items!r}"
    return [section_of(item) for item in items]


def written_choice(section: Mapping[str, object], key: str, choices: tuple[Choose, ...]) -> Choose | None:
    """The value of a Choice(choices), typed as one of them (a Literal), or None when not written or written wrong."""
    value = written(section, key)
    assert value is None or value in choices, f"{key}: the schema made it one of {choices}, got {value!r}"
    return next((choice for choice in choices if choice == value), None)


def checked(kind: Kind[Checked], value: object, path: Path, rep: Reporter) -> Checked | Invalid:
    """`kind.check`, except for a value already reported (an interpolation that did not resolve)."""
    return INVALID if value is INVALID else kind.check(value, path, rep)


def is_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool (YAML's true is a bool, and Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


class Kind(Generic[Checked]):
    """How one value is checked and described. Subclasses implement all three methods."""

    def check(self, value: object, path: Path, rep: Reporter) -> Checked | Invalid:
        """Return the cleaned value, or report a problem and return INVALID."""
        raise NotImplementedError

    def schema(self) -> JsonSchema:
        raise NotImplementedError

    def describe(self) -> str:
        """What a valid value looks like, for messages: "an integer >= 1"."""
        raise NotImplementedError

    def _wrong(self, value: object, path: Path, rep: Reporter) -> Invalid:
        rep.add(path, f"must be {self.describe()}, got {show(value)}", value)
        return INVALID


@dataclass(frozen=True)
class Integer(Kind[int]):
    """An int (not a bool). The maximum stops a typo like `num_node: 1000000000` from exhausting memory."""

    minimum: int = 0
    maximum: int = MAX_RANK

    def check(self, value: object, path: Path, rep: Reporter) -> int | Invalid:
        if not is_int(value) or value < self.minimum:
            return self._wrong(value, path, rep)
        if value > self.maximum:
            rep.add(path, f"{value} is too large (at most {self.maximum})", value)
            return INVALID
        return value

    def schema(self) -> JsonSchema:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}

    def describe(self) -> str:
        return f"an integer >= {self.minimum}"


@dataclass(frozen=True)
class Number(Kind[float]):
    """A finite number >= minimum; above 1 it must be whole (Ray takes fractions of one GPU only)."""

    minimum: float = 0.0
    whole_above_one: bool = False

    def check(self, value: object, path: Path, rep: Reporter) -> float | Invalid:
        if not is_number(value) or not math.isfinite(value) or value < self.minimum:
            return self._wrong(value, path, rep)
        if self.whole_above_one and value > 1 and value != int(value):
            rep.add(
                path, f"{value} is not valid: above 1 it must be a whole number of GPUs (0.5, 1, 2 are fine)", value
            )
            return INVALID
        return float(value)

    def schema(self) -> JsonSchema:
        return {"type": "number", "minimum": self.minimum}

    def describe(self) -> str:
        return f"a number >= {self.minimum:g}" + (
            " (fractions up to 1, whole numbers above)" if self.whole_above_one else ""
        )


@dataclass(frozen=True)
class Flag(Kind[bool]):
    def check(self, value: object, path: Path, rep: Reporter) -> bool | Invalid:
        if isinstance(value, bool):
            return value
        hint = ""
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
            hint = f" (write {'true' if value.strip().lower() in ('true', 'yes', 'on') else 'false'} without quotes)"
        rep.add(path, f"must be true or false, got {show(value)}{hint}", value)
        return INVALID

    def schema(self) -> JsonSchema:
        return {"type": "boolean"}

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Maybe(Kind[Checked | None]):
    """`kind`, or null meaning "not written" (RLinf's Optional fields: `python_interpreter_path: null`)."""

    kind: Kind[Checked]

    def check(self, value: object, path: Path, rep: Reporter) -> Checked | Invalid | None:
        return None if value is None else self.kind.check(value, path, rep)

    def schema(self) -> JsonSchema:
        return {"anyOf": [self.kind.schema(), {"type": "null"}]}

    def describe(self) -> str:
        return f"{self.kind.describe()} or null"


@dataclass(frozen=True)
class Known(Kind[str]):
    """Free text whose usual values are known: a near miss of one is an error (did you mean), a known value
    in another case is fine, any other text is kept with a warning (the framework accepts it)."""

    values: tuple[str, ...]
    what: str  # "camera type", for messages

    def check(self, value: object, path: Path, rep: Reporter) -> str | Invalid:
        if not isinstance(value, str) or not value.strip():
            return self._wrong(value, path, rep)
        if value in self.values:
            return value
        close = near_miss(value, self.values)
        if close is not None and close.lower() == value.lower():
            return value  # the frameworks compare these case-insensitively; the worker gets it as written
        if close is not None:
            rep.add(path, f"must be {self.describe()}, got {value!r}; did you mean '{close}'?", value)
            return INVALID
        rep.warn(path, f"{value!r} is not a {self.what} rlplace knows ({', '.join(self.values)}); kept as written")
        return value

    def schema(self) -> JsonSchema:
        return {"type": "string", "examples": list(self.values)}

    def describe(self) -> str:
        return f"a {self.what} such as " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Choice(Kind[str]):
    values: tuple[str, ...]

    def check(self, value: object, path: Path, rep: Reporter) -> str | Invalid:
        if isinstance(value, str) and value in self.values:
            return value
        rep.add(path, f"must be {self.describe()}, got {show(value)}{did_you_mean(value, self.values)}", value)
        return INVALID

    def schema(self) -> JsonSchema:
        return {"enum": list(self.values)}

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Parsed(Kind[Checked]):
    """A value read by a parse function that raises ValueError with a user-facing message."""

    parse: Callable[[object], Checked]
    json: JsonSchema
    what: str

    def check(self, value: object, path: Path, rep: Reporter) -> Checked | Invalid:
        try:
            return self.parse(value)
        except ValueError as e:
            rep.add(path, str(e), value)
            return INVALID

    def schema(self) -> JsonSchema:
        return dict(self.json)

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class ListOf(Kind[list[Checked]]):
    item: Kind[Checked]
    min_items: int = 1
    hint: str = ""  # said when a mapping is given where the list belongs (a forgotten '-')

    def check(self, value: object, path: Path, rep: Reporter) -> list[Checked] | Invalid:
        if isinstance(value, Mapping) and self.hint:
            rep.add(
                path, f"must be a list ({self.hint}), got a mapping; perhaps a '-' is missing before an entry", value
            )
            return INVALID
        if not isinstance(value, list | tuple):
            return self._wrong(value, path, rep)
        if len(value) < self.min_items:
            rep.add(path, f"must hold at least {self.min_items} entr{'y' if self.min_items == 1 else 'ies'}", value)
            return INVALID
        items = [checked(self.item, v, (*path, i), rep) for i, v in enumerate(value)]
        valid = [item for item in items if item is not INVALID]
        # One bad item makes the list unusable for rules over the whole list; its problem is reported.
        return valid if len(valid) == len(items) else INVALID

    def schema(self) -> JsonSchema:
        return {"type": "array", "items": self.item.schema(), "minItems": self.min_items}

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


@dataclass(frozen=True)
class Switch(Kind[object]):
    """A value whose kind depends on its Python type (`num_gpus: 8` or `num_gpus: [8, 4]`)."""

    cases: tuple[tuple[type | tuple[type, ...], Kind[object]], ...]

    def check(self, value: object, path: Path, rep: Reporter) -> object:
        for types, kind in self.cases:
            bool_ok = bool in (types if isinstance(types, tuple) else (types,))
            if isinstance(value, types) and (bool_ok or not isinstance(value, bool)):
                return kind.check(value, path, rep)
        return self._wrong(value, path, rep)

    def schema(self) -> JsonSchema:
        return {"anyOf": [kind.schema() for _, kind in self.cases]}

    def describe(self) -> str:
        return " or ".join(kind.describe() for _, kind in self.cases)


@dataclass(frozen=True)
class Anything(Kind[object]):
    """Any value; for parts checked later by a kind chosen from a sibling key (hardware configs by type)."""

    def check(self, value: object, path: Path, rep: Reporter) -> object:
        return value

    def schema(self) -> JsonSchema:
        return {}

    def describe(self) -> str:
        return "any value"


@dataclass(frozen=True)
class Field:
    kind: Kind[object]
    doc: str
    required: bool = False


@dataclass(frozen=True)
class Section(Kind[dict[str, object]]):
    """A mapping with declared keys.

    Unknown keys are errors listing the valid ones, unless `lenient`: then only a near miss of a known key
    is an error (`remote_storge`), and any other key is a warning naming it (where the frameworks ignore
    unknown keys: the top of RLinf's cluster section, RLightning's pydantic models). See docs/config.md.
    """

    name: str  # "a node group", for messages
    fields: Mapping[str, Field]
    doc: str = ""
    lenient: bool = False

    def check(self, value: object, path: Path, rep: Reporter) -> dict[str, object] | Invalid:
        if not isinstance(value, Mapping):
            return self._wrong(value, path, rep)
        return self.check_mapping(value, path, rep)

    def check_mapping(self, value: Mapping[object, object], path: Path, rep: Reporter) -> dict[str, object]:
        """`check` of a value known to be a mapping: the keys the user wrote, each checked (INVALID if wrong)."""
        out: dict[str, object] = {}
        for key, item in value.items():
            spec = self.fields.get(key) if isinstance(key, str) else None
            if spec is None or not isinstance(key, str):
                self.unknown_key(key, path, rep)
                continue
            out[key] = checked(spec.kind, item, (*path, key), rep)
        for key, spec in self.fields.items():
            if spec.required and key not in value:
                rep.add((*path, key), f"{self.name} needs '{key}': {spec.doc}")
        return out

    def unknown_key(self, key: object, path: Path, rep: Reporter) -> None:
        valid = sorted(self.fields)
        where = (*path, str(key))
        if self.lenient and near_miss(key, valid) is None:
            rep.warn(
                where,
                f"unknown key '{key}' in {self.name} is not read by rlplace{did_you_mean(key, valid)} (kept for "
                "your application; remove it if it is a typo)",
                key,
            )
            return
        hint = did_you_mean(key, valid) or f"; valid keys: {', '.join(valid)}"  # the list only without a guess
        rep.add(where, f"unknown key '{key}' in {self.name}{hint}", key)

    def schema(self) -> JsonSchema:
        props = {k: {**f.kind.schema(), "description": f.doc} for k, f in self.fields.items()}
        # Editors flag every unknown key (the loader warns on lenient sections): the schema is the strict view.
        out: JsonSchema = {"type": "object", "properties": props, "additionalProperties": False}
        if self.doc:
            out["description"] = self.doc
        required = [k for k, f in self.fields.items() if f.required]
        if required:
            out["required"] = required
        return out

    def describe(self) -> str:
        return f"a mapping ({self.name})"


@dataclass(frozen=True)
class MapOf(Kind[dict[object, Checked | Invalid]]):
    """A mapping with free keys (component names), each value of one kind."""

    value: Kind[Checked]
    what: str

    def check(self, value: object, path: Path, rep: Reporter) -> dict[object, Checked | Invalid] | Invalid:
        if not isinstance(value, Mapping):
            return self._wrong(value, path, rep)
        return {k: checked(self.value, v, (*path, str(k)), rep) for k, v in value.items()}

    def schema(self) -> JsonSchema:
        return {"type": "object", "additionalProperties": self.value.schema()}

    def describe(self) -> str:
        return f"a mapping of {self.what}"
