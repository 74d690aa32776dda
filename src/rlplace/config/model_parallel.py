"""The checks RLinf's model-parallel placement makes before any worker starts, for the configs whose entry point
uses it, decided by `runner.task_type` as RLinf's entry scripts do (rlinf/config.py validate_cfg,
examples/reasoning/main_grpo.py, examples/agent/*/): `reasoning` and `coding_online_rl` run
ModelParallelComponentPlacement, `reasoning_eval` its eval kind (rlinf/utils/placement.py).

Train: actor, rollout and reward placed; actor, rollout, inference, critic and critic_inference each on one
contiguous range; collocated (actor's GPUs are rollout's) without inference, or disaggregated (pairwise
disjoint), with inference's tensor-parallel size fitting its GPUs and `algorithm.recompute_logprobs: true`;
the actor's tensor-parallel size fitting its GPUs; coding disaggregated. Eval: rollout and reward placed,
rollout contiguous. (Rollout's own tensor-parallel sizes are checked where its process shape is read:
`training.py`.) Every problem names the key, its value and what RLinf accepts.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlplace.config.fields import INVALID, Integer, checked
from rlplace.config.problems import Path, Reporter
from rlplace.config.ranges import format_ranks
from rlplace.config.values import Values
from rlplace.model import ComponentSpec, JobSpec

TRAIN_TASKS = ("reasoning", "coding_online_rl")
EVAL_TASKS = ("reasoning_eval",)
_CONTIGUOUS = ("actor", "rollout", "inference", "actor_inference", "critic", "critic_inference")


def task_type(values: Values) -> str | None:
    task = values.at(("runner", "task_type"))
    return task if isinstance(task, str) else None


def check(spec: JobSpec, values: Values, rep: Reporter) -> None:
    """Report what RLinf's model-parallel placement would refuse for this config's `runner.task_type`."""
    task = task_type(values)
    if task not in (*TRAIN_TASKS, *EVAL_TASKS):
        return
    keys = _placement_keys(values)
    needed = ("actor", "rollout", "reward") if task in TRAIN_TASKS else ("rollout", "reward")
    missing = [n for n in needed if spec.component(n) is None]
    for name in missing:
        rep.add(
            ("cluster", "component_placement"),
            f"runner.task_type: {task} runs RLinf's model-parallel placement, which needs {name} placed; add "
            f"{name} to cluster.component_placement (RLinf refuses: {name.capitalize()} GPUs must be specified)",
        )
    ranks = {c.name: _ranks(c) for c in spec.components}
    for name in _CONTIGUOUS if task in TRAIN_TASKS else ("rollout",):
        r = ranks.get(name)
        if r and r != tuple(range(r[0], r[-1] + 1)):
            rep.add(
                keys.get(name, ("cluster", "component_placement")),
                f"{name} is placed on {format_ranks(r)}; RLinf's model-parallel placement (runner.task_type: {task}) "
                f"needs one contiguous range, like {r[0]}-{r[0] + len(r) - 1}",
                format_ranks(r),
            )
    if missing or task not in TRAIN_TASKS:
        return
    _train(spec, values, rep, task, ranks, keys)


def _train(
    spec: JobSpec,
    values: Values,
    rep: Reporter,
    task: str,
    ranks: dict[str, tuple[int, ...] | None],
    keys: dict[str, Path],
) -> None:
    actor, rollout = ranks["actor"], ranks["rollout"]
    inference = "inference" if "inference" in ranks else "actor_inference" if "actor_inference" in ranks else None
    actor_tp = size(values, ("actor", "model", "tensor_model_parallel_size"), rep)
    if actor_tp is not None and actor is not None and actor_tp > len(actor):
        rep.add(
            ("actor", "model", "tensor_model_parallel_size"),
            f"actor.model.tensor_model_parallel_size {actor_tp} is larger than actor's {len(actor)} GPU(s) "
            f"({format_ranks(actor)}); RLinf needs it <= the actor's GPUs",
            actor_tp,
        )
    if values.at(("cluster", "auto_scheduler")) is True and spec.component("critic") is None:
        return  # RLinf's AUTO mode: its order checks are training.py's
    engines = sorted(n for n in ranks if n.startswith("rollout_"))
    if engines:
        _multi_agent(ranks, engines, rep, keys)
        return
    if actor == rollout:
        for name in (inference, "critic_inference"):
            if name is not None and name in ranks:
                rep.add(
                    keys.get(name, ("cluster", "component_placement")),
                    f"{name} is placed, but actor and rollout share their GPUs (collocated), where RLinf's "
                    f"model-parallel placement takes no {name}: remove it, or give actor and rollout disjoint GPUs",
                )
        if task == "coding_online_rl":
            rep.add(
                ("runner", "task_type"),
                "runner.task_type: coding_online_rl must place actor and rollout on disjoint GPUs (RLinf: online "
                "coding must use the disaggregated placement mode); actor and rollout share theirs",
                task,
            )
        return
    overlap = _overlapping(ranks)
    if overlap:
        a, b = overlap
        rep.add(
            ("cluster", "component_placement"),
            f"{a} ({_show(ranks[a])}) and {b} ({_show(ranks[b])}) share some GPUs: RLinf's model-parallel placement "
            "(runner.task_type: " + task + ") takes either actor and rollout on the same GPUs (collocated) or every "
            "component on GPUs of its own (disaggregated)",
        )
        return
    if inference is not None:
        _inference(values, rep, inference, ranks[inference], actor_tp)


def _multi_agent(
    ranks: dict[str, tuple[int, ...] | None], engines: list[str], rep: Reporter, keys: dict[str, Path]
) -> None:
    """Several rollout engines (`rollout_judge` beside `rollout`): RLinf's multi-agent placement
    (examples/agent/wideseek_r1): actor and reward on the same GPUs, every rollout engine inside the actor's."""
    actor = ranks["actor"]
    if ranks["reward"] != actor:
        rep.add(
            keys.get("reward", ("cluster", "component_placement")),
            f"reward ({_show(ranks['reward'])}) must be on actor's GPUs ({_show(actor)}) when several rollout engines "
            f"are placed ({', '.join(['rollout', *engines])}): RLinf's multi-agent placement requires it",
        )
    for name in ("rollout", *engines):
        r = ranks[name]
        if actor is not None and (r is None or not set(r) <= set(actor)):
            rep.add(
                keys.get(name, ("cluster", "component_placement")),
                f"{name} ({_show(r)}) must be inside actor's GPUs ({_show(actor)}) when several rollout engines are "
                "placed: RLinf's multi-agent placement requires it",
            )


