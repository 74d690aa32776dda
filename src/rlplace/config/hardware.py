"""Typed hardware of node groups (robots, phones): the registry behind `hardware: {type: ..., configs: [...]}`.

A hardware type is one small class: its `name` (the YAML `type`, case-sensitive as in RLinf), a `config`
Section declaring the keys of one entry of `configs` (every type has `node_rank`, the node the unit is
attached to), the `noun` used in messages, `identity` (what makes two entries the same physical unit:
one config per unit), `count_keys` (the keys whose comma-separated values in a node's environment make that
many units when the config lists none for the node: `ROBOT_IP` for Franka) and `env_fallbacks` (keys a worker
reads from its node's environment when the plan could not: a live node started without `rlplace start`).
Register it with `@hardware_type`; the loader, the JSON Schema and the docs pick it up.

The types and their keys, defaults and checks follow RLinf's registered hardware (rlinf/scheduler/hardware), and
so does reading a node's environment (RLinf's RobotAutoConfig): every key but the node ranks is the variable of
its upper-cased name (`camera_serials` is `CAMERA_SERIALS`); a config listed in the file takes the variables of
its keys whose default is unset (declared `Maybe`), one comma-separated value per robot of its type on the node,
or the whole value for a single robot; units made from the environment take every variable set. A `type` RLinf
does not register is an error, a near miss of one with did-you-mean (RLinf refuses both).
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
    Flag,
    Integer,
    Invalid,
    JsonSchema,
    Kind,
    Known,
    ListOf,
    MapOf,
    Maybe,
    Parsed,
    Section,
)
from rlplace.config.problems import Path, Reporter, did_you_mean, show


class HardwareType:
    """Base of every hardware type; subclasses set the class attributes and may override `identity`."""

    name: ClassVar[str]
    noun: ClassVar[str] = "unit"
    config: ClassVar[Section]
    #: (key, environment variable of the node that RLinf reads when the key is left out).
    env_fallbacks: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: keys whose values together identify one physical unit (None values are skipped).
    identity_keys: ClassVar[tuple[str, ...]] = ()
    #: keys whose variables count the units of a node that the config lists none for (RLinf's count_fields).
    count_keys: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def env_keys(cls, created: bool) -> tuple[tuple[str, str, Kind[object]], ...]:
        """(key, variable, kind) of the keys RLinf reads from a node's environment: of a unit it made from the
        environment every key, of a listed one those whose default is unset; never a node rank."""
        return tuple(
            (key, key.upper(), f.kind)
            for key, f in cls.config.fields.items()
            if key != "node_rank" and not key.endswith("_node_rank") and (created or isinstance(f.kind, Maybe))
        )

    @classmethod
    def identity(cls, config: Mapping[str, object]) -> object | None:
        """What must be unique per group (one config per unit); None when the config cannot tell."""
        values = tuple(_same_spelling(config.get(k)) for k in cls.identity_keys)
        if not values or any(v is INVALID for v in values) or all(v is None for v in values):
            return None
        return values if len(values) > 1 else values[0]


def _same_spelling(value: object) -> object:
    """IP addresses compare by address ("fd00::1" is "fd00:0::1"), anything else as written."""
    if isinstance(value, str):
        try:
            return ipaddress.ip_address(value)
        except ValueError:
            return value
    return value


REGISTRY: dict[str, type[HardwareType]] = {}


def hardware_type(cls: type[HardwareType]) -> type[HardwareType]:
    """Class decorator: make `cls` available as `hardware.type: <cls.name>`."""
    REGISTRY[cls.name] = cls
    return cls


def kind_of(name: str) -> type[HardwareType]:
    """The registered type `name` (the loader refuses any other)."""
    return REGISTRY[name]


def env_var_names() -> tuple[str, ...]:
    """Every variable of a node's environment that some registered type reads (what `rlplace start` publishes)."""
    return tuple(sorted({var for cls in REGISTRY.values() for _, var, _ in cls.env_keys(created=True)}))


