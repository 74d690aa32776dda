"""Robots as RLinf enumerates them on their nodes (rlinf/scheduler/hardware, RobotAutoConfig), from the config
and each node's environment (`Node.env`).

Per node and hardware type: the configs the file lists for that node, in written order, each key left unset
(a key whose default is unset) filled from the variable of its upper-cased name, one comma-separated value per
config when the node has several, the whole value when it has one. A node the file lists none for gets one
unit per comma-separated value of the type's identifying variable (`ROBOT_IP` for Franka, `CAN_INTERFACE` for
GimArm, `ROBOT_URL` for DOSW1, both arm IPs for DualFranka), every key taken from its variable. A variable of
the type that holds another number of values than the node has units is refused, on every node, as RLinf
refuses it when its cluster starts. Each value taken from a node's environment is named in the unit's `from`.

The units, listed and made from environments, are counted before any is made: more than
`model.MAX_HARDWARE_UNITS` in all is refused (a 600 KB inventory of 16,384 nodes with 50,000 `ROBOT_IP` values each
asked for 800 million, and ran out of memory).
"""

from __future__ import annotations

from collections.abc import Iterable

from rlplace.config.fields import Flag, Integer, Kind, ListOf, Maybe
from rlplace.config.hardware import REGISTRY, HardwareType
from rlplace.config.problems import Reporter
from rlplace.errors import PlanError
from rlplace.inventory import Inventory, Node
from rlplace.model import MAX_HARDWARE_UNITS, HardwareUnit, JobSpec

Unit = dict[str, object]  # the worker's record of one unit: type, index, node_rank, its keys, `from`


class Robots:
    """The units of every (node, hardware type) of one plan, resolved once each."""

    def __init__(self, spec: JobSpec, inventory: Inventory):
        self.spec, self.inventory = spec, inventory
        self._listed: dict[tuple[int, str], list[HardwareUnit]] = {}
        self._where: dict[str, str] = {}  # hardware type -> where a group of that type is written
        for g in spec.node_groups:
            if g.hardware_type is None:
                continue
            self._where.setdefault(g.hardware_type, _at(spec, f"{g.path}.hardware"))
            for u in g.hardware:
                self._listed.setdefault((u.node_rank, u.type), []).append(u)
        self._units: dict[tuple[int, str], list[Unit]] = {}
        self._check_count()

    def _check_count(self) -> None:
        """PlanError when the units of the plan would be more than MAX_HARDWARE_UNITS, counted from the config's
        lists and the nodes' variables (by their commas: nothing is split or made yet)."""
        total = sum(len(units) for units in self._listed.values())
        commas: dict[str, int] = {}  # a value shared by many nodes (one inventory entry's) is counted once
        for node in self.inventory.nodes:
            if not node.env:
                continue
            for name, kind in REGISTRY.items():
                if (node.rank, name) in self._listed:
                    continue
                found = [(var, node.env[var]) for k in kind.count_keys if (var := k.upper()) in node.env]
                if not found:
                    continue
                var, raw = found[0]
                n = commas.get(raw)
                if n is None:
                    n = commas[raw] = raw.count(",") + 1
                total += n
                if total > MAX_HARDWARE_UNITS:
                    raise PlanError(
                        f"{self._where.get(name, f'node {node.rank}')}: the plan would have more than "
                        f"{MAX_HARDWARE_UNITS} robots (hardware units) in all, the most rlplace plans for: {total} by "
                        f"node {node.rank}, whose {var} holds {n} comma-separated value(s), a {name} {kind.noun} "
                        f"each{_source(node)}"
                    )
        if total > MAX_HARDWARE_UNITS:
            raise PlanError(
                f"the config lists {total} robots (hardware units), more than the {MAX_HARDWARE_UNITS} rlplace "
                "plans for"
            )

    def check(self) -> None:
        """RLinf's refusals at start: on every node whose environment names a variable of a type, the lists
        must match that node's units (nodes outside every robot group too: RLinf enumerates every node)."""
        for node in self.inventory.nodes:
            if node.env:
                for name in REGISTRY:
                    self.on(node.rank, name)

    def on(self, node_rank: int, hw_type: str) -> list[Unit]:
        """The units of `hw_type` on node `node_rank` (config entries first-written first), without `index`."""
        key = (node_rank, hw_type)
        got = self._units.get(key)
        if got is None:
            got = self._units[key] = self._resolve(self.inventory.node(node_rank), REGISTRY[hw_type], key)
        return got

    def _resolve(self, node: Node, kind: type[HardwareType], key: tuple[int, str]) -> list[Unit]:
        listed = self._listed.get(key, [])
        created = not listed
        configs: list[dict[str, object]] = [_as_written(u.config) for u in listed]
        if created:
            configs = [{} for _ in range(self._count(node, kind))]
        units: list[Unit] = [{"type": kind.name, "node_rank": node.rank, **c} for c in configs]
        if not units:
            return units
        fills = {k for k, _, _ in kind.env_keys(created)}
        for k, var, field_kind in kind.env_keys(created=True):
            raw = node.env.get(var)
            if raw is None:
                continue
            chunks = [raw] if len(units) == 1 else [c.strip() for c in raw.split(",")]
            if len(chunks) != len(units):
                raise PlanError(self._mismatch(node, kind, var, raw, len(chunks), listed))
            if k not in fills:
                continue
            for i, (unit, chunk) in enumerate(zip(units, chunks, strict=True)):
                if unit.get(k) is None:
                    unit[k] = _value(field_kind, chunk, node, var, kind)
                    of = f", value {i + 1} of {len(units)}" if len(units) > 1 else ""
                    sources = unit.setdefault("from", {})
                    assert isinstance(sources, dict)  # written here only: {key: the variable it came from}
                    sources[k] = f"{var} of node {node.rank}{of}"
        return units

    def _count(self, node: Node, kind: type[HardwareType]) -> int:
        """RLinf's count of units made from a node's environment: the values of the identifying variables."""
        counts = {var: len(node.env[var].split(",")) for k in kind.count_keys if (var := k.upper()) in node.env}
        if len(set(counts.values())) > 1:
            said = ", ".join(f"{var} holds {n}" for var, n in counts.items())
            raise PlanError(
                f"{self._where.get(kind.name, kind.name)}: node {node.rank}'s environment does not say how many "
                f"{kind.name} {kind.noun}s it has ({said} comma-separated values); RLinf refuses this at start: "
                f"give {' and '.join(counts)} one value per {kind.noun}{_source(node)}"
            )
        return next(iter(counts.values()), 0)

    def _mismatch(
        self, node: Node, kind: type[HardwareType], var: str, raw: str, got: int, listed: list[HardwareUnit]
    ) -> str:
        n = self._count(node, kind) if not listed else len(listed)
        which = f" ({', '.join(u.path.rsplit('.', 1)[-1] for u in listed)})" if listed else ""
        return (
            f"{self._where.get(kind.name, f'node {node.rank}')}: node {node.rank}'s {var}={raw!r} holds {got} "
            f"comma-separated value(s) for its {n} {kind.name} {kind.noun}s{which}; RLinf refuses this at start: "
            f"give {var} one value per {kind.noun} ({n}), in the order they are listed, or unset it{_source(node)}"
        )


