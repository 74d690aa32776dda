"""What a plan costs: GPUs used and idle, and the bytes that cross node boundaries (and each topology level) per
iteration, stream by stream.

Model (docs/planner.md, "The estimate"). The streams, between the roles the config's components play (RLinf's
names count as RLightning's: actor = train, rollout = eval), each counted for every pair of workers on different
nodes:

- weights (per weight sync): every node hosting eval workers needs the new weights; a node that also hosts a
  train worker has them (data-parallel trainers each hold the model), every other such node pulls one copy (Ray's
  object store fetches an object once per node) from the nearest node that has them: a train node in its NVLink
  domain, else its rack, else its zone, else the node of train rank 0.
- experience (per step): `batch_bytes` per iteration in total, produced evenly by the eval workers (the env
  workers when there is no eval), goes to a buffer shard: node-local when the producer's node has a shard, else
  spread over every shard in turn (`rlplace.runtime.buffer.ShardRouter`).
- interaction (per step): env worker i steps with eval worker i * eval / env (env i with eval i when there are as
  many); the observations and actions of an iteration are about its experience, `batch_bytes` in all, evenly per
  env worker.
- sampling (per step): each train worker reads its share of `batch_bytes` from its node's shard, else from every
  shard in turn.

Workers left to Ray's scheduler (strategy default) or run in the driver have no known node, so the streams they
take part in are unknown (None); a plan without the roles has none either. Beside the bytes crossing nodes, the
estimate counts the bytes crossing each topology level the plan's nodes carry (`crossing` per weight sync,
`crossing_per_step` for the other streams) and, for weight sync, the least any placement of the same numbers of
train and receiving nodes on this inventory could move across each level (`crossing_lower_bound`).

The streams (`Estimate.flows`) are the one source of every cross-node figure: the totals are their sums, and
the table, the picture and the HTML page all read them from the same `Estimate`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from rlplace.config.ranges import format_ranks
from rlplace.inventory import Inventory
from rlplace.plan import Plan, PlanTopology, Worker

#: Component names of each role, first match wins: both dialects' names (RLightning's and RLinf's).
TRAIN_ROLES = ("train", "actor")
EVAL_ROLES = ("eval", "rollout")
ENV_ROLES = ("env",)
BUFFER_ROLES = ("buffer",)

WEIGHTS = "weights"
EXPERIENCE = "experience"
INTERACTION = "interaction"
SAMPLING = "sampling"
#: Streams of every step, as opposed to weight sync.
PER_STEP = (EXPERIENCE, INTERACTION, SAMPLING)
#: The level every stream crosses, before the topology's own.
NODE = "node"

#: Defaults of `rlplace plan --model-bytes/--batch-bytes`: a 7B model in bf16, 256 MB of experience.
DEFAULT_MODEL_BYTES = 14 * 10**9
DEFAULT_BATCH_BYTES = 256 * 10**6
#: Where the model's size came from, when nobody said it (`Estimate.model_source`).
ASSUMED = "assumed"
#: The config's key for the model's size (`Plan.model_bytes`).
MODEL_BYTES_KEY = "cluster.model_bytes"


@dataclass(frozen=True)
class Flow:
    """One stream per iteration from node `src` to each node of `dst`, `each` bytes to each: weights to a node of
    `workers` eval workers, experience or sampling spread over several shards (`dst` is then one tuple shared by
    all such flows), an interaction between `workers` env workers and the eval workers they step with."""

    kind: str  # WEIGHTS | EXPERIENCE | INTERACTION | SAMPLING
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
    experience_bytes: int | None  # eval/env -> buffer, per iteration, crossing nodes
    flows: tuple[Flow, ...] = ()
    model_bytes: int = DEFAULT_MODEL_BYTES
    batch_bytes: int = DEFAULT_BATCH_BYTES
    #: (sending, receiving) component of each stream the plan has, e.g. {"weights": ("actor", "rollout")}.
    roles: dict[str, tuple[str, str]] | None = None
    interaction_bytes: int | None = None  # env <-> eval, per iteration, crossing nodes
    sampling_bytes: int | None = None  # buffer -> train, per iteration, crossing nodes
    #: Bytes per weight sync crossing each level: `node`, then the topology's (nvlink_domain, rack, zone); None
    #: when the weight sync is unknown.
    crossing: dict[str, int] | None = None
    #: The least bytes per weight sync a placement of as many train and receiving nodes could move across each level.
    crossing_lower_bound: dict[str, int] | None = None
    #: Bytes per step (experience, interaction, sampling: those known) crossing each level.
    crossing_per_step: dict[str, int] = field(default_factory=dict)
    #: Who said the model's size: ASSUMED (nobody: the default), MODEL_BYTES_KEY, or the caller's words.
    model_source: str = ASSUMED

    @property
    def levels(self) -> tuple[str, ...]:
        """`node`, then the topology levels the plan's nodes carry, innermost first."""
        return tuple(self.crossing_per_step) or (NODE,)

    def to_dict(self) -> dict:
        return {
            "gpus_used": self.gpus_used,
            "gpus_idle": self.gpus_idle,
            "weight_sync_bytes": self.weight_sync_bytes,
            "experience_bytes": self.experience_bytes,
            "interaction_bytes": self.interaction_bytes,
            "sampling_bytes": self.sampling_bytes,
            "model_bytes": self.model_bytes,
            "model_bytes_source": self.model_source,
            "batch_bytes": self.batch_bytes,
            "crossing": self.crossing,
            "crossing_lower_bound": self.crossing_lower_bound,
            "crossing_per_step": self.crossing_per_step,
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
    topology = plan.topology
    weights = _weight_flows(by, model_bytes, roles, topology)
    experience = _experience_flows(by, batch_bytes, roles)
    interaction = _interaction_flows(by, batch_bytes, roles)
    sampling = _sampling_flows(by, batch_bytes, roles)
    step = [*(experience or ()), *(interaction or ()), *(sampling or ())]
    crossing = None if weights is None else crossing_of(weights, topology)
    return Estimate(
        used,
        idle,
        _total(weights),
        _total(experience),
        (*(weights or ()), *step),
        model_bytes,
        batch_bytes,
        roles,
        _total(interaction),
        _total(sampling),
        crossing,
        None if weights is None else _lower_bound(by, model_bytes, topology, inventory),
        crossing_of(step, topology),
        model_source,
    )


def _total(flows: list[Flow] | None) -> int | None:
    return None if flows is None else sum(f.bytes for f in flows)


def _role(by: dict[str, list[Worker]], *names: str) -> tuple[str, list[Worker]]:
    return next(((n, by[n]) for n in names if by.get(n)), ("", []))


def _nodes(ws: list[Worker]) -> list[int] | None:
    """The node of each worker, or None if any has none (left to Ray, or in the driver: the traffic is unknown)."""
    nodes = [w.node_rank for w in ws if w.node_rank is not None]
    return nodes if len(nodes) == len(ws) else None


def _weight_flows(
    by: dict[str, list[Worker]], model_bytes: int, roles: dict, topology: PlanTopology
) -> list[Flow] | None:
    (train_name, train), (eval_name, evals) = _role(by, *TRAIN_ROLES), _role(by, *EVAL_ROLES)
    if not train or not evals:
        return None
    train_nodes, eval_nodes = _nodes(train), _nodes(evals)
    if train_nodes is None or eval_nodes is None:
        return None
    roles[WEIGHTS] = (train_name, eval_name)
    first = min(zip((w.rank for w in train), train_nodes, strict=True))[1]  # the node of train's rank 0 (the lowest)
    return weight_pulls(train_nodes, first, eval_nodes, model_bytes, topology, (train_name, eval_name))


def weight_pulls(
    train_nodes: list[int],
    first: int,
    eval_nodes: list[int],
    model_bytes: int,
    topology: PlanTopology,
    names: tuple[str, str] = ("train", "eval"),
) -> list[Flow]:
    """The weight flows of train workers on `train_nodes` (rank 0 on `first`) to eval workers on `eval_nodes` (a
    node per worker): one pull per eval node without a train worker, from the nearest train node (the module's
    rule). `rlplace tune` calls it on node lists to bound placements before planning them."""
    served = set(train_nodes)
    pulls = Counter(n for n in eval_nodes if n not in served)
    source = topology.nearest(sorted(served, key=lambda n: n != first))
    return [
        Flow(WEIGHTS, source(node, first), (node,), n, model_bytes, names[0], names[1])
        for node, n in sorted(pulls.items())
    ]


def _experience_flows(by: dict[str, list[Worker]], batch_bytes: int, roles: dict) -> list[Flow] | None:
    producer_name, producers = _role(by, *EVAL_ROLES, *ENV_ROLES)
    buffer_name, shards = _role(by, *BUFFER_ROLES)
    if not producers or not shards:
        return None
    producer_nodes, shard_nodes = _nodes(producers), _nodes(shards)
    if producer_nodes is None or shard_nodes is None:
        return None
    roles[EXPERIENCE] = (producer_name, buffer_name)
    return _spread(EXPERIENCE, producer_nodes, shard_nodes, batch_bytes, producer_name, buffer_name, outward=True)


def _sampling_flows(by: dict[str, list[Worker]], batch_bytes: int, roles: dict) -> list[Flow] | None:
    (buffer_name, shards), (train_name, train) = _role(by, *BUFFER_ROLES), _role(by, *TRAIN_ROLES)
    if not shards or not train:
        return None
    train_nodes, shard_nodes = _nodes(train), _nodes(shards)
    if train_nodes is None or shard_nodes is None:
        return None
    roles[SAMPLING] = (buffer_name, train_name)
    return _spread(SAMPLING, train_nodes, shard_nodes, batch_bytes, buffer_name, train_name, outward=False)


def _spread(
    kind: str, workers: list[int], shards: list[int], total: int, source: str, target: str, *, outward: bool
) -> list[Flow]:
    """`total` bytes split evenly over the workers (on `workers` nodes): those on a node with a shard use it,
    the others spread their share over every shard in turn; `outward`: to the shards (experience), else from
    them (sampling: one flow per shard and reading node)."""
    targets = tuple(sorted(set(shards)))
    have = set(targets)
    remote = Counter(n for n in workers if n not in have)
    share = len(workers) * len(targets)
    if outward:
        return [Flow(kind, node, targets, n, total * n // share, source, target) for node, n in sorted(remote.items())]
    return [
        Flow(kind, shard, (node,), n, total * n // share, source, target)
        for node, n in sorted(remote.items())
        for shard in targets
    ]


def _interaction_flows(by: dict[str, list[Worker]], batch_bytes: int, roles: dict) -> list[Flow] | None:
    (env_name, envs), (eval_name, evals) = _role(by, *ENV_ROLES), _role(by, *EVAL_ROLES)
    if not envs or not evals:
        return None
    envs, evals = sorted(envs, key=lambda w: w.rank), sorted(evals, key=lambda w: w.rank)
    env_nodes, eval_nodes = _nodes(envs), _nodes(evals)
    if env_nodes is None or eval_nodes is None:
        return None
    roles[INTERACTION] = (env_name, eval_name)
    n_env, n_eval = len(env_nodes), len(eval_nodes)
    partner = [eval_nodes[i * n_eval // n_env] for i in range(n_env)]
    pairs = Counter((node, other) for node, other in zip(env_nodes, partner, strict=True) if node != other)
    return [
        Flow(INTERACTION, src, (dst,), n, batch_bytes * n // n_env, env_name, eval_name)
        for (src, dst), n in sorted(pairs.items())
    ]


def crossing_of(flows: list[Flow], topology: PlanTopology) -> dict[str, int]:
    """Bytes of `flows` crossing nodes, then each topology level: a flow's bytes to a node of another unit (the
    estimate's totals, and each arrow of the picture, are counted by this one function)."""
    out = {NODE: sum(f.bytes for f in flows)}
    for level in topology.levels:
        unit = topology.unit
        inside: dict[int, Counter] = {}  # id of a destination tuple -> units of its nodes
        total = 0
        for f in flows:
            here = unit(level, f.src)
            if len(f.dst) == 1:
                total += f.each if unit(level, f.dst[0]) != here else 0
                continue
            units = inside.get(id(f.dst))
            if units is None:
                units = inside[id(f.dst)] = Counter(unit(level, n) for n in f.dst)
            total += f.each * (len(f.dst) - units[here])
        out[level] = total
    return out


def _lower_bound(
    by: dict[str, list[Worker]], model_bytes: int, topology: PlanTopology, inventory: Inventory | None
) -> dict[str, int]:
    """Per level, the least weight-sync bytes a placement of the plan's train nodes (n_t) and receiving nodes
    without a train worker (n_r) could cross: receivers in a unit holding a train node cross nothing, and n_t
    train nodes cover at most the n_t largest units, each keeping one of its nodes for a train worker. So
    `model_bytes x max(0, n_r - (S - k))`, S the nodes of the k = min(n_t, units) largest units (GPU nodes when
    the inventory is known). At the node level that is the plan's own count."""
    train = {w.node_rank for w in _role(by, *TRAIN_ROLES)[1]}
    receivers = {w.node_rank for w in _role(by, *EVAL_ROLES)[1]} - train
    out = {NODE: model_bytes * len(receivers)}
    nodes = [n.rank for n in inventory.nodes if n.num_gpus] if inventory is not None else None
    for level in topology.levels:
        ranks = nodes if nodes is not None else range(len(topology.units[level]))
        sizes = sorted(Counter(topology.unit(level, r) for r in ranks).values(), reverse=True)
        k = min(len(train), len(sizes))
        covered = sum(sizes[:k]) - k
        out[level] = model_bytes * max(0, len(receivers) - covered)
    return out


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
