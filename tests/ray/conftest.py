"""Fixtures of the Ray-layer tests: every test here leaves no placement group or actor alive."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import ray
import ray_plans
import ray_workers
from ray import cloudpickle
from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

# The test-only modules are not importable in worker processes (tests/ray is not on their path): ship
# their code with the pickled classes instead.
cloudpickle.register_pickle_by_value(ray_workers)
cloudpickle.register_pickle_by_value(ray_plans)

_LIVE_PG = ("PENDING", "CREATED", "RESCHEDULING")
_LIVE_ACTOR = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING")
_SETTLE_S = 5.0


def leftovers() -> tuple[list[str], list[str]]:
    """Placement groups and actors of this driver's job that are still alive."""
    job = ray.get_runtime_context().get_job_id()
    groups = [
        f"{pg.get('name') or pg_id} ({pg['state']})"
        for pg_id, pg in placement_group_table().items()
        if pg["state"] in _LIVE_PG and pg_id.endswith(job)
    ]
    actors = [
        f"{a.get('Name') or a.get('ActorClassName')} ({a['State']})"
        for a in ray._private.state.actors().values()
        if a["State"] in _LIVE_ACTOR and a.get("JobID") == job
    ]
    return groups, actors


@pytest.fixture(autouse=True)
def no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves groups or actors alive (after a short settle), then clean them up."""
    yield
    if "ray_cluster" not in request.fixturenames:
        return
    deadline = time.monotonic() + _SETTLE_S
    groups, actors = leftovers()
    while (groups or actors) and time.monotonic() < deadline:
        time.sleep(0.1)
        groups, actors = leftovers()
    if groups or actors:
        _clean_up()
        pytest.fail(f"test left placement groups {groups} and actors {actors} alive")


def _clean_up() -> None:
    for pg_id, pg in placement_group_table().items():
        if pg["state"] in _LIVE_PG:
            remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pg_id))))
    for name in ray.util.list_named_actors(all_namespaces=True):
        ray.kill(ray.get_actor(name["name"], namespace=name["namespace"]), no_restart=True)
