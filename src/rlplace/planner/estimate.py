"""What a plan costs: GPUs used and idle, and the bytes that cross node boundaries per iteration, stream by stream.

Model (docs/planner.md). Weight sync: every node hosting eval workers needs the new weights; a node that also
hosts a train worker has them (data-parallel trainers each hold the model), every other such node pulls one
copy from the node of train rank 0 (Ray's object store fetches an object once per node). Experience
(`batch_bytes` per iteration in total, produced evenly by the eval workers, or the env workers when there is no
eval) goes to a buffer shard: node-local when the producer's node has a shard, else spread over every shard in
turn (`rlplace.runtime.buffer.ShardRouter`). Workers left to Ray's scheduler (strategy default) have no known
node, so their traffic is unknown (None); a plan without the roles has none either. RLinf's names count as the
same roles: actor = train, rollout = eval.

The streams (`Estimate.flows`) are the one source of every cross-node figure: the totals are their sums, and
the table, the picture and the HTML page all read them from the same `Estimate`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from rlplace.config.ranges import format_ranks
from rlplace.inventory import Inventory
from rlplace.plan import Plan, Worker

#: Component names of each role, first match wins: both dialects' names (RLightning's and RLinf's).
TRAIN_ROLES = ("train", "actor")
EVAL_ROLES = ("eval", "rollout")
ENV_ROLES = ("env",)
BUFFER_ROLES = ("buffer",)

WEIGHTS = "weights"
EXPERIENCE = "experience"

#: Defaults of `rlplace plan --model-bytes/--batch-bytes`: a 7B model in bf16, 256 MB of experience.
DEFAULT_MODEL_BYTES = 14 * 10**9
DEFAULT_BATCH_BYTES = 256 * 10**6
#: Where the model's size came from, when nobody said it (`Estimate.model_source`).
ASSUMED = "assumed"
#: The config's key for the model's size (`Plan.model_bytes`).
MODEL_BYTES_KEY = "cluster.model_bytes"


@dataclass(frozen=True)
class Flow:
    """One stream per iteration from node `src` to each node of `dst`, `each` bytes to each: weights from train
    rank 0's node to a node of `workers` eval workers, or experience from the `workers` producers of node `src`,
    spread over every buffer shard's node (`dst` is then one tuple shared by all such flows)."""

    kind: str  # WEIGHTS | EXPERIENCE
    src: int
    dst: tuple[int, ...]
    workers: int
    each: int  # bytes to each node of `dst`
    source: str  # component names, as the config writes them
    target: str

    @property
    def bytes(self) -> int:
        return self.each * len(self.dst)

    def to_dict(self, dst: str | None = None) -> dict:
        return {
            "kind": self.kind,
            "src": self.src,
            "dst": dst if dst is not None else format_ranks(self.dst),
            "workers": self.workers,
            "bytes_each": self.each,
            "bytes": self.bytes,
            "source": self.source,
            "target": self.target,
        }


@dataclass(frozen=True)
class Estimate:
    gpus_used: int
    gpus_idle: int | None  # GPUs of the inventory (or of the plan's pools) that no worker uses
    weight_sync_bytes: int | None  # train -> eval, per iteration, crossing nodes (the sum of the weight flows)
    experience_bytes: int | None  # eval/env -> buffer, per iteration, crossing nodes (the sum of the others)
    flows: tuple[Flow, ...] = ()
    model_bytes: int = DEFAULT_MODEL_BYTES
    batch_bytes: int = DEFAULT_BATCH_BYTES
    #: (sending, receiving) component of each stream the plan has, e.g. {"weights": ("actor", "rollout")}.
    roles: dict[str, tuple[str, str]] | None = None
    #: Who said the model's size: ASSUMED (nobody: the default), MODEL_BYTES_KEY, or the caller's words.
    model_source: str = ASSUMED

    def to_dict(self) -> dict:
        return {
            "gpus_used": self.gpus_used,
            "gpus_idle": self.gpus_idle,
            "weight_sync_bytes": self.weight_sync_bytes,
            "experience_bytes": self.experience_bytes,
            "model_bytes": self.model_bytes,
            "model_bytes_source": self.model_source,
            "batch_bytes": self.batch_bytes,
            "flows": self._flow_dicts(),
        }

    def _flow_dicts(self) -> list[dict]:
        """`dst` as a range string (`"0-2047"`), written once per destination tuple: experience flows share one."""
        written: dict[int, str] = {}
        out = []
        for f in self.flows:
            key = id(f.dst)
            if key not in written:
                written[key] = format_ranks(f.dst)
            out.append(f.to_dict(written[key]))
        return out


