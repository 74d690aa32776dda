"""verl's resource pools and the roles on them, as verl's trainers build them from the config.

Read from verl's code at 1dda039 (docs/migrating.md, "Coming from verl"):

- `verl.trainer.main_ppo` (`ppo_trainer.yaml`, `ppo_megatron_trainer.yaml`): `global_pool` of `trainer.nnodes` x
  `trainer.n_gpus_per_node` GPUs (`PPOTrainer._init_resource_pool_mgr`, and `main_ppo_v0` alike), holding one
  process per GPU with the hybrid engine (`actor_rollout_ref`, or `actor_rollout` without a reference policy or
  with LoRA, whose reference is the actor itself) and, when the critic is needed, `critic` on the same GPUs; the
  rollout engines are the hybrid workers taken `tensor x data x pipeline` consecutive ranks at a time
  (`RolloutReplica.init_hybrid`). `reward.reward_model.enable_resource_pool` adds `reward_pool`
  (`reward_model.nnodes` x `n_gpus_per_node`), else the reward model shares `global_pool`; either way its
  engines (`rm`) are the pool split into replicas (`RewardModelManager`, `split_resource_pool`).
  `distillation.enabled` adds `teacher_pool` (`teacher`). `trainer.v1.trainer_mode: separate_async` adds
  standalone rollout pools (below) after the hybrid ones.
- the separated trainers, `verl.experimental.one_step_off_policy.main_ppo` and
  `verl.experimental.fully_async_policy.fully_async_main` (`create_resource_pool_manager`): `trainer_pool` of
  `trainer.nnodes` x `trainer.n_gpus_per_node` for `actor` (`actor_rollout` when the trainer also serves rollout:
  `async_training.use_trainer_do_validate` or `use_dynamic_resource_scheduling`), `critic` and `ref` when needed;
  and one pool per standalone rollout replica, `rollout_pool_<i>` (`RolloutReplica.init_standalone`), of
  `min(rollout.n_gpus_per_node, W)` GPUs on `W / that` nodes, W the engine's tensor x data x pipeline size, as many
  replicas as `rollout.nnodes` x `rollout.n_gpus_per_node` holds whole (the rest stays idle). The fully async
  rollouter adds the reward model's standalone pools (`rollout_pool_reward_<i>`) and `teacher_pool`.

Pools are listed in the order verl creates their placement groups (the planner binds them in that order). Where
verl refuses a config before or while its pools are made, the refusal is a problem naming verl's key and reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlplace.config.training import parallel_groups
from rlplace.config.verl.read import Reader

MAIN_PPO = "verl.trainer.main_ppo"
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"
FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"
#: Rollout engines verl's `RolloutReplica` launches (`rollout.name`); pipeline parallelism is refused for these.
_NO_PIPELINE = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class Pool:
    """One verl resource pool: `nnodes` placement groups of `gpus_per_node` one-GPU bundles (STRICT_PACK)."""

    name: str
    nnodes: int
    gpus_per_node: int
    #: The config section whose `nnodes` / `n_gpus_per_node` size it, for messages (`trainer`, `rollout`, ...).
    keys: str
    #: Why its size is what it is, where that is not just the two keys (a rollout replica's engine size).
    origin: str = ""

    @property
    def size(self) -> int:
        return self.nnodes * self.gpus_per_node


@dataclass(frozen=True)
class Role:
    """Processes of one verl role: one per GPU of `gpus` (flat indices across `pools`, None: all of them)."""

    name: str
    pools: tuple[str, ...]
    gpus: tuple[int, ...] | None = None
    path: str = ""
    #: Groups of consecutive ranks that talk every step: (kind, size, the keys it was read from).
    groups: tuple[tuple[str, int, str], ...] = ()


@dataclass
class Layout:
    entry: str
    pools: list[Pool] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)
    #: Pools verl makes and counts in its GPU total, but on which it places nothing (no placement group).
    unused: list[Pool] = field(default_factory=list)
    #: Things verl does that the user should know (GPUs left idle): (the key they follow from, the text).
    notes: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Engine:
    """An inference engine's parallel sizes (`RolloutConfig`) and the key it was read under."""

    section: str
    tp: int
    dp: int
    pp: int
    world: int  # GPUs of one replica

    def origin(self) -> str:
        sizes = f"tensor_model_parallel_size: {self.tp}, data_parallel_size: {self.dp}"
        return f"{self.section}.{sizes}" + (f", pipeline_model_parallel_size: {self.pp}" if self.pp > 1 else "")

    def groups(self, what: str) -> tuple[tuple[str, int, str], ...]:
        """The engine's tensor-parallel groups, and its tensor x data-parallel engine when data-parallel."""
        out = []
        if self.tp > 1:
            out.append((f"{what} tensor-parallel", self.tp, f"{self.section}.tensor_model_parallel_size: {self.tp}"))
        if self.dp > 1:
            out.append((f"{what} engine (tensor x data parallel)", self.tp * self.dp, self.origin()))
        return tuple(out)


