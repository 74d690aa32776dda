"""Typed hardware of node groups (robots): the registry behind `hardware: {type: ..., configs: [...]}`.

A hardware type is one small class: its `name` (the YAML `type`), a `config` Section declaring the keys
of one entry of `configs` (every type has `node_rank`, the node the unit is attached to), the `noun`
used in messages, and `identity`, what makes two entries the same physical unit (one config per unit).
Register it with `@hardware_type`; the loader, the JSON Schema and the docs pick it up.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import ClassVar

from rlplace.config.fields import (
    INVALID,
    Anything,
    Choice,
    Field,
    Integer,
    JsonSchema,
    Kind,
    ListOf,
    Parsed,
    Section,
)
from rlplace.config.problems import Path, Reporter, show


class HardwareType:
    """Base of every hardware type; subclasses set the class attributes and may override `identity`."""

    name: ClassVar[str]
    noun: ClassVar[str] = "unit"
    config: ClassVar[Section]

    @classmethod
    def identity(cls, config: Mapping[str, object]) -> object | None:
        """The key that must be unique per group (one config per unit); None when it cannot be told."""
        return None


REGISTRY: dict[str, type[HardwareType]] = {}


def hardware_type(cls: type[HardwareType]) -> type[HardwareType]:
    """Class decorator: make `cls` available as `hardware.type: <cls.name>`."""
    REGISTRY[cls.name] = cls
    return cls


def _ip_address(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f'must be an IP address in quotes like "10.10.10.1", got {show(value)}')
    try:
        ipaddress.ip_address(value.strip())
    except ValueError:
        raise ValueError(f'{value!r} is not a valid IPv4 or IPv6 address (like "10.10.10.1" or "fd00::1")') from None
    return value.strip()


class SerialText(Kind):
    """A device serial number: text. YAML reads an unquoted all-digit serial as a number (and `0123` as 83)."""

    def check(self, value: object, path: Path, rep: Reporter) -> object:
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int | float) and not isinstance(value, bool):
            written = rep.raw(path) or str(value)
            rep.add(path, f'serial {written} was read by YAML as the number {value}; quote it: "{written}"', value)
        else:
            rep.add(path, f"must be {self.describe()}, got {show(value)}", value)
        return INVALID

    def schema(self) -> JsonSchema:
        return {"type": "string", "minLength": 1}

    def describe(self) -> str:
        return 'a serial number in quotes, like "322142001230"'


NODE_RANK = Field(Integer(0), "global rank of the node this unit is attached to (inside the group's node_ranks)", True)


@hardware_type
class Franka(HardwareType):
    """A Franka Emika robot arm with its cameras."""

    name = "Franka"
    noun = "robot"
    config = Section(
        "a Franka config",
        {
            "robot_ip": Field(
                Parsed(_ip_address, {"type": "string"}, "an IPv4 or IPv6 address"), "IP address of the robot", True
            ),
            "node_rank": NODE_RANK,
            "camera_serials": Field(ListOf(SerialText(), min_items=0), "serial numbers of the robot's cameras"),
        },
    )

    @classmethod
    def identity(cls, config: Mapping[str, object]) -> object | None:
        ip = config.get("robot_ip")
        return None if ip is INVALID or ip is None else ipaddress.ip_address(ip)  # type: ignore[arg-type]


class HardwareBlock(Kind):
    """`hardware: {type, configs}`: the configs are checked against the section of their type."""

    def check(self, value: object, path: Path, rep: Reporter) -> object:
        outer = Section(
            "hardware",
            {
                "type": Field(Choice(tuple(sorted(REGISTRY))), "the hardware type", True),
                "configs": Field(ListOf(Anything()), "one entry per unit, each with its node_rank", True),
            },
        )
        checked = outer.check(value, path, rep)
        if checked is INVALID:
            return INVALID
        kind, configs = checked.get("type", INVALID), checked.get("configs", INVALID)  # type: ignore[union-attr]
        if kind is not INVALID and configs is not INVALID:
            typed = ListOf(REGISTRY[kind].config)  # type: ignore[index]
            checked["configs"] = typed.check(configs, (*path, "configs"), rep)  # type: ignore[index]
        return checked

    def schema(self) -> JsonSchema:
        variants = [
            {
                "type": "object",
                "description": cls.__doc__ or cls.name,
                "properties": {"type": {"const": name}, "configs": ListOf(cls.config).schema()},
                "required": ["type", "configs"],
                "additionalProperties": False,
            }
            for name, cls in sorted(REGISTRY.items())
        ]
        return {"oneOf": variants}

    def describe(self) -> str:
        return "a mapping with 'type' and 'configs'"