def estimate(
    plan: Plan,
    model_bytes: int | None = None,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    inventory: Inventory | None = None,
    model_source: str = "--model-bytes",
) -> Estimate:
    """The plan's cost. The model's size: `model_bytes` where given (said by `model_source`), else the config's
    (`Plan.model_bytes`), else DEFAULT_MODEL_BYTES, which every view then calls assumed."""
    if model_bytes is None:
        model_bytes, model_source = (
            (plan.model_bytes, MODEL_BYTES_KEY) if plan.model_bytes else (DEFAULT_MODEL_BYTES, ASSUMED)
        )
    by: dict[str, list[Worker]] = {}
    for w in plan.workers:
        by.setdefault(w.component, []).append(w)
    pinned = all(w.node_rank is not None for w in plan.workers)
    if pinned:
        used = len({(w.node_rank, g) for w in plan.workers for g in w.gpus})
    else:
        used = math.ceil(sum(w.num_gpus for w in plan.workers) - 1e-9)
    if inventory is not None:
        idle: int | None = inventory.total_gpus - used
    elif plan.groups and pinned:
        idle = sum(sum(g.gpus_per_node) for g in plan.groups) - used
    else:
        idle = None
    roles: dict[str, tuple[str, str]] = {}
    weights = _weight_flows(by, model_bytes, roles)
    experience = _experience_flows(by, batch_bytes, roles)
    return Estimate(
        used,
        idle,
        None if weights is None else sum(f.bytes for f in weights),
        None if experience is None else sum(f.bytes for f in experience),
        (*(weights or ()), *(experience or ())),
        model_bytes,
        batch_bytes,
        roles,
        model_source,
    )


def _role(by: dict[str, list[Worker]], *names: str) -> tuple[str, list[Worker]]:
    return next(((n, by[n]) for n in names if by.get(n)), ("", []))


def _nodes(ws: list[Worker]) -> list[int] | None:
    """The node of each worker, or None if any has none (left to Ray, or in the driver: the traffic is unknown)."""
    nodes = [w.node_rank for w in ws]
    return None if None in nodes else nodes  # type: ignore[return-value]


def _weight_flows(by: dict[str, list[Worker]], model_bytes: int, roles: dict) -> list[Flow] | None:
    (train_name, train), (eval_name, evals) = _role(by, *TRAIN_ROLES), _role(by, *EVAL_ROLES)
    if not train or not evals:
        return None
    train_nodes, eval_nodes = _nodes(train), _nodes(evals)
    if train_nodes is None or eval_nodes is None:
        return None
    roles[WEIGHTS] = (train_name, eval_name)
    source = min((w.rank, w.node_rank) for w in train)[1]
    served = set(train_nodes)
    pulls = Counter(n for n in eval_nodes if n not in served)
    return [Flow(WEIGHTS, source, (node,), n, model_bytes, train_name, eval_name) for node, n in sorted(pulls.items())]


def _experience_flows(by: dict[str, list[Worker]], batch_bytes: int, roles: dict) -> list[Flow] | None:
    producer_name, producers = _role(by, *EVAL_ROLES, *ENV_ROLES)
    buffer_name, shards = _role(by, *BUFFER_ROLES)
    if not producers or not shards:
        return None
    producer_nodes, shard_nodes = _nodes(producers), _nodes(shards)
    if producer_nodes is None or shard_nodes is None:
        return None
    roles[EXPERIENCE] = (producer_name, buffer_name)
    targets = tuple(sorted(set(shard_nodes)))
    have = set(targets)
    remote = Counter(n for n in producer_nodes if n not in have)
    share = len(producer_nodes) * len(targets)
    return [
        Flow(EXPERIENCE, node, targets, n, batch_bytes * n // share, producer_name, buffer_name)
        for node, n in sorted(remote.items())
    ]


def format_bytes(n: float | None, none: str = "unknown") -> str:
    """`14 GB`, `256 MB`, `2.31 MB`, `0 B` (powers of 1000, two decimals at most): how every view prints a byte
    count."""
    if n is None:
        return none
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{round(n, 2):g} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