def entry_of(r: Reader) -> str:
    """The entry point whose config this is: the fully async trainer's has `async_training`, the one-step-off
    trainer's a top-level `rollout` (its standalone rollout's nodes), verl's main trainer neither."""
    if r.present("async_training"):
        return FULLY_ASYNC
    if r.present("rollout.nnodes"):
        return ONE_STEP_OFF
    return MAIN_PPO


def layout(r: Reader) -> Layout | None:
    """The pools and roles verl makes for this config; None when something it needs is invalid (reported)."""
    entry = entry_of(r)
    out = Layout(entry)
    trainer = _pool(r, "trainer_pool" if entry != MAIN_PPO else "global_pool", "trainer", separated=entry != MAIN_PPO)
    if trainer is None:
        return None
    out.pools.append(trainer)
    if entry != FULLY_ASYNC and not _megatron_divides(r, trainer):  # validate_config: not the fully async main
        return None
    ok = _main(r, out, trainer) if entry == MAIN_PPO else _separated(r, out, trainer)
    return out if ok else None


def _megatron_divides(r: Reader, pool: Pool) -> bool:
    """verl's `validate_config` (main_ppo and the one-step-off trainer call it first): without dynamic batch size, a
    Megatron actor's tensor x pipeline x context parallel size must divide `trainer.nnodes x n_gpus_per_node`."""
    if r.text("actor_rollout_ref.actor.strategy") != "megatron" or r.flag(
        "actor_rollout_ref.actor.use_dynamic_bsz", False
    ):
        return True
    base = "actor_rollout_ref.actor.megatron"
    tp = r.integer(f"{base}.tensor_model_parallel_size", 1, minimum=1)
    pp = r.integer(f"{base}.pipeline_model_parallel_size", 1, minimum=1)
    cp = r.integer(f"{base}.context_parallel_size", 1, minimum=1)
    if tp is None or pp is None or cp is None:
        return False
    if pool.size % (tp * pp * cp):
        r.refuse(
            f"{base}.tensor_model_parallel_size",
            f"n_gpus ({pool.size}) must be divisible by model_parallel_size ({tp * pp}) times context_parallel_size "
            f"({cp}) (verl's validate_config: trainer.nnodes x trainer.n_gpus_per_node over the actor's Megatron "
            f"tensor {tp} x pipeline {pp} x context {cp} parallel size, without actor.use_dynamic_bsz)",
            tp,
        )
        return False
    return True


# --- verl.trainer.main_ppo ----------------------------------------------------------------------------------------


