"""`hydra.searchpath` and what placement does not read never blocking it.

RLinf's configs find their groups through `file://${oc.env:EMBODIED_PATH}/config/`, a variable its launch
scripts set and a user running `rlplace validate` has not. Configs only such an entry could supply are left
out with one warning naming the variable; a value placement reads that one of them could have supplied is
an error naming the variable. The same holds with overrides, where hydra-core composes.
"""

from __future__ import annotations

import pathlib

import pytest
from tests.config.test_defaults_grammar import CORPUS, ROOT, hydra_core, ours, write_tree

from rlplace.cli import main
from rlplace.config import load
from rlplace.errors import ConfigError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan

E2E = CORPUS / "rlinf" / "e2e"
EMBODIED = CORPUS / "rlinf" / "embodiment" / "config" / "maniskill_ppo_openvla.yaml"


@pytest.fixture(autouse=True)
def no_corpus_variables(monkeypatch):
    """As a user who has set none of the variables the corpus's search paths name."""
    for name in ("CORPUS_EMBODIED_PATH", "CORPUS_REPO_PATH", "CORPUS_CKPT_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_an_unset_variable_whose_groups_are_found_beside_the_file_changes_nothing(monkeypatch):
    """RLinf's examples/embodiment/config: the search path names the primary's own folder."""
    spec = load(EMBODIED)
    assert not spec.warnings
    monkeypatch.setenv("CORPUS_EMBODIED_PATH", str(EMBODIED.parent.parent))
    assert ours(EMBODIED)[0] == hydra_core(EMBODIED)


@pytest.mark.parametrize("overrides", [[], ["cluster.num_nodes=1"]], ids=["rlplace composes", "hydra-core composes"])
def test_groups_only_a_skipped_search_path_has_are_left_out_with_one_warning(overrides, monkeypatch):
    primary = E2E / "embodied" / "ppo_openvla_e2e.yaml"
    if overrides:
        pytest.importorskip("hydra")
    spec = load(primary, overrides=overrides)
    (warning,) = spec.warnings
    assert "hydra.searchpath[0]: the search path 'file://${oc.env:CORPUS_REPO_PATH}/" in warning
    assert "is skipped (CORPUS_REPO_PATH is not set)" in warning
    assert "env/pick_cube@env.train, env/pick_cube_ood@env.eval, model/openvla@actor.model" in warning
    assert "(set CORPUS_REPO_PATH to compose them)" in warning
    assert [c.name for c in spec.components] == ["actor", "env", "rollout"]  # the primary's own cluster:
    monkeypatch.setenv("CORPUS_REPO_PATH", str(ROOT))
    assert not load(primary, overrides=overrides).warnings


@pytest.mark.parametrize("overrides", [[], ["cluster.num_nodes=1"]], ids=["rlplace composes", "hydra-core composes"])
def test_a_value_placement_reads_from_a_gap_is_an_error_naming_the_variable(overrides, monkeypatch):
    """The actor's tensor-parallel size decides rollout's GPUs, and only the left-out model group sets it."""
    primary = E2E / "reasoning" / "grpo_model_group.yaml"
    if overrides:
        pytest.importorskip("hydra")
    with pytest.raises(ConfigError) as e:
        load(primary, overrides=overrides)
    (problem,) = e.value.problems
    assert problem.path == "actor.model.tensor_model_parallel_size"
    assert "'model/qwen_tp4@actor.model' may supply it" in problem.message
    assert "CORPUS_REPO_PATH is not set" in problem.message and "set CORPUS_REPO_PATH" in problem.message
    monkeypatch.setenv("CORPUS_REPO_PATH", str(ROOT))
    rollout = load(primary, overrides=overrides).component("rollout")
    assert rollout.process_shape is not None and rollout.process_shape.stride == 2  # actor TP 4 over rollout TP 2


def test_a_value_written_after_the_gap_is_certain(tmp_path):
    """A primary's own value merged after the left-out config (its _self_ last) is what Hydra would keep."""
    primary = write_tree(
        tmp_path,
        {
            "main.yaml": """\
                defaults:
                  - model/big@actor.model
                hydra:
                  searchpath: ["file://${oc.env:CORPUS_REPO_PATH}/models"]
                cluster:
                  num_nodes: 1
                  component_placement:
                    actor,rollout: all
                rollout: {tensor_parallel_size: 2}
                actor: {model: {tensor_model_parallel_size: 2}}
                """
        },
    )
    spec = load(primary / "main.yaml")
    assert spec.component("rollout").process_shape.devices_per_process == 2
    (warning,) = spec.warnings
    assert "composes without what only it could supply: model/big@actor.model" in warning


def test_a_near_miss_of_an_option_stays_an_error_even_with_a_skipped_search_path(tmp_path):
    primary = write_tree(
        tmp_path,
        {
            "main.yaml": """\
                defaults:
                  - env/libero_spatal@env.train
                hydra:
                  searchpath: ["file://${oc.env:CORPUS_REPO_PATH}/config"]
                cluster: {num_nodes: 1, component_placement: {actor: all}}
                """,
            "env/libero_spatial.yaml": "task: spatial\n",
        },
    )
    with pytest.raises(ConfigError) as e:
        load(primary / "main.yaml")
    (problem,) = e.value.problems
    assert "no option 'libero_spatal'" in problem.message and "options there: libero_spatial" in problem.message
    assert "the search path 'file://${oc.env:CORPUS_REPO_PATH}/config' is skipped (CORPUS_REPO_PATH is not set)" in (
        problem.message
    )


def test_an_oc_env_default_and_a_pkg_search_path_are_followed(tmp_path, monkeypatch):
    shared = write_tree(tmp_path / "shared", {"engine/fsdp.yaml": "strategy: fsdp\n"})
    write_tree(tmp_path / "pkgs", {"corpus_pkg_conf/__init__.py": "", "corpus_pkg_conf/model/vla.yaml": "path: /m\n"})
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    primary = (
        write_tree(
            tmp_path / "conf",
            {
                "main.yaml": f"""\
                defaults:
                  - engine/fsdp@actor.engine
                  - model/vla@actor.model
                hydra:
                  searchpath:
                    - file://${{oc.env:CORPUS_REPO_PATH,{shared}}}
                    - pkg://corpus_pkg_conf
                cluster: {{num_nodes: 1, component_placement: {{actor: all}}}}
                """
            },
        )
        / "main.yaml"
    )
    data, rep = ours(primary)
    assert not rep.problems and not rep.warnings
    assert data["actor"] == {"engine": {"strategy": "fsdp"}, "model": {"path": "/m"}}
    assert rep.files[("actor", "model", "path")] == str(tmp_path / "pkgs" / "corpus_pkg_conf" / "model" / "vla.yaml")
    assert data == hydra_core(primary)


def test_an_interpolation_rlplace_does_not_read_is_never_resolved():
    """maniskill_ppo_openvla.yaml writes runner.ckpt_dir: ${oc.env:CORPUS_CKPT_DIR}/...; the variable is unset."""
    result = plan(load(EMBODIED), parse_nodes("1x8"))
    assert len(result.by_component("actor")) == 8


def test_validate_prints_the_warning_under_ok(capsys):
    assert main(["validate", str(E2E / "embodied" / "ppo_openvla_e2e.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("ppo_openvla_e2e.yaml: ok") and len(out) == 2
    assert out[1].startswith("  warning: ") and "CORPUS_REPO_PATH is not set" in out[1]


def test_the_search_path_must_be_a_list_of_folders(tmp_path):
    primary = write_tree(tmp_path, {"main.yaml": "defaults: [_self_]\nhydra: {searchpath: file:///x}\ncluster: {}\n"})
    with pytest.raises(ConfigError) as e:
        load(pathlib.Path(primary / "main.yaml"))
    assert [p.path for p in e.value.problems] == ["hydra.searchpath"]
    assert "must be a list of strings" in e.value.problems[0].message
