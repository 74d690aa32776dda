"""The runtime on the session's simulated multi-node cluster: hook order in a colocated job, node-local
buffer sampling, one-object weight sync, worker restarts in place, and a clear stop without restarts."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import pytest
from ray import cloudpickle
from tests.ray_helpers import Footprint, assert_gone, footprint, wait_until_dead

import rlplace
from rlplace.errors import NodeLostError, PlacementError
from rlplace.runtime import HOOKS, BufferShard, ShardRouter, sync_weights

pytestmark = pytest.mark.ray

# Ray workers cannot import this test module by name: ship its worker classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

COLOCATED = {
    "cluster": {
        "train_worker_num": 2,
        "eval_worker_num": 2,
        "is_colocated": True,
        "placement": {"mode": "auto", "strategy": "colocate"},
    }
}
# Train on two nodes (so two buffer shards), rollout on a third.
POOLS = {
    "cluster": {
        "train_worker_num": 2,
        "eval_worker_num": 2,
        "buffer_worker_num": "auto",
        "placement": {"mode": "manual"},
    },
    "resource_pool": [
        {"name": "train_pool", "num_node": 2, "num_gpus": 4, "train": "0, 4"},
        {"name": "rollout_pool", "num_node": 1, "num_gpus": 2, "eval": "0-1"},
    ],
}


class Recorder:
    """Logs every hook it receives, in order, with its arguments."""

    def __init__(self) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []

    def hooks(self) -> list[tuple[str, dict[str, Any]]]:
        return self.log

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> tuple[int, int | None, tuple[int, ...], bool]:
        p = rlplace.worker_placement()
        return p.rank, p.node_rank, p.gpus, p.restarted


class Trainer(Recorder):
    def reload_model_param_and_grad(self, load_grad: bool, load_optimizer: bool) -> None:
        self.log.append(("reload_model_param_and_grad", {"load_grad": load_grad, "load_optimizer": load_optimizer}))

    def offload_model_optimizer(self) -> None:
        self.log.append(("offload_model_optimizer", {}))

    def offload_model_param_and_grad(self, offload_grad: bool, offload_optimizer: bool) -> None:
        self.log.append(
            ("offload_model_param_and_grad", {"offload_grad": offload_grad, "offload_optimizer": offload_optimizer})
        )

    def get_weights(self) -> dict[str, Any]:
        self.log.append(("get_weights", {}))
        return {"version": len(self.log), "rank": rlplace.worker_placement().rank, "w": list(range(1000))}

    def crash_once(self, marker: str) -> str:
        """Kill this very process in the middle of the call, the first time only (the marker survives)."""
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return "done"

    def train_step(self, router: ShardRouter | None = None) -> int:
        return len(router.sample(8)) if router else 0


class Evaluator(Recorder):
    def reload_eval_model(self) -> None:
        self.log.append(("reload_eval_model", {}))

    def offload_eval_model(self) -> None:
        self.log.append(("offload_eval_model", {}))

    def set_weights(self, weights: dict[str, Any]) -> int:
        self.log.append(("set_weights", {"version": weights["version"]}))
        return weights["version"]

    def set_shards(self, *shards: dict[str, Any]) -> None:
        self.log.append(("set_shards", {"ranks": [s["rank"] for s in shards]}))

    def rollout(self, router: ShardRouter | None = None) -> int:
        return router.write([("obs", i) for i in range(4)]) if router else 0


class Env(Recorder):
    """Defines the env reload but not the env offload: the engine must skip what is missing."""

    def reload_env_model(self) -> None:
        self.log.append(("reload_env_model", {}))


def _cycle(job: Any, train: Any, evals: Any, router: ShardRouter | None = None) -> None:
    with job.phase("rollout"):
        evals.call("rollout", router)
    with job.phase("train"):
        train.call("train_step", router)
    with job.phase("sync"):
        sync_weights(train, [evals])


def _expected_events(cycles: int) -> list[tuple[str, str, str, str]]:
    """The spec's table (`HOOKS`) unrolled over rollout/train/sync cycles."""
    one = []
    for phase in ("rollout", "train", "sync"):
        pre, post = HOOKS[phase]
        one += [(phase, "pre", h.role, h.method) for h in pre] + [(phase, "post", h.role, h.method) for h in post]
    return one * cycles


