"""RLinf's `profile_data` and the keys its auto-placement tool reads with it, read from a whole RLinf config the
way that tool reads them (toolkits/auto_placement/util.py and auto_placement_worker.py at RLinf a3816b5):

- `runner.task_type: reasoning`: `profile_data.actor_cost`, `rollout_cost` and, with
  `algorithm.recompute_logprobs: true`, `inference_cost`: seconds of one iteration, each measured collocated on
  the component's GPUs as written; `data.rollout_batch_size` (group batches an iteration streams through
  disaggregated stages), `algorithm.group_size`, `algorithm.n_minibatches` (which data-parallel sizes the trainer
  takes), `rollout.max_running_requests` (how many requests an engine holds at once); the model-parallel sizes
  `actor.model.{tensor,context,pipeline}_model_parallel_size`, `rollout.{tensor,pipeline}_parallel_size` and
  inference's (its own `inference.model` section, else the actor's), as RLinf's placement reads them.
- `runner.task_type: embodied`: `profile_data.actor_cost`, `env_profile_data` and `rollout_profile_data` ({envs
  per instance: seconds}), `data.env_num`; env and rollout take one GPU a process.

Every value is checked with the key, its value and what is valid (RLinf's tool asserts or raises instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from rlplace.config.fields import INVALID, Flag, Integer, Kind, checked
from rlplace.config.problems import Path, show
from rlplace.config.profile_file import Positive
from rlplace.config.values import Values
from rlplace.model import JobSpec

REASONING, EMBODIED = "reasoning", "embodied"
_SECONDS = Positive("seconds, a number > 0")
N = TypeVar("N")


@dataclass(frozen=True)
class RlinfProfile:
    """What RLinf's tool reads, checked. `costs`: component -> seconds per iteration on its written GPUs;
    `embodied`: component (env, rollout) -> {envs per instance: seconds}; `units`: GPUs per model-parallel group of
    each component; `origins`: the key each number came from, for the views."""

    task: str
    costs: dict[str, float]
    batches: int  # group batches per iteration: rollout_batch_size (reasoning), env_num (embodied)
    group_size: int = 1
    minibatches: int = 1
    max_running_requests: int = 0
    recompute_logprobs: bool = False
    env_num: int = 0
    embodied: dict[str, dict[int, float]] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WholeConfig:
    """What `rlplace tune` reads from a config besides its cluster section: RLinf's profile (None when the config
    has no `profile_data`), and the composed document, into which the tuned cluster section is written."""

    rlinf: RlinfProfile | None
    document: object


def read_whole(spec: JobSpec, values: Values) -> WholeConfig:
    """The `load_with` reader of `rlplace tune` and `rlplace plan --time`."""
    return WholeConfig(read_rlinf_profile(spec, values), values.data)


def read_rlinf_profile(spec: JobSpec, values: Values) -> RlinfProfile | None:
    """RLinf's profile of a whole RLinf config, or None without `profile_data`; problems go to `values.rep`."""
    if spec.dialect != "node_groups" or not values.present(("profile_data",)):
        return None
    rep = values.rep
    task = values.at(("runner", "task_type"))
    if task not in (REASONING, EMBODIED):
        rep.add(
            ("runner", "task_type"),
            f"profile_data is read for runner.task_type reasoning or embodied, as RLinf's auto-placement tool reads "
            f"it; got {show(task)}",
            task,
        )
        return None
    reader = _Reader(values)
    if task == REASONING:
        return _reasoning(reader)
    return _embodied(reader)


