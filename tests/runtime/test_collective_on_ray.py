"""torch.distributed in placed workers on the session's simulated cluster (Gloo on CPU): a missing peer named within
its timeout, and collective weight sync, bit-exact against the object store. A group of four formed in one call, its
exact all-reduce and a restarted rank rejoining are test_resize_on_ray.py's (the same job resizes the group after).
The GPU test (NCCL) runs only where CUDA is."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import pytest
import ray
from ray import cloudpickle

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import rlplace  # noqa: E402
from rlplace.errors import PlacementError, RendezvousError  # noqa: E402
from rlplace.runtime import init_component_group, sync_weights  # noqa: E402

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(sys.modules[__name__])

# learner: 2 workers on node 0, 2 on node 1; eval: both GPUs of node 2; critic: node 3 (CPU only).
JOB = """
cluster:
  num_nodes: 4
  component_placement:
    learner: {node_group: a800, placement: "0-1,4-5"}
    eval: {node_group: "4090", placement: 0-1}
    critic: {node_group: node, placement: "3"}
  node_groups:
    - {label: a800, node_ranks: 0-1}
    - {label: "4090", node_ranks: 2}
"""

SHAPES = [((64, 33), torch.float32), ((1000,), torch.float64), ((7, 3, 5), torch.bfloat16), ((12,), torch.int64)]


def _weights(seed: int) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for shape, dtype in SHAPES:
        if dtype == torch.int64:
            out.append(torch.randint(-(2**40), 2**40, shape, generator=g))
        else:
            out.append(torch.randn(shape, generator=g, dtype=torch.float64).to(dtype))
    return out


class Member:
    """A worker of any component: joins its component group on request, holds weight tensors."""

    def __init__(self, seed: int = 0, zeros: bool = False) -> None:
        self.weights = [torch.zeros_like(w) for w in _weights(seed)] if zeros else _weights(seed)
        self.updates = 0

    def join(self, timeout_s: float = 60.0) -> tuple[str, int, int, float]:
        g = init_component_group(rendezvous_timeout_s=timeout_s)
        return g.backend, g.rank, g.world_size, g.seconds

    def all_reduce(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t)
        return t.item()

    def pid(self) -> int:
        return os.getpid()

    # weight sync, both transports
    def weight_tensors(self) -> list[Any]:
        return self.weights

    def weights_updated(self) -> None:
        self.updates += 1

    def get_weights(self) -> list[Any]:
        return [w.view(torch.int16).numpy() if w.dtype == torch.bfloat16 else w.numpy() for w in self.weights]

    def set_weights(self, arrays: list[Any]) -> None:
        for w, a in zip(self.weights, arrays, strict=True):
            src = torch.from_numpy(a)
            w.copy_(src.view(torch.bfloat16) if w.dtype == torch.bfloat16 else src)

    def digest(self) -> tuple[list[bytes], int]:
        return [w.view(torch.uint8).numpy().tobytes() for w in self.weights], self.updates


@pytest.mark.slow
def test_a_worker_that_never_arrives_is_named_within_the_timeout(ray_cluster):
    """13-16 s: two rendezvous that time out on purpose (3 s and 2 s) and torch imported in 5 workers."""
    with rlplace.connect(JOB, export_path=None, name="coll-b") as job:
        learner = job.launch("learner", Member)
        node = job.plan.by_component("learner")[3].node_rank
        address = ray_cluster.inventory.node(node).address
        learner.call("pid")  # started (torch imported): what is timed below is the rendezvous alone
        start = time.monotonic()
        refs = [a.join.remote(3.0) for a in learner.actors[:3]]  # rank 3 never calls init_component_group()
        errors = []
        for ref in refs:  # every rank that arrived says who did not
            with pytest.raises(RendezvousError) as caught:
                ray.get(ref, timeout=30)
            errors.append(str(caught.value))
        elapsed = time.monotonic() - start
        for message in errors:
            assert f"component 'learner': rank 3 on node {node} ({address}) did not arrive within 3 s" in message
            assert "ranks 0-2 of 4 did" in message
        assert elapsed < 3 + 3, elapsed  # the timeout, rank 0's 1 s of grace, and call overhead

        # Rank 0 missing: the others say that rank 0 never listened, naming its address and port.
        env = learner.call("__ray_call__", lambda _self: (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]), rank=1)
        critic = job.launch("critic", Member)  # world size 1: arrives alone at once
        assert critic.call("join", rank=0)[:3] == ("gloo", 0, 1)
        with pytest.raises(RendezvousError, match=rf"rank 1: rank 0 did not arrive at {env[0]}:{env[1]} within 2 s"):
            learner.call("join", 2.0, rank=1, timeout_s=30)


class Full(Member):
    """A target holding every learner rank's tensors, in rank order."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = [torch.zeros_like(w) for _ in range(4) for w in _weights(0)]


