"""Elastic components in a plan: their ranges (`Plan.elastic`), checked against the placement.

The loader checks what the config says (`rlplace.config.elastic`); `attach` checks what only the placement
tells: the starting size where the planner derives it, and components whose processes span GPUs that other
components' processes hold (RLinf's collocated rollout with tensor parallelism: each process reserves no GPU and
sees the others' bundles, so every rank is pinned to devices another component owns). It also says, as a
warning, when the planned inventory cannot hold a component's `max` (a dry run of `resize.grow`).
"""

from __future__ import annotations

import dataclasses
import math

from rlplace.config.elastic import start_problem
from rlplace.errors import ConfigError, Problem
from rlplace.inventory import Inventory
from rlplace.model import ElasticRange, JobSpec
from rlplace.plan import Plan, SizeRange
from rlplace.planner.resize import grow


def attach(spec: JobSpec, plan: Plan, inventory: Inventory) -> Plan:
    """`plan` with the ranges of `spec.elastic`; ConfigError for a range the placement cannot honour."""
    if not spec.elastic:
        return plan
    problems: list[Problem] = []
    ranges: dict[str, SizeRange] = {}
    for rng in spec.elastic:
        workers = plan.by_component(rng.component)
        problem = _refusal(rng, plan) if workers else _problem(rng, f"{rng.component} has no workers in this plan")
        problem = problem or start_problem(rng, len(workers), "as planned")
        if problem is not None:
            problems.append(problem)
            continue
        ranges[rng.component] = SizeRange(rng.min, len(workers) if rng.max is None else rng.max, len(workers))
    if problems:
        raise ConfigError(problems)
    plan = dataclasses.replace(plan, elastic=ranges)
    return dataclasses.replace(plan, warnings=(*plan.warnings, *_room_warnings(spec, plan, inventory)))


def _problem(rng: ElasticRange, message: str) -> Problem:
    return Problem(path=rng.path, value=rng.component, file=rng.file, line=rng.line, message=message)


def _refusal(rng: ElasticRange, plan: Plan) -> Problem | None:
    c = rng.component
    workers = plan.by_component(c)
    spanning = next((w for w in workers if w.gpus and w.visible_gpus is not None), None)
    if spanning is not None:
        return _problem(
            rng,
            f"{c} cannot change size: its processes span GPUs that other components' processes hold ({c} "
            f"{spanning.rank} sees GPUs {list(spanning.gpus)} of node {spanning.node_rank} and reserves none), so "
            "every rank is pinned to devices another component owns; remove it from elastic",
        )
    robot = next((w for w in workers if w.hardware), None)
    if robot is not None:
        return _problem(rng, f"{c} cannot change size: it is placed on hardware units, and hardware does not multiply")
    return None


def _room_warnings(spec: JobSpec, plan: Plan, inventory: Inventory) -> list[str]:
    """A warning for each component whose `max` the planned inventory cannot hold: a dry run of the growth,
    counting devices as `plan()` does (CPUs are Ray's to check when it reserves; declared nodes' CPUs are a
    default, not a fact)."""
    inventory = Inventory(tuple(dataclasses.replace(n, num_cpus=math.inf) for n in inventory.nodes))
    out = []
    for c, r in plan.elastic.items():
        if r.max <= r.start:
            continue
        change = grow(spec, plan, inventory, c, r.max - r.start, partial=True).change(c)
        room = r.start + (len(change.added) if change else 0)
        if room < r.max:
            out.append(
                f"elastic {c}: max {r.max}, but this inventory holds at most {room} {c} worker(s) beside the rest of "
                "the plan; a live cluster with more free capacity may hold more"
            )
    return out
