"""The phase engine's own rules, without a cluster: valid names, no nesting, valid roles, the hook table, the timing
of its bodies."""

from __future__ import annotations

import stat
import time

import pytest

from rlplace.errors import ConfigError, RlplaceError
from rlplace.phases import PhaseTimes, cuda_peak_gb
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


def test_each_finished_body_is_timed_hooks_and_failed_bodies_not(tmp_path) -> None:
    path = tmp_path / "phases.json"
    phases = Phases({}, enabled=True, times=PhaseTimes(str(path)))
    for _ in range(2):
        with phases.phase("rollout"):
            time.sleep(0.05)
    with pytest.raises(ValueError), phases.phase("train"):
        raise ValueError("the body failed")
    assert sorted(phases.times.seconds) == ["rollout"] and len(phases.times.seconds["rollout"]) == 2
    assert all(0.05 <= s < 1.0 for s in phases.times.seconds["rollout"])
    read = PhaseTimes.read(path)  # what `rlplace run --profile-out` reads from its command's job
    assert read is not None and read.seconds == phases.times.seconds and read.memory_gb == {}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_phase_times_a_driver_never_wrote_are_none_and_garbage_is_an_error(tmp_path) -> None:
    assert PhaseTimes.read(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text('{"seconds": {"train": ["x"]}, "memory_gb": {}}')
    with pytest.raises(RlplaceError, match="holds no phase times a job wrote"):
        PhaseTimes.read(tmp_path / "bad.json")


def test_memory_is_none_where_torch_never_used_cuda() -> None:
    assert cuda_peak_gb() is None  # this machine: no GPU (or torch not imported)
