"""Shared test fixtures, including the one simulated Ray cluster of the session (`ray_cluster`)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from rlplace.inventory import Inventory
from rlplace.plan import hardware_resource_name

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "data" / "spec_examples"

# Every simulated node of every test session on a machine has the same IP, so two sessions running at once
# (developers sharing a machine, or the two halves of `make test`) would hand out the same master ports and
# collide when their workers bind them. Each session takes its own window of the default range (inherited by
# the embedded clusters the CLI tests start): by its pid, or, for the halves `make test` starts side by side
# (RLPLACE_TEST_HALF=0 and 1, children of one shell), by that shell's pid and the half, so the two never share
# one. A test that sets the variable itself still wins.
# pytest-xdist's workers (`make test` runs the half not marked `ray` on two) share their session's window: each
# takes its own part of it.
_WINDOW, _WINDOWS = 900, 14
_half = os.environ.get("RLPLACE_TEST_HALF")
_slot = (os.getpid() if _half is None else os.getppid() + int(_half)) % _WINDOWS
_window = f"{20000 + _slot * _WINDOW}-{20000 + (_slot + 1) * _WINDOW - 1}"
_ports = os.environ.setdefault("RLPLACE_MASTER_PORT_RANGE", _window)
if "PYTEST_XDIST_WORKER" in os.environ:
    _first, _last = map(int, _ports.split("-"))
    _index = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
    _share = (_last - _first + 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ["RLPLACE_MASTER_PORT_RANGE"] = f"{_first + _index * _share}-{_first + (_index + 1) * _share - 1}"


#: How long Ray may take to report a job's actors dead and its groups removed after the test returned.
_SETTLE_S = 5.0


@pytest.fixture(autouse=True)
def no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test that touched the session cluster (`ray_cluster`, also through `request.getfixturevalue`) carries
    the `ray` marker and leaves no placement group or actor of this driver alive; a test that does fails, and
    what it left is cleaned up so the next test starts clean."""
    yield
    if "ray_cluster" not in request.fixturenames:
        return
    if request.node.get_closest_marker("ray") is None:
        pytest.fail("this test uses the session's Ray cluster (ray_cluster) but is not marked `ray`")
    from tests.ray_helpers import clean_up, leftovers_after

    groups, actors = leftovers_after(_SETTLE_S)
    if groups or actors:
        clean_up()
        pytest.fail(f"test left placement groups {groups} and actors {actors} alive")


@pytest.fixture
def spec_examples() -> pathlib.Path:
    """The tests' own copies of ../shared/spec/examples (the acceptance needs copies, not the shared dir)."""
    return EXAMPLES


@dataclass(frozen=True)
class RayCluster:
    """What the `ray_cluster` fixture yields: the simulated cluster, its address and its live inventory."""

    cluster: Any
    address: str
    inventory: Inventory


#: The session cluster's nodes: (rank, GPUs, accelerator label, custom resources). Kept small: 4 raylets
#: on the 2-core CI machine; 8 logical CPUs each (logical, so they cost nothing).
RAY_NODES = (
    (0, 4, "A800", {}),
    (1, 4, "A800", {}),
    (2, 2, "RTX4090", {}),
    (3, 0, None, {hardware_resource_name("Franka", 0): 1.0, hardware_resource_name("Franka", 1): 1.0}),
)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """ONE simulated multi-node Ray cluster for the whole test session, with the driver connected.

    Shape (node rank: fake GPUs, `rlplace/accelerator` label, custom resources), 8 logical CPUs each:
      0 (head): 4 x A800
      1:        4 x A800
      2:        2 x RTX4090
      3:        no GPU, two Franka robots (custom resources rlplace/robot/franka/0 and /1)
    Every node carries the `rlplace/node-rank` label, as `rlplace start` sets it. Workers that get no GPU
    see CUDA_VISIBLE_DEVICES="" (the nodes start with RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1, as
    `rlplace start` does). No dashboard, no autoscaler, no log monitor, no workers started ahead; fast health checks
    (a dead node is noticed in ~2 s): what the tests need of Ray, and less CPU on the 2-core machine.
    Tests must leave no placement group or actor behind (`no_leftovers` checks this after each test).
    """
    import ray
    from ray.cluster_utils import Cluster

    from rlplace.ray.labels import ACCELERATOR_LABEL, HIDE_GPUS_ENV, NODE_RANK_LABEL
    from rlplace.ray.nodes import live_inventory

    saved = {k: os.environ.get(k) for k in HIDE_GPUS_ENV}
    os.environ.update(HIDE_GPUS_ENV)  # inherited by every raylet and so by every worker

    def node_args(rank: int, gpus: int, model: str | None, resources: dict[str, float]) -> dict[str, Any]:
        labels = {NODE_RANK_LABEL: str(rank), **({ACCELERATOR_LABEL: model} if model else {})}
        return dict(
            num_cpus=8, num_gpus=gpus, resources=resources, labels=labels, object_store_memory=100 * 1024 * 1024
        )

    head, *others = RAY_NODES
    cluster = Cluster(
        initialize_head=True,
        head_node_args=dict(
            **node_args(*head),
            include_dashboard=False,
            no_monitor=True,  # no autoscaler: the tests add and remove the nodes (a drain goes through the GCS)
            # Nothing reads the workers' output here (log_to_driver=False): no process follows their log files.
            include_log_monitor=False,
            # Tests start actors, each in a worker of its own: workers started ahead for tasks would only idle.
            _system_config={
                "health_check_period_ms": 500,
                "health_check_failure_threshold": 3,
                "prestart_worker_first_driver": False,
            },
        ),
    )
    try:
        for spec in others:
            cluster.add_node(**node_args(*spec))
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        yield RayCluster(cluster=cluster, address=cluster.address, inventory=live_inventory())
    finally:
        ray.shutdown()
        cluster.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def secured_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real head started as a user starts one, `rlplace start --head --node-rank 0` (token authentication on),
    with its own HOME (its token file is HOME/.ray/auth_token), on a free port, 8 logical CPUs and GPUs. Started
    on first use (about 7 s), stopped by pid at the end of the session (tests/real_heads.py)."""
    import real_heads

    head = real_heads.start(tmp_path_factory.mktemp("secured-head-home"), "--node-rank", "0")
    try:
        assert head.returncode == 0, head.output
        yield head
    finally:
        real_heads.kill_marked(head)


@pytest.fixture(autouse=True)
def no_ray_auth_variables_leak() -> Iterator[None]:
    """Ray's token variables of the test process are the same after each test: a test that connected to a secured
    cluster in-process would otherwise put every later test (and the session cluster's new workers) in token mode."""
    from rlplace.ray.auth import AUTH_ENV_VARS

    before = {k: os.environ.get(k) for k in AUTH_ENV_VARS}
    yield
    after = {k: os.environ.get(k) for k in AUTH_ENV_VARS}
    if after != before:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        changed = sorted(k for k in AUTH_ENV_VARS if before[k] != after[k])
        pytest.fail(f"the test changed Ray's token variables {changed} (restored now)")
