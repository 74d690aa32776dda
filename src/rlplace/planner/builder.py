"""Accumulates placed workers and the device slots they occupy, then builds the Plan in one pass.

Why a builder: a worker's GPU fraction (1/k for k co-residents) and its bundle are only known once
every component has been placed, and a 4,096-node plan holds ~100k workers. So placement records
compact per-component blocks (one slot id per worker) and `finish` creates every Worker and Bundle
exactly once, without per-worker scans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlplace.plan import Bundle, EffectiveSettings, GroupSummary, Plan, Worker

EnvOf = tuple[dict[str, str], str | None]  # (env vars, interpreter) of one worker
_NO_ENV: dict[str, str] = {}  # shared by workers without env vars (workers are read-only)


@dataclass(slots=True)
class Block:
    """Workers of one component placed together: worker j has process rank `ranks[j]` (None: j),
    sits in slot `slots[j]` and was placed through `groups[j]` (or `group` for all)."""

    component: str
    slots: list[int]
    num_cpus: float
    group: str | None
    ranks: list[int] | None = None
    groups: list[str] | None = None
    env: list[EnvOf] | None = None  # per worker
    hardware: list[dict[str, object] | None] | None = None


@dataclass(slots=True)
class Unpinned:
    """Workers left to Ray's scheduler (strategy default): no node, no bundle."""

    component: str
    count: int
    gpus_per_worker: float
    num_cpus: float


@dataclass
class PlanBuilder:
    """Slots are bundles: slot id == bundle index. A GPU slot is shared by every worker placed on the
    same (node, GPU set); a CPU slot belongs to whatever key the caller gives (a worker, a node)."""

    _slot_of: dict[tuple, int] = field(default_factory=dict)
    slot_node: list[int] = field(default_factory=list)
    slot_gpus: list[tuple[int, ...]] = field(default_factory=list)
    slot_group: list[str | None] = field(default_factory=list)
    slot_resources: list[dict[str, float]] = field(default_factory=list)
    slot_count: list[int] = field(default_factory=list)
    slot_cpus: list[float] = field(default_factory=list)
    blocks: list[Block | Unpinned] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    groups: list[GroupSummary] = field(default_factory=list)

    def slot(
        self,
        key: tuple,
        node_rank: int,
        gpus: tuple[int, ...],
        group: str | None,
        resources: dict[str, float] | None = None,
    ) -> int:
        """The id of the slot `key`, created on first use."""
        sid = self._slot_of.get(key)
        if sid is None:
            sid = self._slot_of[key] = len(self.slot_node)
            self.slot_node.append(node_rank)
            self.slot_gpus.append(gpus)
            self.slot_group.append(group)
            self.slot_resources.append(resources or {})
            self.slot_count.append(0)
            self.slot_cpus.append(0.0)
        return sid

    def gpu_slots(self, node_rank: int, gpus: list[int], group: str | None) -> list[int]:
        """Slot ids of single GPUs `gpus` on `node_rank` (the hot path of pool packing)."""
        get, out = self._slot_of.get, []
        for g in gpus:
            sid = get((node_rank, g))
            if sid is None:
                sid = self.slot((node_rank, g), node_rank, (g,), group)
            out.append(sid)
        return out

    def add(self, block: Block | Unpinned) -> None:
        """Record a block; its workers count as residents of their slots from now on."""
        self.blocks.append(block)
        if isinstance(block, Block):
            count, cpus, c = self.slot_count, self.slot_cpus, block.num_cpus
            for s in block.slots:
                count[s] += 1
                cpus[s] += c

    def shared_gpu(self, slots: list[int]) -> bool:
        """Whether any of these slots is a GPU slot shared with another worker."""
        count, gpus = self.slot_count, self.slot_gpus
        return any(count[s] > 1 and gpus[s] for s in slots)

    def finish(self, settings: EffectiveSettings, uses_placement_groups: bool = True) -> Plan:
        bundles = tuple(
            Bundle(i, node, gpus, cpus, res, grp)
            for i, (node, gpus, cpus, res, grp) in enumerate(
                zip(
                    self.slot_node,
                    self.slot_gpus,
                    self.slot_cpus,
                    self.slot_resources,
                    self.slot_group,
                    strict=True,
                )
            )
        )
        workers: list[Worker] = []
        for block in self.blocks:
            if isinstance(block, Unpinned):
                workers.extend(_unpinned(block))
            else:
                workers.extend(self._pinned(block, uses_placement_groups))
        return Plan(
            workers=tuple(workers),
            bundles=bundles if uses_placement_groups else (),
            settings=settings,
            groups=tuple(self.groups),
            warnings=tuple(self.warnings),
            uses_placement_groups=uses_placement_groups,
        )

    def _pinned(self, b: Block, with_bundles: bool) -> list[Worker]:
        node_of, gpus_of, count = self.slot_node, self.slot_gpus, self.slot_count
        n = len(b.slots)
        ranks = b.ranks if b.ranks is not None else range(n)
        local: dict[int, int] = {}
        env, hw, groups = b.env, b.hardware, b.groups
        out = []
        for j, s in enumerate(b.slots):
            node = node_of[s]
            lr = local.get(node, 0)
            local[node] = lr + 1
            gpus = gpus_of[s]
            ev, py = env[j] if env is not None else (_NO_ENV, None)
            out.append(
                Worker(
                    b.component,
                    ranks[j],
                    n,
                    node,
                    gpus,
                    1.0 / count[s] if gpus else 0.0,
                    b.num_cpus,
                    groups[j] if groups is not None else b.group,
                    s if with_bundles else None,
                    lr,
                    ev,
                    py,
                    hw[j] if hw is not None else None,
                )
            )
        return out


def _unpinned(b: Unpinned) -> list[Worker]:
    return [
        Worker(b.component, r, b.count, None, (), b.gpus_per_worker, b.num_cpus, None, None, 0, _NO_ENV, None, None)
        for r in range(b.count)
    ]