def _as_written(config: dict[str, object]) -> dict[str, object]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()}


def _value(kind: Kind, raw: str, node: Node, var: str, hw: type[HardwareType]) -> object:
    """A variable's text as the key's value (RLinf's RobotAutoConfig._parse), checked as the key is in a file."""
    inner = kind.kind if isinstance(kind, Maybe) else kind
    text = raw.strip()
    value: object
    if isinstance(inner, ListOf):
        value = [part.strip() for part in text.split(",") if part.strip()]
    elif isinstance(inner, Flag):
        value = text.lower() in ("1", "true", "yes", "on")
    elif isinstance(inner, Integer):
        value = int(text) if text.lstrip("-").isdigit() else text
    else:
        value = text
    rep = Reporter(None)
    kind.check(value, (var,), rep)
    if rep.problems:
        raise PlanError(
            f"node {node.rank}'s {var}={raw!r} is not a value of {hw.name}'s {var.lower()}: "
            f"{rep.problems[0].message}{_source(node)}"
        )
    return value


def _source(node: Node) -> str:
    return f" (node {node.rank}'s environment: {', '.join(sorted(node.env))})"


def _at(spec: JobSpec, path: str) -> str:
    """`job.yaml:12: cluster.node_groups[0].hardware`, as far as the spec knows where `path` is written."""
    where = spec.locations.get(path)
    return f"{where}: {path}" if where else (f"{spec.source}: {path}" if spec.source else path)


def indexed(units: Iterable[Unit]) -> list[Unit]:
    """The units of a group numbered 0, 1, ... in node-rank order (their ranks and resource names)."""
    return [{"type": u["type"], "index": i, **u} for i, u in enumerate(units)]


def unit_int(unit: Unit, key: str) -> int:
    """A unit's `index` or `node_rank`: the ints `indexed` and `Robots` write there."""
    value = unit[key]
    assert isinstance(value, int), (key, value)
    return value
