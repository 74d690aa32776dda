"""The hard rule of topology-aware placement: a model-parallel group stays inside one NVLink domain.

The groups are the config's (`ComponentSpec.model_parallel`): RLinf's Megatron tensor x context-parallel and
expert-parallel groups, each a run of consecutive ranks of one process per GPU (a multi-GPU process is one node,
so always one domain). Where rlplace chooses the GPUs (RLinf's AUTO mode widens the actor to every GPU), `choose`
keeps whole groups in each domain and leaves the rest of a domain idle, saying so; a group larger than every
domain goes across the fewest domains, with a warning naming its size and the largest domain. Where the user
wrote the ranks, `check` keeps them exactly and warns for every group that spans domains it need not, naming the
group, its ranks, the domains and a placement that would not split it (docs/planner.md, "Topology").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

from rlplace.inventory import Inventory
from rlplace.model import ComponentSpec
from rlplace.plan import MixedGroup, PlanTopology
from rlplace.planner.ranges import format_ranks, ranks_brief
from rlplace.planner.topology import domain_name, domains

_SHOWN = 3  # split groups a warning names before "and N more"


def domain_gpus(topology: PlanTopology, inventory: Inventory) -> dict[str | int, int]:
    """GPUs per NVLink domain of the inventory."""
    out: dict[str | int, int] = {}
    for node, d in zip(inventory.nodes, domains(topology, range(len(inventory))), strict=True):
        out[d] = out.get(d, 0) + node.num_gpus
    return out


def choose(
    c: ComponentSpec, picks: list[int], nodes: list[int], topology: PlanTopology, warnings: list[str]
) -> list[int]:
    """Of `picks` (flat resource ranks, in order; `nodes[j]` holds `picks[j]`), those rlplace places processes on
    so that every group of `c.model_parallel.size` consecutive ranks sits in one NVLink domain: each domain's
    GPUs in order, the remainder that holds no whole group left idle (warned). A group larger than every domain
    spans the fewest domains it can."""
    assert c.model_parallel is not None
    size = c.model_parallel.size
    by_domain: dict[str | int, list[int]] = {}
    for p, d in zip(picks, domains(topology, nodes), strict=True):
        by_domain.setdefault(d, []).append(p)
    largest = max(map(len, by_domain.values()))
    if size <= largest:
        kept = [p for ps in by_domain.values() for p in ps[: len(ps) - len(ps) % size]]
    else:
        kept = _fewest_domains(list(by_domain.values()), size, math.ceil(size / largest))
    idle = len(picks) - len(kept)
    if idle:
        warnings.append(_idle_warning(c, by_domain, size, largest, idle))
    return kept


def _fewest_domains(runs: list[list[int]], size: int, need: int) -> list[int]:
    """Groups of `size` taken over the domains' runs in order; a group that would span more than `need` domains
    starts at the next domain instead (the rest of the current one idle). Whatever is left at the end is idle."""
    kept: list[int] = []
    j, offset = 0, 0
    while j < len(runs):
        group: list[int] = []
        spans, k, o = 0, j, offset
        while len(group) < size and k < len(runs):
            take = runs[k][o : o + size - len(group)]
            group += take
            spans += 1
            if len(group) < size:
                k, o = k + 1, 0
            else:
                o += len(take)
        if len(group) < size:
            break
        if spans > need and offset > 0:
            j, offset = j + 1, 0
            continue
        kept += group
        j, offset = (k, o) if o < len(runs[k]) else (k + 1, 0)
    return kept


def _idle_warning(c: ComponentSpec, by_domain: dict, size: int, largest: int, idle: int) -> str:
    assert c.model_parallel is not None
    what = _what(c)
    if size > largest:
        return (
            f"{c.name}: its {what} groups of {size} ranks are larger than every NVLink domain (the largest holds "
            f"{largest} of its GPUs), so each spans the fewest domains it can; {idle} GPU(s) stay idle where a group "
            f"would otherwise span one domain more"
        )
    left = {len(ps) % size for ps in by_domain.values()}
    each = f"{left.pop()} GPU(s) of each of its {len(by_domain)} NVLink domains" if len(left) == 1 else "GPUs"
    return (
        f"{c.name}: rlplace leaves {each} idle ({idle} in all) that RLinf's AUTO mode would give it, so that no "
        f"{what} group of {size} consecutive ranks spans two NVLink domains ({_origin(c)})"
    )


def check(
    c: ComponentSpec,
    nodes: Sequence[int],
    picks: Sequence[int],
    topology: PlanTopology,
    capacity: dict[str | int, int],
    warnings: list[str],
    split: list[MixedGroup],
    available: Callable[[], Sequence[tuple[int, int]]] = tuple,
) -> None:
    """Warn for each group of `c` (rank r on node `nodes[r]`, resource rank `picks[r]`) that spans more NVLink
    domains than it must; record it in `split`. The placement is kept as written; the warning suggests resource
    ranks for as many whole groups, the written ones first, then the others of `available()` ((resource rank,
    node) of every GPU the component's node groups have; asked only for a warning)."""
    largest = max(capacity.values(), default=0)
    of_rank = domains(topology, nodes)
    for (kind, size, origin), need, bad in spanning(c, of_rank, largest, split):
        if size > largest and of_rank:
            warnings.append(
                f"{c.name}: its {kind} groups of {size} ranks ({origin}) are larger than every NVLink domain (the "
                f"largest has {largest} GPUs), so each spans at least {need} domains"
            )
        if bad:
            warnings.append(
                _split_warning(
                    c, (kind, size, origin), bad, len(of_rank) // size, nodes, of_rank, picks, topology, available
                )
            )


def spanning(
    c: ComponentSpec, of_rank: Sequence[str | int], largest: int, split: list[MixedGroup]
) -> Iterator[tuple[tuple[str, int, str], int, list[tuple[int, list]]]]:
    """For each kind of model-parallel group of `c` (rank r in the NVLink domain `of_rank[r]`, the largest domain
    holding `largest` GPUs): (kind, size, origin), the fewest domains a group of that size needs, and the groups
    (first rank, their domains) that span more than that. Every group that spans domains at all is recorded in
    `split`, for the pictures."""
    assert c.model_parallel is not None
    for kind, size, origin in c.model_parallel.groups:
        need = max(1, math.ceil(size / largest)) if largest else 1
        bad = []
        for start in range(0, len(of_rank) - len(of_rank) % size, size):
            spanned = list(dict.fromkeys(of_rank[start : start + size]))
            if len(spanned) > 1:
                split.append(
                    MixedGroup(c.name, kind, tuple(range(start, start + size)), tuple(map(domain_name, spanned)))
                )
                if len(spanned) > need:
                    bad.append((start, spanned))
        yield (kind, size, origin), need, bad


def _split_warning(
    c: ComponentSpec,
    group: tuple[str, int, str],
    bad: list[tuple[int, list]],
    total: int,
    nodes: Sequence[int],
    of_rank: list,
    picks: Sequence[int],
    topology: PlanTopology,
    available: Callable[[], Sequence[tuple[int, int]]],
) -> str:
    assert c.model_parallel is not None  # as in spanning: only components with groups are checked
    kind, size, origin = group
    named = []
    for start, spanned in bad[:_SHOWN]:
        where = " and ".join(
            domain_name(d) if isinstance(d, int) else f"{d} (node{'s' if len(on) > 1 else ''} {format_ranks(on)})"
            for d in spanned
            for on in [sorted({nodes[r] for r in range(start, start + size) if of_rank[r] == d})]
        )
        named.append(f"group {start // size} (ranks {start}-{start + size - 1}) spans {where}")
    more = f"; and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
    head = (
        f"{c.name}: {len(bad)} of its {total} {kind} groups ({size} consecutive ranks each: {origin}) span NVLink "
        f"domains: {'; '.join(named)}{more}. Kept as written"
    )
    fix = _holding(c, picks, nodes, available(), topology)
    if len(fix) >= total * c.model_parallel.size:
        return f"{head}; resource ranks that keep every group in one domain: {ranks_brief(fix)}"
    if not fix:
        return f"{head}; no NVLink domain of its node groups holds a whole group"
    held = len(fix) // c.model_parallel.size
    return (
        f"{head}; no choice of its node groups' GPUs keeps all {total} groups each in one domain: their NVLink "
        f"domains hold {held} whole group(s), on resource ranks {ranks_brief(fix)}"
    )


def _holding(
    c: ComponentSpec,
    picks: Sequence[int],
    nodes: Sequence[int],
    available: Sequence[tuple[int, int]],
    topology: PlanTopology,
) -> list[int]:
    """Resource ranks for as many whole groups as `picks` holds, each group inside one NVLink domain (so a
    suggestion never names ranks that cannot hold the groups): the written ranks first, then the other GPUs of
    `available`, domain by domain in that order; sorted. A group larger than every domain: `choose`'s fewest
    domains, of the written ranks."""
    assert c.model_parallel is not None
    size = c.model_parallel.size
    written = set(picks)
    order = [*zip(picks, nodes, strict=True), *((k, n) for k, n in available if k not in written)]
    by_domain: dict[str | int, list[int]] = {}
    for (k, _), d in zip(order, domains(topology, [n for _, n in order]), strict=True):
        by_domain.setdefault(d, []).append(k)
    if size > max(map(len, by_domain.values())):
        return choose(c, list(picks), list(nodes), topology, [])
    want = len(picks) - len(picks) % size
    kept: list[int] = []
    for ps in by_domain.values():
        kept += ps[: min(len(ps) - len(ps) % size, want - len(kept))]
    return sorted(kept)


def _what(c: ComponentSpec) -> str:
    assert c.model_parallel is not None
    return "/".join(kind for kind, _, _ in c.model_parallel.groups)


def _origin(c: ComponentSpec) -> str:
    assert c.model_parallel is not None
    return "; ".join(origin for _, _, origin in c.model_parallel.groups)