def _inference(values: Values, rep: Reporter, name: str, gpus: tuple[int, ...] | None, actor_tp: int | None) -> None:
    section = name if values.present((name,)) else None
    tp_path: tuple[str, str, str] = (section or "actor", "model", "tensor_model_parallel_size")
    tp = size(values, tp_path, rep) if section else actor_tp
    if tp is not None and gpus is not None and tp > len(gpus):
        rep.add(
            tp_path,
            f"{'.'.join(tp_path)} {tp} is {name}'s tensor-parallel size, larger than its {len(gpus)} GPU(s) "
            f"({format_ranks(gpus)}); RLinf needs it <= {name}'s GPUs",
            tp,
        )
    if values.at(("algorithm", "recompute_logprobs")) is not True:
        rep.add(
            ("algorithm", "recompute_logprobs"),
            f"{name} is placed ({_show(gpus)}), but RLinf runs it only with algorithm.recompute_logprobs: true (false "
            f"disables inference); set it to true, or remove {name} from cluster.component_placement",
            values.at(("algorithm", "recompute_logprobs")),
        )


def _overlapping(ranks: dict[str, tuple[int, ...] | None]) -> tuple[str, str] | None:
    """The first pair RLinf's disaggregated mode needs disjoint and that is not (`all` overlaps everything)."""
    pairs = [
        ("actor", "rollout"),
        ("actor", "inference"),
        ("rollout", "inference"),
        ("critic", "actor"),
        ("critic", "rollout"),
        ("critic", "critic_inference"),
        ("rollout", "critic_inference"),
    ]
    for a, b in pairs:
        if a in ranks and b in ranks:
            x, y = ranks[a], ranks[b]
            if x is None or y is None or set(x) & set(y):
                return a, b
    return None


def _ranks(c: ComponentSpec) -> tuple[int, ...] | None:
    """Resource ranks in written order, or None for `all`."""
    out: list[int] = []
    for seg in c.placement.segments if c.placement else ():
        if seg.resources is None:
            return None
        out.extend(seg.resources)
    return tuple(out)


def _show(r: tuple[int, ...] | None) -> str:
    return "all GPUs" if r is None else f"GPUs {format_ranks(r)}"


def size(values: Values, path: Path, rep: Reporter) -> int | None:
    """A parallel size (default 1 when not written); None when it is not an integer >= 1 (reported)."""
    raw = values.at(path)
    if raw is None:
        return 1
    size = checked(Integer(1), raw, path, rep)
    return None if size is INVALID else size


def _placement_keys(values: Values) -> dict[str, Path]:
    """Component -> the key path of the component_placement entry that places it."""
    raw = values.shape(("cluster", "component_placement"))
    out: dict[str, Path] = {}
    if isinstance(raw, Mapping):
        for key in raw:
            for name in str(key).split(","):
                out.setdefault(name.strip(), ("cluster", "component_placement", str(key)))
    return out