def _ip_address(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f'must be an IP address in quotes like "10.10.10.1", got {show(value)}')
    try:
        ipaddress.ip_address(value.strip())
    except ValueError:
        raise ValueError(f'{value!r} is not a valid IPv4 or IPv6 address (like "10.10.10.1" or "fd00::1")') from None
    return value.strip()


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be text, got {show(value)}")
    return value


IP = Parsed(_ip_address, {"type": "string"}, "an IPv4 or IPv6 address")
TEXT = Parsed(_text, {"type": "string", "minLength": 1}, "text")


class SerialText(Kind[str]):
    """A device serial number: text. YAML reads an unquoted all-digit serial as a number (and `0123` as 83).

    `numbers_ok`: the type takes numbers as their text (RLinf's DOSW1 does `str(serial)`); the text as
    written is kept (so `0123` stays "0123", not "83"), with a warning to quote it.
    """

    def __init__(self, numbers_ok: bool = False):
        self.numbers_ok = numbers_ok

    def check(self, value: object, path: Path, rep: Reporter) -> str | Invalid:
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int | float) and not isinstance(value, bool):
            written = rep.raw(path) or str(value)
            if self.numbers_ok:
                rep.warn(
                    path, f'serial {written} was read by YAML as a number; taken as the text "{written}" (quote it)'
                )
                return written
            rep.add(path, f'serial {written} was read by YAML as the number {value}; quote it: "{written}"', value)
        else:
            rep.add(path, f"must be {self.describe()}, got {show(value)}", value)
        return INVALID

    def schema(self) -> JsonSchema:
        return {"type": "string", "minLength": 1}

    def describe(self) -> str:
        return 'a serial number in quotes, like "322142001230"'


NODE_RANK = Field(Integer(0), "global rank of the node this unit is attached to (inside the group's node_ranks)", True)
SERIALS = Field(Maybe(ListOf(SerialText(), min_items=0)), "serial numbers of its cameras (default: all detected)")
CAMERA = Known(("realsense", "zed", "lumos"), "camera type")
CONTROLLER = Maybe(Integer(0))
SKIP_CHECKS = Field(Flag(), "skip RLinf's connectivity and camera checks when the unit is enumerated")


def _section(name: str, fields: dict[str, Field]) -> Section:
    article = "an" if name[0] in "AEIOU" else "a"
    return Section(f"{article} {name} config", {"node_rank": NODE_RANK, **fields})


@hardware_type
class Franka(HardwareType):
    """A Franka Emika robot arm with its cameras and gripper."""

    name = "Franka"
    noun = "robot"
    env_fallbacks = (("robot_ip", "ROBOT_IP"),)
    identity_keys = ("robot_ip",)
    count_keys = ("robot_ip",)
    config = _section(
        "Franka",
        {
            "robot_ip": Field(Maybe(IP), "IP address of the robot (default: the node's ROBOT_IP at enumeration)"),
            "camera_serials": SERIALS,
            "camera_type": Field(
                Known(("realsense", "zed", "lumos", "embodied_runtime"), "camera type"),
                "camera backend: realsense (default), zed, lumos or embodied_runtime",
            ),
            "gripper_type": Field(Known(("franka", "robotiq"), "gripper type"), "franka (default) or robotiq"),
            "gripper_connection": Field(Maybe(TEXT), "serial port of a Robotiq gripper, e.g. /dev/ttyUSB0"),
            "controller_node_rank": Field(CONTROLLER, "node running the arm's controller (default: the env worker's)"),
            "backend": Field(
                Known(("ros", "franky"), "controller backend"), "ros, or franky (libfranka, no roscore needed)"
            ),
            "embodied_runtime_robot_id": Field(Maybe(TEXT), "robot id managed by embodied-runtime"),
            "disable_validate": SKIP_CHECKS,
        },
    )


_ARM = ("left", "right")