def test_colocated_job_calls_the_spec_hooks_in_order(ray_cluster: Any) -> None:
    with rlplace.connect(COLOCATED, export_path=None) as job:
        assert job.plan.settings.enable_offload
        train = job.launch("train", Trainer)
        evals = job.launch("eval", Evaluator)
        env = job.launch("env", Env)
        for _ in range(2):
            _cycle(job, train, evals)

        assert [(e.phase, e.stage, e.component, e.method) for e in job.phases.events] == _expected_events(2)
        env_offloads = [e for e in job.phases.events if e.method == "offload_env_model"]
        assert env_offloads and all(e.ranks == () and e.skipped == (0, 1) for e in env_offloads)

        one_train = [
            ("reload_model_param_and_grad", {"load_grad": True, "load_optimizer": True}),
            ("offload_model_optimizer", {}),
            ("get_weights", {}),
            ("offload_model_param_and_grad", {"offload_grad": True, "offload_optimizer": False}),
        ]
        assert train.call("hooks", rank=0) == one_train * 2
        assert train.call("hooks", rank=1) == [h for h in one_train if h[0] != "get_weights"] * 2
        eval_hooks = evals.call("hooks", rank=1)
        assert [h[0] for h in eval_hooks] == ["reload_eval_model", "offload_eval_model", "set_weights"] * 2
        assert [h[1]["version"] for h in eval_hooks if h[0] == "set_weights"] == [3, 7]  # rank 0's object
        assert env.call("hooks") == [[("reload_env_model", {})] * 2] * 2

        # A failing phase body skips the post-hooks: the error surfaces as it is, not buried by more calls.
        with pytest.raises(ZeroDivisionError), job.phase("rollout"):
            len(evals.call("rollout")) / 0
        assert [e.stage for e in job.phases.events[len(_expected_events(2)) :]] == ["pre", "pre"]


def test_offload_disabled_calls_no_hook(ray_cluster: Any) -> None:
    with rlplace.connect(POOLS, export_path=None) as job:
        assert not job.plan.settings.enable_offload
        train = job.launch("train", Trainer)
        evals = job.launch("eval", Evaluator)
        _cycle(job, train, evals)
        assert job.phases.events == []
        assert train.call("hooks", rank=1) == []
        assert [h[0] for h in evals.call("hooks", rank=0)] == ["set_weights"]

        report = sync_weights(train, [evals], source="all", set_method="set_shards")
        assert (report.sources, report.objects, report.targets) == ((0, 1), 2, 2)
        assert [log[-1] for log in evals.call("hooks")] == [("set_shards", {"ranks": [0, 1]})] * 2


@pytest.mark.slow
def test_buffer_shards_under_pools_serve_every_train_sample_locally(ray_cluster: Any) -> None:
    with rlplace.connect(POOLS, export_path=None) as job:
        shards = job.plan.by_component("buffer")
        train_nodes = sorted({w.node_rank for w in job.plan.by_component("train")})
        assert sorted(w.node_rank for w in shards) == train_nodes == [0, 1]
        train = job.launch("train", Trainer)
        evals = job.launch("eval", Evaluator)
        router = ShardRouter.from_group(job.launch("buffer", BufferShard, capacity=64))
        for _ in range(3):
            _cycle(job, train, evals, router)

        stats = router.stats()
        assert stats.written == 3 * 2 * 4  # every rollout item reached a shard
        assert all(size > 0 for size in stats.sizes)  # writes from the shard-less rollout node were spread
        assert stats.local == 3 * 2 * 8 and stats.remote == 0
        assert stats.local_fraction == 1.0
        # A reader on a node without a shard (the rollout node) is counted remote: the count can fail.
        assert len(evals.call("__ray_call__", lambda _self, r: r.sample(5), router, rank=0)) == 5
        assert router.stats().remote == 5


