"""The phase engine's own rules, without a cluster: valid names, no nesting, valid roles, the hook table."""

from __future__ import annotations

import pytest

from rlplace.errors import ConfigError, RlplaceError
from rlplace.runtime import HOOKS, Phases


def test_an_unknown_phase_names_the_valid_ones() -> None:
    phases = Phases({}, enabled=True)
    valid = r"unknown phase 'warmup'; valid: rollout, evaluate, train, sync"
    with pytest.raises(ConfigError, match=valid), phases.phase("warmup"):
        pass


def test_phases_do_not_nest() -> None:
    phases = Phases({}, enabled=True)
    with (
        pytest.raises(RlplaceError, match="phase 'train' entered inside phase 'rollout'"),
        phases.phase("rollout"),
        phases.phase("train"),
    ):
        pass
    with phases.phase("train"):  # the failed nesting left no phase open
        pass


def test_roles_can_rename_components_but_not_invent_roles() -> None:
    assert Phases({}, enabled=True, roles={"eval": "rollout", "train": "actor"}).roles == {
        "train": "actor",
        "eval": "rollout",
        "env": "env",
    }
    with pytest.raises(ConfigError, match=r"roles: unknown role 'critic'; valid: train, eval, env"):
        Phases({}, enabled=True, roles={"critic": "x"})


def test_hook_table_is_the_specs() -> None:
    table = {
        phase: ([(h.role, h.method, dict(h.kwargs)) for h in pre], [(h.role, h.method, dict(h.kwargs)) for h in post])
        for phase, (pre, post) in HOOKS.items()
    }
    rollout = (
        [("eval", "reload_eval_model", {}), ("env", "reload_env_model", {})],
        [("eval", "offload_eval_model", {}), ("env", "offload_env_model", {})],
    )
    assert table == {
        "rollout": rollout,
        "evaluate": rollout,
        "train": ([("train", "reload_model_param_and_grad", {"load_grad": True, "load_optimizer": True})], []),
        "sync": (
            [("train", "offload_model_optimizer", {})],
            [("train", "offload_model_param_and_grad", {"offload_grad": True, "offload_optimizer": False})],
        ),
    }