@pytest.mark.slow
def test_collective_sync_is_bit_exact_against_the_object_store_and_every_rank_can_send_its_shard(ray_cluster):
    """6-11 s: seven workers import torch (one job checks it all). Also: after a target restarted, the sync rebuilds
    its groups; a target whose tensors do not match, before or after the groups were built, is named."""
    with rlplace.connect(JOB, export_path=None, name="coll-d") as job:
        learner = job.launch("learner", Member, seed=7)
        # Ranks 1-3 differ from rank 0 (the source unless told otherwise), so a target says whose tensors it holds.
        learner.call("__ray_call__", lambda self: [w.add_(rlplace.worker_placement().rank) for w in self.weights[:2]])
        evals = job.launch("eval", Member, zeros=True, max_restarts=1, max_task_retries=-1)
        critic = job.launch("critic", Full)

        report = sync_weights(learner, [evals], transport="collective", bucket_mb=0.1)  # several buckets
        assert (report.transport, report.backend, report.targets) == ("collective", "gloo", 2)
        assert report.bytes == sum(w.numel() * w.element_size() for w in _weights(7)) and report.gb_per_s > 0
        want, _ = learner.call("digest", rank=0)
        assert evals.call("digest") == [(want, 1), (want, 1)]  # weights_updated() ran once each
        evals.call("__ray_call__", lambda self: [w.zero_() for w in self.weights])
        by_store = sync_weights(learner, [evals], transport="object_store")
        assert by_store.transport == "object_store" and by_store.bytes > 0
        assert [d for d, _ in evals.call("digest")] == [want, want]

        # "auto" takes the collective path (torch here, weight_tensors() on both classes), reusing the group.
        learner.call("__ray_call__", lambda self: [w.add_(1) for w in self.weights if w.dtype != torch.bfloat16])
        assert sync_weights(learner, [evals]).transport == "collective"
        want, _ = learner.call("digest", rank=0)
        assert [d for d, _ in evals.call("digest")] == [want, want]

        # A target restarted (its weights zeros again, its group membership gone): the groups are built anew.
        os.kill(evals.call("pid", rank=1), signal.SIGKILL)
        report = sync_weights(learner, [evals], transport="collective", timeout_s=30)
        assert report.transport == "collective" and [d for d, _ in evals.call("digest")] == [want, want]

        # A target whose tensors changed after the groups were built: nobody broadcasts, the error names it.
        evals.call("__ray_call__", lambda self: self.weights.__setitem__(0, torch.zeros(3)), rank=1)
        with pytest.raises(PlacementError, match=r"rlplace:eval:1's weight tensors \(4 tensors"):
            sync_weights(learner, [evals], transport="collective")

        # Every train rank sends its shard to a target holding all four; from rank 0 alone, its tensors do not match.
        with pytest.raises(PlacementError, match=r"rlplace:critic:0's weight tensors \(16 tensors"):
            sync_weights(learner, [critic], transport="collective")
        report = sync_weights(learner, [critic], source="all", transport="collective")
        assert report.sources == (0, 1, 2, 3)
        assert report.bytes == 4 * sum(w.numel() * w.element_size() for w in _weights(7))
        shards = [d for d, _ in learner.call("digest")]
        assert len(set(map(tuple, shards))) == 4 and critic.call("digest", rank=0)[0] == [b for x in shards for b in x]


# learner and eval on both A800 nodes, one of each per node; critic on node 3, where no learner is.
BESIDE = """
cluster:
  num_nodes: 4
  component_placement:
    learner: {node_group: a800, placement: "0,4"}
    eval: {node_group: a800, placement: "1,5"}
    critic: {node_group: node, placement: "3"}
  node_groups:
    - {label: a800, node_ranks: 0-1}
"""


@pytest.mark.slow
@pytest.mark.long
def test_nearest_sends_each_eval_worker_the_weights_of_the_learner_on_its_node(ray_cluster):
    """8-12 s under load: five workers import torch (one learner and one eval worker a node: which of a node's
    learners is read is test_sync_routes.py's). Learner rank 1 (node 1) is made to differ from rank 0 (node 0), so
    what each target holds afterwards says where it read from; the critic's node has no learner: it reads rank 0,
    beside node 0's eval worker. `make test-long` only: who reads from whom is test_sync_routes.py's and, through the
    port, test_sync_on_sim.py's; both transports on Ray, several sources at once included, the test above's."""
    with rlplace.connect(BESIDE, export_path=None, name="coll-n") as job:
        learner = job.launch("learner", Member, seed=3)
        learner.call("__ray_call__", lambda self: [w.add_(1) for w in self.weights if w.is_floating_point()], rank=1)
        node0, node1 = (learner.call("digest", rank=r)[0] for r in (0, 1))
        assert node0 != node1
        evals = job.launch("eval", Member, zeros=True)
        critic = job.launch("critic", Member, zeros=True)
        for transport in ("collective", "object_store"):
            for targets in (evals, critic):
                targets.call("__ray_call__", lambda self: [w.zero_() for w in self.weights])
            report = sync_weights(
                learner, [evals, critic], source="nearest", topology=job.plan.topology, transport=transport
            )
            assert (report.transport, report.sources, report.targets) == (transport, (0, 1), 3)
            assert [d for d, _ in evals.call("digest")] == [node0, node1]
            assert critic.call("digest", rank=0)[0] == node0
        assert report.objects == 2  # the object store's: one object per learner read


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_nccl_group_and_sync_on_gpus(ray_cluster):  # pragma: no cover - needs two real GPUs on the node
    class GpuMember(Member):
        def __init__(self, zeros: bool = False) -> None:
            super().__init__(zeros=zeros)
            self.weights = [w.cuda() for w in self.weights]

        def digest(self) -> tuple[list[bytes], int]:
            return [w.cpu().view(torch.uint8).numpy().tobytes() for w in self.weights], self.updates

    with rlplace.connect(JOB, export_path=None, name="coll-gpu") as job:
        learner = job.launch("learner", GpuMember)
        assert {b for b, *_ in learner.call("join")} == {"nccl"}
        evals = job.launch("eval", GpuMember, zeros=True)
        assert sync_weights(learner, [evals], transport="collective").backend == "nccl"
        want, _ = learner.call("digest", rank=0)
        assert [d for d, _ in evals.call("digest")] == [want, want]
