"""Driver-local components (`remote_<component>: false`): plain objects in the driver behind WorkerGroup's API;
and a config's `ray_address` joined where $RAY_ADDRESS names it too."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap

import pytest
import ray

import rlplace
from rlplace.errors import PlacementError
from rlplace.model import ComponentSpec, ElasticRange, JobSpec, PlacementSettings
from rlplace.ray.local_group import LocalGroup


class Learner:
    """Lives in the driver: records what it was built with, and which process it runs in."""

    def __init__(self, lr: float, *, name: str = "") -> None:
        self.lr, self.name, self.seen = lr, name, []

    def step(self, x: int) -> tuple[int, int, float]:
        self.seen.append(x)
        return os.getpid(), x * 2, self.lr

    def fail(self) -> None:
        raise ValueError("boom in the driver")


def spec(remote_train: bool) -> JobSpec:
    comps = (
        ComponentSpec("train", num_workers=2, remote=remote_train),
        ComponentSpec("eval", num_workers=1),
        ComponentSpec("env", num_workers=1, gpus_per_worker=0.0),
    )
    return JobSpec("pools", PlacementSettings(strategy="disaggregate"), comps)


@pytest.mark.ray
def test_a_driver_local_component_runs_in_the_driver_behind_the_worker_group_api(ray_cluster):
    with rlplace.connect(spec(remote_train=False), name="local", export_path=None, timeout_s=20) as job:
        group = job.launch("train", ray.remote(Learner), 0.1, name="t")  # a ray.remote class is unwrapped
        assert isinstance(group, LocalGroup) and len(group) == 2
        assert [type(i) for i in group.instances] == [Learner, Learner] and group.instances[0].name == "t"
        assert group.call("step", 3) == [(os.getpid(), 6, 0.1)] * 2
        assert group.get(group.call_async("step", 4)) == [(os.getpid(), 8, 0.1)] * 2
        assert group.call_sharded("step", [5, 6]) == [(os.getpid(), 10, 0.1), (os.getpid(), 12, 0.1)]
        assert ray.get(group.actors[1].step.remote(7))[1] == 14  # the actor-handle form the runtime uses
        assert group.call("step", 1, rank=1)[1] == 2 and group.instances[1].seen == [3, 4, 6, 7, 1]
        with pytest.raises(ValueError, match="boom in the driver"):
            group.call("fail")
        with pytest.raises(AttributeError):
            group.call_async("no_such_method")
        placements = group.placements()
        assert [(p.component, p.rank, p.world_size, p.planned_node_rank, p.mismatch) for p in placements] == [
            ("train", 0, 2, None, None),
            ("train", 1, 2, None, None),
        ]
        assert placements[0].node_rank == 0  # the driver runs on the head node
        with pytest.raises(PlacementError, match="runs in the driver process"):
            group.kill(0)
        job.verify()  # the driver-local group verifies like any other
        assert not any(w.in_driver for w in job.plan.by_component("eval"))


@pytest.mark.ray
def test_a_configs_ray_address_is_joined_where_the_user_names_it_too(ray_cluster, tmp_path):
    """A fresh process (Ray not started) joins the address the config names when $RAY_ADDRESS names it too (alone,
    a config's address is refused: tests/test_tokens_and_stop.py). About 5 s."""
    script = tmp_path / "connect.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import dataclasses, ray, rlplace
            from rlplace.model import ComponentSpec, ElasticRange, JobSpec, PlacementSettings
            spec = JobSpec("pools", PlacementSettings(strategy="default"), (ComponentSpec("train", num_workers=1),),
                           ray_address={ray_cluster.address!r})
            with rlplace.connect(spec, name="addr", export_path=None) as job:
                print("nodes", len(job.live), ray.get_runtime_context().gcs_address)
            """
        )
    )
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.address}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"nodes 4 {ray_cluster.address}" in out.stdout


class ElasticLearner(Learner):
    def on_resized(self, event) -> None:
        self.seen.append((event.old_size, event.new_size))


@pytest.mark.ray
def test_a_driver_local_elastic_component_resizes_in_the_driver(ray_cluster):
    elastic = dataclasses.replace(spec(remote_train=False), elastic=(ElasticRange("train", 1, 3),))
    with rlplace.connect(elastic, name="local-elastic", export_path=None, timeout_s=20) as job:
        group = job.launch("train", ElasticLearner, 0.5)
        event = job.resize("train", 3)
        assert (event.old_size, event.new_size, [r.name for r in event.added]) == (2, 3, ["rlplace:train:2"])
        assert group.call("step", 1) == [(os.getpid(), 2, 0.5)] * 3  # built in the driver with the same arguments
        assert [i.seen for i in group.instances] == [[(2, 3), 1]] * 3
        job.resize("train", 1)
        assert len(group) == 1 and group.instances[0].seen == [(2, 3), 1, (3, 1)]
        assert [w.rank for w in job.plan.by_component("train")] == [0]
