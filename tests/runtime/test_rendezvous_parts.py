"""The rendezvous' pure parts: master-port choice, the job record's encoding, launch options of workers that
see their node's GPUs, and the placed subclass that carries the record into the actor (no cluster needed)."""

from __future__ import annotations

import socket

import pytest
import ray

from rlplace.errors import PlacementError
from rlplace.plan import Worker
from rlplace.ray._compat import user_class
from rlplace.ray.exchange import ranks_of_nodes
from rlplace.ray.launch import actor_options, placed_class, remote_class
from rlplace.ray.master_ports import PORT_RANGE_ENV, free_ports, port_range
from rlplace.ray.records import ComponentRecord, JobRecord, NodeRecord
from rlplace.ray.state import NodeEvent


def test_free_ports_are_distinct_bindable_and_skip_what_others_hold():
    ports = free_ports(3, avoid={29500}, low=29000, high=29999)
    assert len(set(ports)) == 3 and 29500 not in ports and all(p > 29500 for p in ports)
    with socket.socket() as s:
        s.bind(("", ports[0]))  # released again on return


def _some_free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def test_free_ports_skip_a_port_in_use_and_wrap_around_the_range():
    with socket.socket() as held:
        held.bind(("", 0))
        busy, free = held.getsockname()[1], _some_free_port()
        low, high = min(busy, free), max(busy, free)
        others = set(range(low, high + 1)) - {busy, free}  # only these two ports are candidates
        assert free_ports(1, avoid=others, low=low, high=high, first=busy) == [free]
        with pytest.raises(PlacementError, match=rf"no 1 free ports in {busy}-{busy}.*{PORT_RANGE_ENV}"):
            free_ports(1, avoid=(), low=busy, high=busy, first=busy)
    # From `first` to the top of the range, then from its bottom.
    assert free_ports(1, avoid={free + 1, free + 2}, low=free, high=free + 2, first=free + 1) == [free]


def test_port_range_from_the_environment(monkeypatch):
    monkeypatch.setenv(PORT_RANGE_ENV, "40000-40100")
    assert port_range() == (40000, 40100)
    monkeypatch.setenv(PORT_RANGE_ENV, "40100-400")
    with pytest.raises(PlacementError, match=r"RLPLACE_MASTER_PORT_RANGE='40100-400' is not a port range"):
        port_range()