@pytest.mark.slow
def test_killed_worker_restarts_in_its_own_bundle_and_the_job_finishes(ray_cluster: Any, tmp_path: Any) -> None:
    with rlplace.connect(COLOCATED, export_path=None) as job:
        train = job.launch("train", Trainer, max_restarts=2, max_task_retries=-1)
        evals = job.launch("eval", Evaluator)
        _cycle(job, train, evals)
        before = train.call("where", rank=1)
        assert before[3] is False

        os.kill(train.call("pid", rank=1), signal.SIGKILL)
        for _ in range(2):
            _cycle(job, train, evals)  # the job carries on; calls wait for the restarted worker

        rank, node, gpus, restarted = train.call("where", rank=1)
        assert (rank, node, gpus) == before[:3] and restarted is True
        assert train.call("where", rank=0)[3] is False
        # The restarted process starts clean and received every hook of the two cycles after the kill.
        hooks = ["reload_model_param_and_grad", "offload_model_optimizer", "offload_model_param_and_grad"]
        assert [h[0] for h in train.call("hooks", rank=1)] == hooks * 2

        # Killed in the middle of a call: the call is retried on the restarted worker and returns.
        assert train.call("crash_once", str(tmp_path / "crashed"), rank=1) == "done"
        assert train.call("where", rank=1) == (rank, node, gpus, True)


def test_without_restarts_a_killed_worker_stops_the_job_with_its_name(ray_cluster: Any) -> None:
    job = rlplace.connect(COLOCATED, export_path=None)
    taken = Footprint((), ())
    try:
        train = job.launch("train", Trainer)
        evals = job.launch("eval", Evaluator)
        taken = footprint(job)
        _cycle(job, train, evals)
        node = job.plan.by_component("train")[1].node_rank
        os.kill(train.call("pid", rank=1), signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(PlacementError, match=rf"worker rlplace:train:1 on node {node} died"):
            _cycle(job, train, evals)
        assert time.monotonic() - start < 10
    finally:
        job.shutdown()
    assert taken.groups and taken.actors
    assert_gone(taken)


@pytest.mark.slow
def test_a_lost_node_stops_the_job_naming_the_worker_and_its_node(ray_cluster: Any) -> None:
    """A fifth node joins the shared cluster for this test only, runs one train worker, and dies."""
    from rlplace.ray.labels import NODE_RANK_LABEL

    cluster = ray_cluster.cluster
    extra = cluster.add_node(num_cpus=2, num_gpus=1, labels={NODE_RANK_LABEL: "4"}, object_store_memory=100 << 20)
    cluster.wait_for_nodes()
    on_extra = {
        "cluster": {"train_worker_num": 1, "placement": {"mode": "manual"}},
        "resource_pool": [{"name": "lonely", "node_ids": [4], "num_gpus": [1], "train": "0"}],
    }
    job = rlplace.connect(on_extra, export_path=None, replace_within_s=0)  # no spare: fail once the loss is known
    taken = Footprint((), ())
    try:
        train = job.launch("train", Trainer)
        taken = footprint(job)
        with job.phase("train"):
            train.call("train_step")
        cluster.remove_node(extra, allow_graceful=False)
        start = time.monotonic()
        wait_until_dead([extra.node_id], timeout_s=15)  # health checks notice in ~2 s
        with (
            pytest.raises(NodeLostError, match=r"node 4 .*was lost and its workers \(rlplace:train:0\)"),
            job.phase("train"),
        ):
            train.call("train_step")
        assert time.monotonic() - start < 15
    finally:
        job.shutdown()
    assert taken.groups and taken.actors
    assert_gone(taken)
