"""Driver-local components (RLightning's `remote_<component>: false`) beside actor groups, on the session cluster:
weight sync through the object store and through torch.distributed, buffer routing in both directions, and
`rlplace status`. A driver-local worker is a plain object in the driver behind WorkerGroup's interface; the
runtime must not notice the difference."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import pytest
import ray
from ray import cloudpickle

import rlplace
from rlplace.errors import PlacementError
from rlplace.ray.local_group import LocalGroup
from rlplace.ray.status import collect
from rlplace.runtime import BufferShard, ShardRouter, sync_weights

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Train on nodes 0 and 1 (so a buffer shard on each), eval on node 2, env on node 3: each `remote_*: false`
# below moves one component into the driver.
POOLS = {
    "train_worker_num": 2,
    "eval_worker_num": 2,
    "buffer_worker_num": "auto",
    "placement": {"mode": "manual"},
}
RESOURCE_POOL = [
    {"name": "train_pool", "num_node": 2, "num_gpus": 4, "train": "0, 4"},
    {"name": "rollout_pool", "num_node": 1, "num_gpus": 2, "eval": "0-1"},
]


def config(**remote: bool) -> dict[str, Any]:
    return {"cluster": {**POOLS, **remote}, "resource_pool": RESOURCE_POOL}


class Trainer:
    """Train side: its weights are a version number and its rank's marker; samples from its node's shard."""

    def __init__(self, seed: int = 0) -> None:
        self.version = seed

    def get_weights(self) -> dict[str, Any]:
        self.version += 1
        return {"version": self.version, "w": list(range(100))}

    def train_step(self, router: ShardRouter) -> int:
        return len(router.sample(8))

    def pid(self) -> int:
        return os.getpid()


class Evaluator:
    """Eval side: keeps what `set_weights` got (a value, never a reference) and writes experience."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def set_weights(self, weights: dict[str, Any]) -> int:
        self.got.append(weights)
        return weights["version"]

    def received(self) -> list[str]:
        return [type(w).__name__ for w in self.got]

    def rollout(self, router: ShardRouter) -> int:
        return router.write([("obs", i) for i in range(4)])

    def pid(self) -> int:
        return os.getpid()


def test_object_store_sync_reaches_driver_local_targets_and_comes_from_driver_local_sources(ray_cluster):
    with rlplace.connect(config(remote_eval=False), export_path=None, timeout_s=20) as job:
        train, evals = job.launch("train", Trainer), job.launch("eval", Evaluator)
        assert isinstance(evals, LocalGroup) and not isinstance(train, LocalGroup)
        report = sync_weights(train, [evals], transport="object_store")
        assert (report.transport, report.objects, report.targets) == ("object_store", 1, 2) and report.bytes > 0
        assert [i.got[-1]["version"] for i in evals.instances] == [1, 1]
        assert evals.call("received") == [["dict"], ["dict"]]  # the weights, not a reference to them
    with rlplace.connect(config(remote_train=False), export_path=None, timeout_s=20) as job:
        train, evals = job.launch("train", Trainer, 10), job.launch("eval", Evaluator)
        assert isinstance(train, LocalGroup)
        sync_weights(train, [evals])
        assert evals.call("set_weights", {"version": -1}) == [-1, -1]
        assert [got[0]["version"] for got in evals.call("__ray_call__", lambda e: e.got)] == [11, 11]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_collective_sync_into_driver_local_targets_is_bit_exact(ray_cluster):
    """Train actors broadcast into two eval workers that live in the driver: they join the sync groups side by
    side in one process, on threads of their own, while the actors take part."""
    import torch

    class Tensors:
        def __init__(self, seed: int) -> None:
            g = torch.Generator().manual_seed(seed)
            self.weights = [torch.randn(64, 33, generator=g), torch.randn(1000, generator=g).double()]
            self.updates = 0

        def weight_tensors(self) -> list[Any]:
            return self.weights

        def weights_updated(self) -> None:
            self.updates += 1

        def digest(self) -> tuple[list[bytes], int]:
            return [w.numpy().tobytes() for w in self.weights], self.updates

    with rlplace.connect(config(remote_eval=False), export_path=None, timeout_s=20) as job:
        train = job.launch("train", Tensors, 1)
        evals = job.launch("eval", Tensors, 2)
        for round_ in (1, 2):
            report = sync_weights(train, [evals], transport="collective", timeout_s=60)
            assert (report.transport, report.backend, report.targets) == ("collective", "gloo", 2)
            source = train.call("digest", rank=0)[0]
            assert [d for d, _ in evals.call("digest")] == [source, source]
            assert [n for _, n in evals.call("digest")] == [round_, round_]


def test_driver_local_evaluators_write_to_the_shards_and_train_samples_them(ray_cluster):
    with rlplace.connect(config(remote_eval=False), export_path=None, timeout_s=20) as job:
        train, evals = job.launch("train", Trainer), job.launch("eval", Evaluator)
        shards = job.launch("buffer", BufferShard, capacity=100)
        router = ShardRouter.from_group(shards)
        assert [w.node_rank for w in shards.workers] == [0, 1] and [w.node_rank for w in train.workers] == [0, 1]
        assert evals.call("rollout", router) == [4, 8]  # the driver runs on node 0: both write to its shard
        assert router.stats().sizes == (8, 0)
        assert train.call("train_step", router) == [8, 0]  # each train worker samples its own node's shard
        assert router.stats().local_fraction == 1.0


def test_a_driver_local_buffer_serves_the_driver_and_refuses_to_travel_to_an_actor(ray_cluster):
    with rlplace.connect(config(remote_storage=False), export_path=None, timeout_s=20) as job:
        train = job.launch("train", Trainer)
        shards = job.launch("buffer", BufferShard, capacity=100)
        assert isinstance(shards, LocalGroup)
        router = ShardRouter.from_group(shards)
        assert router.write([1, 2, 3]) == 3 and sorted(set(router.sample(50))) == [1, 2, 3]
        stats = router.stats()
        assert (stats.written, stats.local, stats.sizes) == (3, 50, (3,))
        with pytest.raises(PlacementError, match=r"a driver-local BufferShard \(remote_<component>: false\) cannot"):
            train.call("train_step", router)


def test_status_lists_driver_local_workers_beside_the_actors(ray_cluster):
    with rlplace.connect(config(remote_eval=False), export_path=None, timeout_s=20) as job:
        train, evals = job.launch("train", Trainer), job.launch("eval", Evaluator)
        pids = train.call("pid")  # the actors are up
        me = ray.get_runtime_context().get_job_id()
        rows = {r.name: r for r in collect() if r.job == me and r.component in ("train", "eval")}
        assert sorted(rows) == ["rlplace:eval:0", "rlplace:eval:1", "rlplace:train:0", "rlplace:train:1"]
        local = [rows[f"rlplace:eval:{i}"] for i in (0, 1)]
        in_driver = ("DRIVER", os.getpid(), "node 0 (driver)", "-")
        assert [(r.state, r.pid, r.node, r.gpus) for r in local] == [in_driver] * 2
        assert evals.call("pid") == [os.getpid()] * 2
        assert [(rows[f"rlplace:train:{i}"].state, rows[f"rlplace:train:{i}"].pid) for i in (0, 1)] == [
            ("ALIVE", pids[0]),
            ("ALIVE", pids[1]),
        ]