@hardware_type
class DualFranka(HardwareType):
    """Two Franka arms driven by one env worker; each arm's controller may run on another node."""

    name = "DualFranka"
    noun = "robot"
    env_fallbacks = tuple((f"{a}_robot_ip", f"{a.upper()}_ROBOT_IP") for a in _ARM)
    identity_keys = ("left_robot_ip", "right_robot_ip")
    count_keys = ("left_robot_ip", "right_robot_ip")
    config = _section(
        "DualFranka",
        {
            **{f"{a}_robot_ip": Field(Maybe(IP), f"IP of the {a} arm (default: {a.upper()}_ROBOT_IP)") for a in _ARM},
            **{f"{c}_camera_serials": SERIALS for c in ("left", "right", "base")},
            "camera_type": Field(CAMERA, "camera backend of every camera without its own type (default realsense)"),
            **{f"{c}_camera_type": Field(Maybe(CAMERA), f"backend of the {c} camera(s)") for c in ("base", *_ARM)},
            **{f"{a}_gripper_type": Field(Known(("franka", "robotiq"), "gripper type"), f"{a} gripper") for a in _ARM},
            **{f"{a}_gripper_connection": Field(Maybe(TEXT), f"serial port of the {a} Robotiq gripper") for a in _ARM},
            **{f"{a}_controller_node_rank": Field(CONTROLLER, f"node of the {a} arm's controller") for a in _ARM},
        },
    )


@hardware_type
class DOSW1(HardwareType):
    """A DOS-W1 dual-arm robot reached over gRPC (follower and leader ports per arm)."""

    name = "DOSW1"
    noun = "robot"
    identity_keys = ("robot_url", "left_arm_port", "right_arm_port")
    count_keys = ("robot_url",)
    _PORT = Integer(1, 65535)
    config = _section(
        "DOSW1",
        {
            "robot_url": Field(TEXT, "host or IP of the gRPC endpoint (default localhost)"),
            "left_arm_port": Field(_PORT, "gRPC port of the left follower arm (default 50051)"),
            "right_arm_port": Field(_PORT, "gRPC port of the right follower arm (default 50053)"),
            "left_lead_port": Field(_PORT, "gRPC port of the left leader arm (default 50050)"),
            "right_lead_port": Field(_PORT, "gRPC port of the right leader arm (default 50052)"),
            "camera_serials": Field(Maybe(ListOf(SerialText(numbers_ok=True), min_items=0)), "RealSense serials"),
        },
    )


@hardware_type
class GimArm(HardwareType):
    """A GimArm 6-DOF arm on a CAN bus."""

    name = "GimArm"
    noun = "robot"
    identity_keys = ("node_rank", "can_interface")
    count_keys = ("can_interface",)
    config = _section(
        "GimArm",
        {
            "can_interface": Field(TEXT, "CAN socket interface (default can0)"),
            "arm_variant": Field(Choice(("gim_arm", "gim_arm_xl")), "gim_arm or gim_arm_xl (default)"),
            "camera_serials": SERIALS,
            "camera_type": Field(Known(("realsense", "zed"), "camera type"), "realsense (default) or zed"),
            "enable_gripper": Field(Flag(), "a gripper is attached (default true)"),
            "gripper_type": Field(Known(("parallel", "single_side"), "gripper type"), "parallel (default)"),
            "controller_node_rank": Field(CONTROLLER, "node running the controller (default: the env worker's)"),
            "disable_validate": SKIP_CHECKS,
        },
    )


@hardware_type
class Turtle2(HardwareType):
    """An X-Square Turtle2 robot (no settings besides its node)."""

    name = "Turtle2"
    noun = "robot"
    config = _section("Turtle2", {})