def _main(r: Reader, out: Layout, pool: Pool) -> bool:
    hybrid = _hybrid_role(r)
    critic = _need_critic(r)
    engine = _engine(r, "actor_rollout_ref.rollout")
    if hybrid is None or critic is None or engine is None:
        return False
    groups = (*engine.groups("rollout"), *_actor_groups(r))
    out.roles.append(Role(hybrid, (pool.name,), None, "actor_rollout_ref", groups))
    replicas = pool.size // engine.world
    if replicas * engine.world < pool.size:
        out.notes.append(
            (
                "actor_rollout_ref.rollout.tensor_model_parallel_size",
                f"global_pool: {pool.size - replicas * engine.world} of its {pool.size} GPUs serve no rollout "
                f"engine ({replicas} engine(s) of {engine.world} GPUs: {engine.origin()}); their {hybrid} processes "
                "only train",
            )
        )
    if replicas == 0:
        r.refuse(
            "actor_rollout_ref.rollout.tensor_model_parallel_size",
            f"a rollout engine needs {engine.world} GPUs ({engine.origin()}) but global_pool has {pool.size} "
            f"(trainer.nnodes x trainer.n_gpus_per_node): verl launches no rollout server and cannot generate",
            engine.tp,
        )
        return False
    if critic:
        out.roles.append(Role("critic", (pool.name,), None, "critic"))
    if not _reward(r, out, pool, standalone=False) or not _teacher(r, out):
        return False
    mode = r.text("trainer.v1.trainer_mode", "sync") if r.flag("trainer.use_v1", True) else "sync"
    if mode == "separate_async":
        return _separate_async(r, out, engine, replicas)
    return True


def _separate_async(r: Reader, out: Layout, engine: Engine, hybrid_replicas: int) -> bool:
    """`PPOTrainerSeparateAsync`: standalone replicas from `actor_rollout_ref.rollout.nnodes` x `n_gpus_per_node`,
    numbered after the hybrid ones."""
    section = "actor_rollout_ref.rollout"
    nnodes = r.integer(f"{section}.nnodes", 0)
    gpus = r.integer(f"{section}.n_gpus_per_node", 8)
    if nnodes is None or gpus is None:
        return False
    if nnodes <= 0 or gpus <= 0:
        key = f"{section}.nnodes" if nnodes <= 0 else f"{section}.n_gpus_per_node"
        r.refuse(key, f"{key.rsplit('.', 1)[1]} must be > 0 in separate async training (verl asserts it)", 0)
        return False
    if r.flag("reward.reward_model.enable", False) and not r.flag("reward.reward_model.enable_resource_pool", False):
        r.refuse(
            "reward.reward_model.enable_resource_pool",
            "Colocate reward model (reward.reward_model.enable_resource_pool=False) is not supported in separate "
            "async mode, because the standalone rollout never pauses to free GPU memory (verl); set it to true",
            False,
        )
        return False
    return _standalone(r, out, "rollout", section, engine, nnodes, gpus, start=hybrid_replicas)


# --- the separated trainers ----------------------------------------------------------------------------------------


def _separated(r: Reader, out: Layout, pool: Pool) -> bool:
    """`create_role_worker_mapping` and `create_resource_pool_manager`, then the rollouter's pools."""
    fully_async = out.entry == FULLY_ASYNC
    serves_rollout = fully_async and (
        r.flag("async_training.use_trainer_do_validate", False)
        or r.flag("async_training.use_dynamic_resource_scheduling", False)
    )
    critic = _need_critic(r)
    ref = _need_reference(r)
    engine = _engine(r, "actor_rollout_ref.rollout")
    if critic is None or ref is None or engine is None:
        return False
    if r.flag("actor_rollout_ref.hybrid_engine", True):
        r.refuse(
            "actor_rollout_ref.hybrid_engine",
            "the separated trainers run rollout on GPUs of its own: verl asserts actor_rollout_ref.hybrid_engine "
            "is false (set actor_rollout_ref.hybrid_engine=False)",
            True,
        )
        return False
    name = "actor_rollout" if serves_rollout else "actor"
    actor_groups = (*engine.groups("rollout"), *_actor_groups(r)) if serves_rollout else _actor_groups(r)
    out.roles.append(Role(name, (pool.name,), None, "actor_rollout_ref.actor", actor_groups))
    if critic:
        out.roles.append(Role("critic", (pool.name,), None, "critic"))
    if ref:
        out.roles.append(Role("ref", (pool.name,), None, "actor_rollout_ref.ref"))
    rm = r.flag("reward.reward_model.enable", False)
    if rm is None:
        return False
    if rm and not fully_async:
        r.refuse(
            "reward.reward_model.enable",
            "the one-step-off trainer maps no resource pool to the reward model (verl fails with KeyError "
            "RewardModel when it creates the reward model's workers); use rule-based reward",
            True,
        )
        return False
    if rm and not _reward(r, out, pool, standalone=True):
        return False
    if fully_async and not _teacher(r, out):
        return False
    nnodes = r.integer("rollout.nnodes", 1)
    gpus = r.integer("rollout.n_gpus_per_node", 8)
    if nnodes is None or gpus is None:
        return False
    if nnodes <= 0 and not serves_rollout:
        r.refuse(
            "rollout.nnodes",
            "must be > 0: the rollout runs on nodes of its own (nnodes must be > 0 in standalone mode, verl)",
            nnodes,
        )
        return False
    if gpus <= 0:
        r.refuse("rollout.n_gpus_per_node", "config.rollout.n_gpus_per_node must be greater than 0 (verl)", gpus)
        return False
    hybrid = pool.size // engine.world if serves_rollout else 0
    if nnodes <= 0:
        return True
    return _standalone(r, out, "rollout", "rollout", engine, nnodes, gpus, start=hybrid)