class _Reader:
    """Checked reads of one document, each recording where its number came from."""

    def __init__(self, values: Values):
        self.values = values
        self.origins: dict[str, str] = {}
        self.sizes: dict[Path, int] = {}
        self.bad = False

    def number(self, path: Path, kind: Kind[N], *, default: N | None = None, need: str = "") -> N | None:
        """The value at `path`, checked by `kind`; `default` when not written (None: it is needed, a problem). A
        problem sets `bad` and gives None."""
        raw = self.values.at(path)
        if raw is None:
            if default is None:
                self.values.rep.add(
                    path, f"RLinf's auto-placement tool reads {'.'.join(map(str, path))}{need}; write it"
                )
                self.bad = True
            return default
        value = checked(kind, raw, path, self.values.rep)
        self.bad |= value is INVALID
        self.origins[".".join(map(str, path))] = f"{'.'.join(map(str, path))}: {raw}"
        return None if value is INVALID else value

    def size(self, *path: str) -> int:
        """A model-parallel size; 1 when not written, and 1 in the place of one written wrong (its problem is
        reported and `bad` set: no profile is made of sizes read so). Each is read once: inference reads the
        actor's when it has no section of its own."""
        if path not in self.sizes:
            size = self.number(path, Integer(1), default=1)
            self.sizes[path] = 1 if size is None else size
        return self.sizes[path]

    def table(self, path: Path) -> dict[int, float]:
        """{envs per instance: seconds}."""
        raw = self.values.at(path)
        rep = self.values.rep
        if not isinstance(raw, Mapping) or not raw:
            rep.add(path, f"must be {{envs per instance: seconds}} with at least one entry, got {show(raw)}", raw)
            self.bad = True
            return {}
        out: dict[int, float] = {}
        for key, seconds in raw.items():
            count = int(key) if isinstance(key, str) and key.strip().isdigit() else key
            where = (*path, str(key))
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                rep.add(where, f"an env count must be an integer >= 1, got {show(key)}", key)
                self.bad = True
                continue
            value = checked(_SECONDS, seconds, where, rep)
            if value is INVALID:
                self.bad = True
                continue
            out[count] = value
        self.origins[".".join(map(str, path))] = f"{'.'.join(map(str, path))}: {raw}"
        return out


def _read(value: N | None) -> N:
    """A value `_Reader.number` gave while no problem was found (`bad` false): written, or its default."""
    assert value is not None, "read after a problem"
    return value


def _reasoning(r: _Reader) -> RlinfProfile | None:
    recompute = r.values.at(("algorithm", "recompute_logprobs"), False)
    recompute = checked(Flag(), recompute, ("algorithm", "recompute_logprobs"), r.values.rep)
    names = ["actor", "rollout", *(["inference"] if recompute is True else [])]
    costs = {n: r.number(("profile_data", f"{n}_cost"), _SECONDS) for n in names}
    group = r.number(("algorithm", "group_size"), Integer(1))
    minibatches = r.number(("algorithm", "n_minibatches"), Integer(1))
    batch = r.number(("data", "rollout_batch_size"), Integer(1))
    requests = r.number(("rollout", "max_running_requests"), Integer(1))
    actor = r.size("actor", "model", "tensor_model_parallel_size") * r.size("actor", "model", "context_parallel_size")
    actor *= r.size("actor", "model", "pipeline_model_parallel_size")
    rollout = r.size("rollout", "tensor_parallel_size") * r.size("rollout", "pipeline_parallel_size")
    own = "inference" if r.values.present(("inference",)) else "actor"
    inference = r.size(own, "model", "tensor_model_parallel_size") * r.size(
        own, "model", "pipeline_model_parallel_size"
    )
    if r.bad:
        return None
    batch, group, minibatches, requests = _read(batch), _read(group), _read(minibatches), _read(requests)
    if (batch * group) % minibatches:
        r.values.rep.add(
            ("algorithm", "n_minibatches"),
            f"data.rollout_batch_size x algorithm.group_size = {batch * group} must divide by "
            f"algorithm.n_minibatches {minibatches} (RLinf's tool asserts it)",
            minibatches,
        )
        return None
    return RlinfProfile(
        task=REASONING,
        costs={n: _read(c) for n, c in costs.items()},
        batches=batch,
        group_size=group,
        minibatches=minibatches,
        max_running_requests=requests,
        recompute_logprobs=recompute is True,
        units={"actor": actor, "rollout": rollout, "inference": inference},
        origins=r.origins,
    )


def _embodied(r: _Reader) -> RlinfProfile | None:
    costs = {"actor": r.number(("profile_data", "actor_cost"), _SECONDS)}
    env_num = r.number(("data", "env_num"), Integer(1))
    tables = {
        "env": r.table(("profile_data", "env_profile_data")),
        "rollout": r.table(("profile_data", "rollout_profile_data")),
    }
    if r.bad:
        return None
    env_num = _read(env_num)
    return RlinfProfile(
        task=EMBODIED,
        costs={n: _read(c) for n, c in costs.items()},
        batches=env_num,
        env_num=env_num,
        embodied=tables,
        units={"actor": 1, "rollout": 1, "env": 1},
        origins=r.origins,
    )