@hardware_type
class SO101(HardwareType):
    """An SO-101 (or SO-100) arm on a USB serial port, driven through LeRobot."""

    name = "SO101"
    noun = "robot"
    env_fallbacks = (("port", "SO101_PORT"),)
    identity_keys = ("node_rank", "port")
    config = _section(
        "SO101",
        {
            "port": Field(TEXT, "serial port of the motor bus (default /dev/tty.usbmodem*; SO101_PORT)"),
            "leader_port": Field(Maybe(TEXT), "serial port of the leader arm (teleoperation)"),
            "arm_variant": Field(Choice(("so101", "so100")), "so101 (default) or so100"),
            "calibration_id": Field(TEXT, "LeRobot calibration id of the follower arm (default 'default')"),
            "leader_calibration_id": Field(Maybe(TEXT), "calibration id of the leader arm"),
            "camera_cfgs": Field(MapOf(MapOf(Anything(), "camera settings"), "cameras"), "camera name -> settings"),
            "use_degrees": Field(Flag(), "joint angles in degrees (default true)"),
            "disable_validate": SKIP_CHECKS,
        },
    )


@hardware_type
class YAM(HardwareType):
    """A YAM bimanual robot: two arm controllers by IP."""

    name = "YAM"
    noun = "robot"
    identity_keys = ("left_ip", "right_ip")
    config = _section(
        "YAM",
        {
            "left_ip": Field(IP, "IP address of the left arm's controller", True),
            "right_ip": Field(IP, "IP address of the right arm's controller", True),
            "camera_serials": SERIALS,
            "disable_validate": SKIP_CHECKS,
        },
    )


@hardware_type
class ADB(HardwareType):
    """An Android phone reached through adb."""

    name = "ADB"
    noun = "phone"
    identity_keys = ("node_rank", "device_id")
    config = _section(
        "ADB",
        {
            "device_id": Field(SerialText(), "the phone's adb device id", True),
            "adb_path": Field(TEXT, "the adb executable on the node (default adb)"),
        },
    )


class HardwareBlock(Kind[dict[str, object]]):
    """`hardware: {type, configs}`: the configs are checked against the section of their type. `configs: []`
    lists no unit: each node of the group gets its units from its environment (RLinf's RobotAutoConfig)."""

    def check(self, value: object, path: Path, rep: Reporter) -> dict[str, object] | Invalid:
        outer = Section(
            "hardware",
            {
                "type": Field(TEXT, "the hardware type", True),
                "configs": Field(
                    ListOf(Anything(), min_items=0),
                    "one entry per unit, each with its node_rank ([]: the units come from each node's environment)",
                    True,
                ),
            },
        )
        checked = outer.check(value, path, rep)
        if checked is INVALID:
            return INVALID
        name, configs = checked.get("type", INVALID), checked.get("configs", INVALID)
        if isinstance(name, str) and known_type(name, (*path, "type"), rep) is INVALID:  # TEXT: a str or INVALID
            checked["type"] = name = INVALID
        if isinstance(name, str) and configs is not INVALID:
            item = REGISTRY[name].config
            checked["configs"] = ListOf(item, min_items=0).check(configs, (*path, "configs"), rep)
        return checked

    def schema(self) -> JsonSchema:
        variants: list[JsonSchema] = [
            {
                "type": "object",
                "description": cls.__doc__ or cls.name,
                "properties": {"type": {"const": name}, "configs": ListOf(cls.config, min_items=0).schema()},
                "required": ["type", "configs"],
                "additionalProperties": False,
            }
            for name, cls in sorted(REGISTRY.items())
        ]
        return {"oneOf": variants}

    def describe(self) -> str:
        return "a mapping with 'type' and 'configs'"


def known_type(name: str, path: Path, rep: Reporter) -> str | Invalid:
    """A registered type as is; any other is an error (RLinf refuses types it does not register), naming the
    near miss when there is one and the known types."""
    if name in REGISTRY:
        return name
    known = ", ".join(sorted(REGISTRY))
    hint = did_you_mean(name, REGISTRY)
    rep.add(
        path,
        f"unknown hardware type '{name}'{hint or ':'} RLinf refuses a type it does not register (types are "
        f"case-sensitive). Known types: {known}",
        name,
    )
    return INVALID