def _standalone(
    r: Reader, out: Layout, role: str, keys: str, engine: Engine, nnodes: int, gpus: int, start: int, prefix: str = ""
) -> bool:
    """One pool per replica (`RolloutReplica.init_standalone`), replicas numbered from `start`."""
    per_node = min(gpus, engine.world)
    if engine.world % per_node:
        r.refuse(
            f"{keys}.n_gpus_per_node",
            f"world_size {engine.world} must be divisible by gpus_per_node {per_node} (verl's RolloutReplica: an "
            f"engine of {engine.origin()} on nodes of {gpus} GPUs)",
            gpus,
        )
        return False
    total = nnodes * gpus
    replicas = total // engine.world
    if replicas == 0:
        r.refuse(
            f"{keys}.nnodes",
            f"{keys}.nnodes x {keys}.n_gpus_per_node is {total} GPU(s), fewer than one engine's {engine.world} "
            f"({engine.origin()}): no replica can be launched",
            nnodes,
        )
        return False
    if replicas * engine.world < total:
        out.notes.append(
            (
                f"{keys}.nnodes",
                f"{keys}: {total - replicas * engine.world} of its {total} GPUs ({keys}.nnodes x "
                f"{keys}.n_gpus_per_node) stay idle: verl launches {replicas} engine(s) of {engine.world} GPUs "
                f"({engine.origin()}) and reserves nothing for the rest",
            )
        )
    names = tuple(f"rollout_pool_{prefix}{start + i}" for i in range(replicas))
    origin = f"one engine: {engine.origin()}, on nodes of {keys}.n_gpus_per_node: {gpus}"
    out.pools.extend(Pool(n, engine.world // per_node, per_node, keys, origin) for n in names)
    out.roles.append(Role(role, names, None, f"{keys}", engine.groups(role)))
    return True


# --- reward model and teacher --------------------------------------------------------------------------------------


def _reward(r: Reader, out: Layout, trainer: Pool, standalone: bool) -> bool:
    """The reward model's pool (`reward_pool`, or the trainer's) and its engines, as `RewardModelManager` splits
    it; the fully async rollouter launches them standalone instead."""
    section = "reward.reward_model"
    enable = r.flag(f"{section}.enable", False)
    own = r.flag(f"{section}.enable_resource_pool", False)
    if enable is None or own is None:
        return False
    engine = _engine(r, f"{section}.rollout") if enable else None
    if enable and engine is None:
        return False
    if standalone:
        nnodes, gpus = r.integer(f"{section}.nnodes", 0), r.integer(f"{section}.n_gpus_per_node", 8)
        if nnodes is None or gpus is None or engine is None:
            return False
        return _standalone(r, out, "rm", section, engine, nnodes, gpus, start=0, prefix="reward_")
    pool = trainer
    if own:
        reward_pool = _pool(r, "reward_pool", section, separated=False)
        if reward_pool is None:
            return False
        if not enable:
            out.unused.append(reward_pool)
            return True
        out.pools.append(reward_pool)
        pool = reward_pool
    if not enable or engine is None:
        return True
    if pool.size % engine.world:
        r.refuse(
            f"{section}.rollout.tensor_model_parallel_size",
            f"split_size must be a divisor of world_size (verl splits {pool.name}'s {pool.size} GPUs into reward "
            f"model engines of {engine.world}: {engine.origin()})",
            engine.tp,
        )
        return False
    out.roles.append(Role("rm", (pool.name,), None, section, engine.groups("rm")))
    return True


def _teacher(r: Reader, out: Layout) -> bool:
    """`distillation.enabled`: `teacher_pool`, every GPU of it a teacher engine's (verl checks the sum)."""
    enabled = r.flag("distillation.enabled", False)
    if not enabled:
        return enabled is not None
    pool = _pool(r, "teacher_pool", "distillation", separated=False)
    if pool is None:
        return False
    teachers = r.raw("distillation.teacher_models", {})
    names = list(teachers) if isinstance(teachers, dict) else []
    groups: tuple[tuple[str, int, str], ...] = ()
    if names == ["teacher_model"] or not names:
        engine = _engine(r, "distillation.teacher_models.teacher_model.inference")
        if engine is None:
            return False
        if pool.size % engine.world:
            r.refuse(
                "distillation.teacher_models.teacher_model.inference.tensor_model_parallel_size",
                f"Single teacher's per_replica_world_size ({engine.world}) must divide the distillation resource "
                f"pool size (distillation.n_gpus_per_node x distillation.nnodes = {pool.size}) (verl)",
                engine.tp,
            )
            return False
        groups = engine.groups("teacher")
    else:
        total = 0
        for name in (n for n in names if n != "teacher_model"):
            engine = _engine(r, f"distillation.teacher_models.{name}.inference")
            replicas = r.integer(f"distillation.teacher_models.{name}.num_replicas", 0)
            if engine is None or replicas is None:
                return False
            total += replicas * engine.world
        if total != pool.size:
            r.refuse(
                "distillation.teacher_models",
                f"Sum of teacher (num_replicas * per_replica_world_size) ({total}) must match the distillation "
                f"resource pool size (distillation.n_gpus_per_node x distillation.nnodes = {pool.size}) (verl)",
            )
            return False
    out.pools.append(pool)
    out.roles.append(Role("teacher", (pool.name,), None, "distillation", groups))
    return True


# --- shared readings -----------------------------------------------------------------------------------------------


def _pool(r: Reader, name: str, keys: str, separated: bool) -> Pool | None:
    """`[keys.n_gpus_per_node] * keys.nnodes`, refused as verl refuses sizes of 0 or less."""
    nnodes = r.integer(f"{keys}.nnodes", 1, minimum=-(2**31))
    gpus = r.integer(f"{keys}.n_gpus_per_node", 8, minimum=-(2**31))
    if nnodes is None or gpus is None:
        return None
    for key, value in ((f"{keys}.n_gpus_per_node", gpus), (f"{keys}.nnodes", nnodes)):
        if value <= 0:
            why = (
                f"config.{key} must be greater than 0 (verl)"
                if separated or keys != "trainer"
                else f"must be at least 1: {name} of {nnodes} x {gpus} GPUs would hold no worker"
            )
            r.refuse(key, why, value)
            return None
    return Pool(name, nnodes, gpus, keys)


def _engine(r: Reader, section: str) -> Engine | None:
    """An engine's sizes (`RolloutConfig`), refused where verl's `RolloutConfig.__post_init__` refuses them."""
    tp = r.integer(f"{section}.tensor_model_parallel_size", 2, minimum=1)
    dp = r.integer(f"{section}.data_parallel_size", 1, minimum=1)
    pp = r.integer(f"{section}.pipeline_model_parallel_size", 1, minimum=1)
    ep = r.integer(f"{section}.expert_parallel_size", 1, minimum=1)
    if tp is None or dp is None or pp is None or ep is None:
        return None
    name = r.text(f"{section}.name")
    if name != "trtllm" and ep > 1 and ep != tp * dp:
        r.refuse(
            f"{section}.expert_parallel_size",
            "expert_parallel_size must be equal to tensor_model_parallel_size * data_parallel_size (verl: "
            f"{tp} x {dp})",
            ep,
        )
        return None
    if pp > 1 and name in _NO_PIPELINE:
        r.refuse(
            f"{section}.pipeline_model_parallel_size",
            f"Current rollout {name} not implemented pipeline_model_parallel_size > 1 yet (verl)",
            pp,
        )
        return None
    world = tp * dp * pp
    if r.flag(f"{section}.disaggregation.enabled", False):
        prefill = r.integer(f"{section}.disaggregation.prefill_replicas", 1, minimum=1)
        decode = r.integer(f"{section}.disaggregation.decode_replicas", 1, minimum=1)
        raw = r.raw(f"{section}.disaggregation.decode_tensor_model_parallel_size")
        decode_tp = (
            tp if raw is None else r.integer(f"{section}.disaggregation.decode_tensor_model_parallel_size", 1, 1)
        )
        if prefill is None or decode is None or decode_tp is None:
            return None
        world = (tp * prefill + decode_tp * decode) * dp * pp
    return Engine(section, tp, dp, pp, world)


def _hybrid_role(r: Reader) -> str | None:
    """`actor_rollout_ref` when verl needs a reference policy it does not take from the actor (LoRA), else
    `actor_rollout` (`_init_resource_pool_mgr`)."""
    ref = _need_reference(r)
    lora = r.integer("actor_rollout_ref.model.lora.rank", 0, minimum=-(2**31))
    if lora is not None and lora <= 0:
        lora = r.integer("actor_rollout_ref.model.lora_rank", 0, minimum=-(2**31))
    if ref is None or lora is None:
        return None
    ref_in_actor = lora > 0 or r.raw("actor_rollout_ref.model.lora_adapter_path") is not None
    return "actor_rollout_ref" if ref and not ref_in_actor else "actor_rollout"


def _need_reference(r: Reader) -> bool | None:
    kl_reward = r.flag("algorithm.use_kl_in_reward", False)
    kl_loss = r.flag("actor_rollout_ref.actor.use_kl_loss", False)
    return None if kl_reward is None or kl_loss is None else kl_reward or kl_loss


def _need_critic(r: Reader) -> bool | None:
    """`critic.enable` when written, else whether `algorithm.adv_estimator` is `gae` (verl's `need_critic`)."""
    if r.raw("critic.enable") is not None:
        return r.flag("critic.enable", False)
    return r.text("algorithm.adv_estimator", "gae") == "gae"


def _actor_groups(r: Reader) -> tuple[tuple[str, int, str], ...]:
    """The actor's groups of consecutive ranks: Megatron's tensor x context and expert-parallel groups (rank order
    tp-cp-ep-dp-pp), or FSDP's Ulysses sequence-parallel groups."""
    if r.text("actor_rollout_ref.actor.strategy") == "megatron":
        base = "actor_rollout_ref.actor.megatron"
        tp = r.integer(f"{base}.tensor_model_parallel_size", 1, minimum=1)
        cp = r.integer(f"{base}.context_parallel_size", 1, minimum=1)
        ep = r.integer(f"{base}.expert_model_parallel_size", 1, minimum=1)
        raw = r.raw(f"{base}.expert_tensor_parallel_size")
        etp = tp if raw is None else r.integer(f"{base}.expert_tensor_parallel_size", 1, minimum=1)
        if tp is None or cp is None or ep is None or etp is None:
            return ()
        return parallel_groups(f"{base}.", tp, cp, ep, etp, kind="actor ")
    for path in (
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size",
    ):
        sp = r.integer(path, 1, minimum=1)
        if sp is not None and sp > 1:
            return (("actor Ulysses sequence-parallel", sp, f"{path}: {sp}"),)
    return ()