def test_the_job_record_of_32768_workers_is_one_small_value():
    ranks = tuple(r // 8 for r in range(32768))
    record = JobRecord(
        job="j",
        namespace="ns",
        instance="0" * 32,
        ray_job_id="01000000",
        written_at=1.0,
        nodes={i: NodeRecord(f"{i:056x}", f"10.0.{i // 256}.{i % 256}") for i in range(4096)},
        components={
            "train": ComponentRecord(32768, ranks, 0, "10.0.0.0", 29500),
            "eval": ComponentRecord(2, (None, None)),
        },
    )
    raw = record.to_bytes()
    assert JobRecord.from_bytes(raw) == record and len(raw) < 100_000
    assert record.node_of("train", 17) == 2 and record.node_of("eval", 1) is None and record.node_of("x", 0) is None
    assert record.ports_by_address() == {"10.0.0.0": {29500}}


def test_the_job_record_carries_the_state_rlplace_status_shows():
    """One record per job: beside the rank -> node map and masters, the spares serving ranks, the ranks lost
    (with their window) or failed, the last node events and the driver-local components."""
    lost = NodeEvent("lost", 1, ("rlplace:train:1",), 10.0, "n1", "10.0.0.2", "10.0.0.2 (id n1): Ray declared it dead")
    took = NodeEvent("spare", 1, ("rlplace:train:1",), 12.0, "s1", "10.0.0.9", "hot spare 10.0.0.9 took over", 2.0)
    record = JobRecord(
        job="j",
        namespace="ns",
        instance="1" * 32,
        ray_job_id="02000000",
        written_at=12.0,
        nodes={0: NodeRecord("n0", "10.0.0.1"), 1: NodeRecord("s1", "10.0.0.9", spare=True)},
        components={
            "train": ComponentRecord(2, (0, 1), 0, "10.0.0.1", 29500),
            "eval": ComponentRecord(1, (None,), in_driver=True),
        },
        lost={2: (11.0, 71.0)},
        failed=(3,),
        events=(lost, took),
        driver_pid=4242,
        driver_node_id="n0",
    )
    assert JobRecord.from_bytes(record.to_bytes()) == record
    assert record.worker_nodes() == {"rlplace:train:0": 0, "rlplace:train:1": 1, "rlplace:eval:0": None}


def test_a_worker_that_sees_its_nodes_gpus_keeps_them_in_its_runtime_env():
    seeing = Worker(
        "agent", 0, 1, 0, (), 0.0, 1.0, "node", env_vars={"A": "1"}, sees_node_gpus=True, visible_gpus=(0, 1, 2, 3)
    )
    blind = Worker("agent", 0, 1, 0, (), 0.0, 1.0, "cpu", env_vars={"A": "1"})
    assert actor_options(seeing, namespace="ns", scheduling_strategy=None)["runtime_env"]["env_vars"] == {"A": "1"}
    hidden = actor_options(blind, namespace="ns", scheduling_strategy=None)["runtime_env"]["env_vars"]
    assert hidden == {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "1", "A": "1"}


class Policy:
    """A user class."""

    def __init__(self, size: int, *, scale: float = 1.0) -> None:
        self.size, self.scale = size, scale

    def act(self) -> float:
        return self.size * self.scale


def test_the_placed_subclass_takes_the_record_first_and_stays_the_users_class(monkeypatch):
    installed = []
    monkeypatch.setattr("rlplace.ray.worker.install", installed.append)
    cls = placed_class(Policy)
    obj = cls({"payload": 1}, 3, scale=2.0)
    assert installed == [{"payload": 1}] and obj.act() == 6.0 and isinstance(obj, Policy)
    assert (cls.__name__, cls.__qualname__, cls.__module__, cls.__doc__) == (
        "Policy",
        "Policy",
        Policy.__module__,
        "A user class.",
    )


def test_an_actor_class_is_unwrapped_keeping_its_options():
    actor_class = ray.remote(max_concurrency=4, num_cpus=2)(Policy)
    placed = remote_class(actor_class)
    assert placed is remote_class(actor_class)  # once per class
    base, options = user_class(placed)
    assert options == {"max_concurrency": 4, "num_cpus": 2} and base.__mro__[1] is Policy


def test_a_robot_config_left_without_its_ip_is_filled_from_the_nodes_environment(monkeypatch):
    """RLinf reads a Franka's left-out `robot_ip` from the node's ROBOT_IP when it enumerates hardware; the
    worker does the same with what the driver says may be filled (written values are never replaced)."""
    from rlplace.ray.rendezvous import hardware_env_fallbacks
    from rlplace.ray.worker import _with_node_env

    left_out = {"type": "Franka", "index": 0, "node_rank": 3}
    written = {**left_out, "robot_ip": "10.0.0.7"}
    assert hardware_env_fallbacks(left_out) == [("robot_ip", "ROBOT_IP")]
    assert hardware_env_fallbacks(written) == [] and hardware_env_fallbacks(None) == []
    assert hardware_env_fallbacks({"type": "DualFranka", "index": 0, "node_rank": 3, "left_robot_ip": "10.0.0.1"}) == [
        ("right_robot_ip", "RIGHT_ROBOT_IP")
    ]
    monkeypatch.setenv("ROBOT_IP", "10.0.0.9")
    assert _with_node_env(left_out, hardware_env_fallbacks(left_out))["robot_ip"] == "10.0.0.9"
    assert _with_node_env(written, hardware_env_fallbacks(written))["robot_ip"] == "10.0.0.7"
    monkeypatch.delenv("ROBOT_IP")
    assert "robot_ip" not in _with_node_env(left_out, hardware_env_fallbacks(left_out))


def test_the_job_record_names_renumbered_workers_and_carries_elastic_ranges():
    """After a shrink renumbered a survivor (it keeps its actor name), `rlplace status` finds it by that name
    with its rank now; an elastic component's range travels too (status prints it)."""
    record = JobRecord(
        job="j",
        namespace="ns",
        instance="i",
        ray_job_id="01000000",
        written_at=1.0,
        components={
            "train": ComponentRecord(
                2, (0, 4), 0, "10.0.0.1", 29500, names={0: "rlplace:train:1", 1: "rlplace:train:1.1"}, elastic=(1, 2, 2)
            ),
            "eval": ComponentRecord(1, (0,)),
        },
    )
    back = JobRecord.from_bytes(record.to_bytes())
    assert back == record
    assert back.worker_ranks() == {
        "rlplace:train:1": ("train", 0),
        "rlplace:train:1.1": ("train", 1),
        "rlplace:eval:0": ("eval", 0),
    }
    assert back.worker_nodes()["rlplace:train:1.1"] == 4
    assert back.components["train"].elastic == (1, 2, 2) and back.components["eval"].elastic is None


def test_workers_on_one_unranked_node_count_it_once_whatever_rank_they_read():
    """Two workers Ray placed on a hot spare exchanged their nodes while the spare took node 1 over: one read the
    job record before (no rank), one after (rank 1). The spare is one node of the group (explorer run 2 seed
    2006825: GROUP_WORLD_SIZE was 2), ranked by what was read last; every worker computes the same."""
    entries = [
        {"node_id": "spare", "node_rank": None},
        {"node_id": "spare", "node_rank": 1},
        {"node_id": "n0", "node_rank": 0},
        {"node_id": "other", "node_rank": None},
    ]
    assert ranks_of_nodes(entries) == {"spare": 1, "n0": 0, "other": -1}
    assert ranks_of_nodes(entries[::-1]) == ranks_of_nodes(entries)
