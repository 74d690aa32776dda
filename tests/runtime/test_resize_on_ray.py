"""torch.distributed across a restart and a resize on the session cluster (Gloo on CPU): a group of four on two
nodes all-reduces the exact sum, a restarted rank rejoins it, the group is re-formed at its new size in
`on_resized`, with an exact all-reduce there, and weight sync is bit-exact after a resize through both transports
(the collective's groups rebuilt for the new members). One job checks them all: each worker imports torch, seconds
of CPU apiece."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest
from ray import cloudpickle

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import rlplace  # noqa: E402
from rlplace.runtime import destroy_component_group, init_component_group, sync_weights  # noqa: E402

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(sys.modules[__name__])

# learner: 2 workers on node 0, 2 on node 1, may shrink to 1; eval: GPU 0 of node 2, may grow to both.
JOB = """
cluster:
  num_nodes: 4
  component_placement:
    learner: {node_group: a800, placement: "0-1,4-5"}
    eval: {node_group: "4090", placement: "0"}
  node_groups:
    - {label: a800, node_ranks: 0-1}
    - {label: "4090", node_ranks: 2}
  elastic: {learner: {min: 1}, eval: {max: 2}}
"""


class Member:
    """Joins its component's group; re-forms it when the component changes size; holds weight tensors."""

    def __init__(self, zeros: bool = False) -> None:
        g = torch.Generator().manual_seed(11)
        self.weights = [torch.randn((64, 33), generator=g), torch.randn((1000,), generator=g, dtype=torch.float64)]
        if zeros:
            self.weights = [torch.zeros_like(w) for w in self.weights]

    def join(self) -> tuple[str, int, int, int]:
        group = init_component_group(rendezvous_timeout_s=60)
        return group.backend, group.rank, group.world_size, group.master_port

    def rejoin(self) -> None:
        destroy_component_group()
        init_component_group(rendezvous_timeout_s=60)

    def pid(self) -> int:
        return os.getpid()

    def on_resized(self, event: Any) -> None:
        if dist.is_initialized():  # this worker was in the group: re-form it at the new size, with every rank
            init_component_group(rendezvous_timeout_s=60)

    def all_reduce(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t)
        return t.item()

    def weight_tensors(self) -> list[Any]:
        return self.weights

    def get_weights(self) -> list[Any]:
        return [w.numpy() for w in self.weights]

    def set_weights(self, arrays: list[Any]) -> None:
        for w, a in zip(self.weights, arrays, strict=True):
            w.copy_(torch.from_numpy(a))

    def zero(self) -> None:
        for w in self.weights:
            w.zero_()

    def digest(self) -> list[bytes]:
        return [w.view(torch.uint8).numpy().tobytes() for w in self.weights]


@pytest.mark.slow
def test_a_group_of_4_survives_a_restart_re_forms_at_2_ranks_all_reduces_exactly_and_sync_stays_bit_exact(ray_cluster):
    """About 12-16 s: seven worker processes import torch (one a restart), a group of 4 forms, takes a restarted
    rank back and re-forms at 2, two syncs of each kind."""
    with rlplace.connect(JOB, export_path=None, name="resize-coll") as job:
        learner = job.launch("learner", Member, max_restarts=1, max_task_retries=-1)
        joined = learner.call("join")
        assert [(b, r, w) for b, r, w, _ in joined] == [("gloo", r, 4) for r in range(4)]
        refs = [a.all_reduce.remote(v) for a, v in zip(learner.actors, [1.5, 2.25, 1e12, -3.0], strict=True)]
        assert learner.get(refs) == [1.5 + 2.25 + 1e12 - 3.0] * 4

        pid = learner.call("pid", rank=2)
        os.kill(pid, signal.SIGKILL)  # the process dies at once; the next calls wait for its restart
        assert learner.call("pid", rank=2) != pid
        learner.call("rejoin")  # every rank destroys and re-initialises; the restarted one has the same env
        refs = [a.all_reduce.remote(float(r + 1)) for r, a in enumerate(learner.actors)]
        assert learner.get(refs) == [10.0] * 4

        job.resize("learner", 2)  # the workers of node 1 go; on_resized re-forms the group of the other two
        rejoined = learner.call("join")  # the group on_resized formed: init_component_group() returns it
        assert [(b, r, w) for b, r, w, _ in rejoined] == [("gloo", 0, 2), ("gloo", 1, 2)]
        assert rejoined[0][3] != joined[0][3], "the new group meets on a fresh master port"
        refs = [a.all_reduce.remote(v) for a, v in zip(learner.actors, [1e12, 0.125], strict=True)]
        assert learner.get(refs) == [1e12 + 0.125] * 2

        evals = job.launch("eval", Member, zeros=True)
        want = learner.call("digest", rank=0)
        assert sync_weights(learner, [evals], transport="collective").targets == 1
        job.resize("eval", 2)  # a new eval worker (zeros) on GPU 1 of node 2
        report = sync_weights(learner, [evals], transport="collective")
        assert (report.transport, report.targets) == ("collective", 2)  # the groups were built again for both
        assert evals.call("digest") == [want, want]
        evals.call("zero")
        assert sync_weights(learner, [evals], transport="object_store").targets == 2
        assert evals.call("digest") == [want, want]
