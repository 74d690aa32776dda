"""Hydra configs as their users run them: defaults lists, config groups, overrides, and where problems point."""

from __future__ import annotations

import json
import pathlib
import sys
import textwrap

import pytest
from tests.trees import write_tree

from rlplace.cli import main
from rlplace.config import load
from rlplace.config.compose import compose_file
from rlplace.config.hydra_compose import compose_with_hydra
from rlplace.config.problems import Reporter
from rlplace.config.yaml_source import read_yaml
from rlplace.errors import ConfigError

CONF = pathlib.Path(__file__).resolve().parent.parent / "data" / "frameworks" / "rlightning" / "conf"
PRIMARIES = sorted([*CONF.glob("*.yaml"), CONF / "cluster" / "2t2e_pool_group.yaml"])


@pytest.mark.parametrize("primary", PRIMARIES, ids=lambda p: p.name)
def test_rlplace_composes_defaults_lists_as_hydra_does(primary):
    pytest.importorskip("hydra")
    rep = Reporter(str(primary))
    data = read_yaml(primary.read_text(), rep)
    ours = compose_file(str(primary), rep, data).data
    theirs = compose_with_hydra(primary, [], Reporter(str(primary)), data).data
    assert not rep.problems
    assert ours == theirs


def test_a_primary_config_loads_without_hydra_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "hydra", None)  # import hydra now raises ImportError
    spec = load(CONF / "train_ppo.yaml")
    assert spec.component("env").num_workers == 4 and spec.settings.mode == "manual"
    with pytest.raises(ConfigError) as e:
        load(CONF / "train_ppo.yaml", overrides=["cluster=1t1e"])
    (problem,) = e.value.problems
    assert "need hydra-core" in problem.message and "pip install 'rlplace[hydra]'" in problem.message
    assert problem.file == "command line 'cluster=1t1e'"


def test_overrides_choose_options_and_set_values(capsys):
    pytest.importorskip("hydra")
    argv = ["plan", str(CONF / "train_ppo.yaml"), "cluster=1t1e", "cluster.train_worker_num=2", "--nodes", "2x4"]
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    counts = {c: sum(1 for w in doc["workers"] if w["component"] == c) for c in ("train", "eval", "env")}
    assert counts == {"train": 2, "eval": 1, "env": 4}  # env from env/maniskill_x4 (4 workers)
    assert doc["settings"]["strategy"] == "disaggregate"


def test_a_bad_override_value_points_at_the_command_line(capsys):
    pytest.importorskip("hydra")
    assert main(["validate", str(CONF / "train_ppo.yaml"), "cluster.train_worker_num=0"]) == 2
    assert capsys.readouterr().out.splitlines() == [
        "command line 'cluster.train_worker_num=0': cluster.train_worker_num: must be an integer >= 1, got 0"
    ]


def test_an_unknown_option_or_key_in_an_override_is_hydras_message_at_the_override():
    pytest.importorskip("hydra")
    with pytest.raises(ConfigError) as e:
        load(CONF / "train_ppo.yaml", overrides=["cluster=9t9e"])
    (problem,) = e.value.problems
    assert problem.file == "command line 'cluster=9t9e'" and "Could not find 'cluster/9t9e'" in problem.message
    assert "1t1e" in problem.message  # Hydra lists the options


def test_problems_in_group_files_point_at_the_group_file_and_line(tmp_path):
    conf = write_tree(
        tmp_path,
        {
            "main.yaml": "defaults:\n  - cluster: good\n  - _self_\nmodel: {lr: 0.1}\n",
            "cluster/good.yaml": "train_worker_num: 2\n",
            "cluster/bad.yaml": "# a comment\ntrain_worker_num: two\n",
        },
    )
    assert load(conf / "main.yaml").component("train").num_workers == 2
    for overrides in ([], ["cluster=bad"]):
        if overrides:
            pytest.importorskip("hydra")
        else:
            (conf / "main.yaml").write_text("defaults:\n  - cluster: bad\n  - _self_\n")
        with pytest.raises(ConfigError) as e:
            load(conf / "main.yaml", overrides=overrides)
        (problem,) = e.value.problems
        assert (problem.file, problem.line, problem.path) == (
            str(conf / "cluster/bad.yaml"),
            2,
            "cluster.train_worker_num",
        )


def test_a_missing_option_names_the_options_there(tmp_path):
    conf = write_tree(
        tmp_path, {"main.yaml": "defaults:\n  - cluster: 8t8e\n", "cluster/1t1e.yaml": "train_worker_num: 1\n"}
    )
    with pytest.raises(ConfigError) as e:
        load(conf / "main.yaml")
    (problem,) = e.value.problems
    assert problem.line == 2 and "config group cluster: no option '8t8e'" in problem.message
    assert "options there: 1t1e" in problem.message


def test_defaults_order_self_first_packages_and_hydra_groups(tmp_path):
    pytest.importorskip("hydra")
    conf = write_tree(
        tmp_path,
        {
            "main.yaml": """\
                defaults:
                  - _self_
                  - cluster: two
                  - pools@cluster.resource_pool: one_pool
                  - extra
                  - override hydra/job_logging: stdout
                cluster:
                  train_worker_num: 1
                  placement: {mode: manual}
                """,
            "cluster/two.yaml": "train_worker_num: 2\n",
            "pools/one_pool.yaml": "- {name: p, num_node: 1, num_gpus: 4, train: 0-3}\n",
            "extra.yaml": "# @package _global_\nnotes: composed at the top level\n",
        },
    )
    spec = load(conf / "main.yaml")
    assert spec.component("train").num_workers == 2  # _self_ first: the group file wins
    assert [g.label for g in spec.node_groups] == ["p"]
    rep = Reporter(str(conf / "main.yaml"))
    data = read_yaml((conf / "main.yaml").read_text(), rep)
    ours = compose_file(str(conf / "main.yaml"), rep, data).data
    assert ours == compose_with_hydra(conf / "main.yaml", [], Reporter(""), data).data
    assert ours["notes"] == "composed at the top level"


def test_a_composed_hydra_config_loads_as_the_file_does():
    """What an @hydra.main application passes: the DictConfig (or cfg.cluster), interpolations unresolved."""
    pytest.importorskip("hydra")
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="train_async")
        with pytest.raises(ConfigError, match="Hydra is already initialized"):
            load(CONF / "train_async.yaml", overrides=["cluster.eval_worker_num=2"])
    from_cfg, from_file = load(cfg), load(CONF / "train_async.yaml")
    assert [(c.name, c.num_workers, c.gpus_per_worker) for c in from_cfg.components] == [
        (c.name, c.num_workers, c.gpus_per_worker) for c in from_file.components
    ]
    assert from_cfg.component("env").num_workers == 3  # env.num_workers: ${cluster.eval_worker_num}
    assert load(cfg.cluster).component("eval").num_workers == 3


def test_interpolations_resolve_where_read_and_only_there():
    omegaconf = pytest.importorskip("omegaconf")
    text = """\
        sizes: {train: 3}
        model: {path: "${oc.env:NO_SUCH_VARIABLE_FOR_RLPLACE}"}
        cluster:
          train_worker_num: ${sizes.train}
        """
    assert load(textwrap.dedent(text)).component("train").num_workers == 3  # model.path is never read
    with pytest.raises(ConfigError) as e:
        load(textwrap.dedent(text).replace("${sizes.train}", "${sizes.eval}"), filename="job.yaml")
    (problem,) = e.value.problems
    assert (problem.path, problem.line) == ("cluster.train_worker_num", 4)
    assert "cannot resolve '${sizes.eval}'" in problem.message
    assert omegaconf is not None


def test_a_reference_resolves_without_omegaconf_and_anything_else_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "omegaconf", None)
    assert load("n: 2\ncluster:\n  train_worker_num: ${n}\n").component("train").num_workers == 2
    with pytest.raises(ConfigError) as e:
        load("cluster:\n  n: 2\n  train_worker_num: ${.n}\n")
    (problem,) = e.value.problems
    assert problem.path == "cluster.train_worker_num" and "pip install 'rlplace[hydra]'" in problem.message


def test_validate_prints_warnings_under_ok_and_splits_files_from_overrides(capsys, tmp_path):
    pytest.importorskip("hydra")
    extra = CONF / "cluster" / "extra_keys.yaml"
    assert main(["validate", str(extra), str(CONF / "cluster" / "1t1e.yaml"), "train_worker_num=2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{extra}: ok"
    assert out[
        1
    ] == f"  warning: {extra}:4: seed: unknown key 'seed' in the cluster section is not read by rlplace " + (
        "(kept for your application; remove it if it is a typo)"
    )
    assert out[-1] == f"{CONF / 'cluster' / '1t1e.yaml'}: ok"


def test_run_takes_overrides_and_refuses_a_bad_one_before_any_cluster_starts(capsys):
    pytest.importorskip("hydra")
    pytest.importorskip("gymnasium")
    config = str(CONF / "cluster" / "1t1e.yaml")
    assert main(["run", config, "train_worker_num=0", "--simulate", "1x2"]) == 2
    err = capsys.readouterr().err
    assert "command line 'train_worker_num=0': train_worker_num: must be an integer >= 1, got 0" in err
    assert "Starting an embedded Ray cluster" not in err


def test_an_override_of_a_key_that_does_not_exist_gets_did_you_mean_on_that_override():
    pytest.importorskip("hydra")
    with pytest.raises(ConfigError) as e:
        load(CONF / "train_ppo.yaml", overrides=["cluster=1t1e", "cluster.train_worker_nm=3"])
    (problem,) = e.value.problems
    assert problem.file == "command line 'cluster.train_worker_nm=3'"
    assert "there is no key cluster.train_worker_nm to override; did you mean 'cluster.train_worker_num=3'?" in (
        problem.message
    )
    with pytest.raises(ConfigError) as e:
        load(CONF / "train_ppo.yaml", overrides=["cluster.colour=red"])
    assert "there is no key cluster.colour to override (write +cluster.colour=red to add it)" in str(e.value)


def test_an_override_of_a_valid_key_the_file_does_not_write_is_applied_or_answered_with_what_works(tmp_path):
    """`cluster.train_each_cpu_num=0.25` on a file that does not write the key: a key of the cluster section, so it
    is set (Hydra alone refuses it, and the did-you-mean answered with the text typed). Where rlplace cannot tell it
    is the section's, the answer is the form that works, never the same text back."""
    pytest.importorskip("hydra")
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  train_worker_num: 2\n")
    spec = load(job, overrides=["cluster.train_each_cpu_num=0.25", "cluster.placement.strategy=colocate"])
    assert spec.component("train").cpus_per_worker == 0.25 and spec.settings.strategy == "colocate"
    spec = load(CONF / "train_ppo.yaml", overrides=["cluster=1t1e", "cluster.eval_each_cpu_num=0.5"])
    assert spec.component("eval").cpus_per_worker == 0.5
    with pytest.raises(ConfigError) as e:  # a cluster group file on its own: its keys have no `cluster.` prefix
        load(CONF / "cluster" / "1t1e.yaml", overrides=["train_each_cpu_num=0.25"])
    (problem,) = e.value.problems
    assert problem.message.endswith("write +train_each_cpu_num=0.25 to add it"), problem.message
    assert "did you mean 'train_each_cpu_num=0.25'" not in problem.message


def test_an_unknown_option_names_the_closest_and_where_hydra_looked():
    pytest.importorskip("hydra")
    with pytest.raises(ConfigError) as e:
        load(CONF / "train_ppo.yaml", overrides=["cluster=1t1"])
    (problem,) = e.value.problems
    assert problem.file == "command line 'cluster=1t1'"
    assert "Could not find 'cluster/1t1'; did you mean cluster=1t1e?" in problem.message
    assert "closest of the 10 options: 1t1e" in problem.message and f"(searched file://{CONF})" in problem.message
    assert "2t2e_pool_group, 4t4e_devcolo, 4t4e_manual, 8t8e_colocate, default_env_strategy" not in problem.message


def test_hydra_failures_name_their_root_cause(tmp_path):
    pytest.importorskip("hydra")
    conf = write_tree(tmp_path, {"main.yaml": "defaults:\n  - cluster: ${oc.env:RLPLACE_NO_SUCH_VARIABLE}\n"})
    with pytest.raises(ConfigError) as e:
        load(conf / "main.yaml", overrides=["cluster.train_worker_num=2"])
    assert "Environment variable 'RLPLACE_NO_SUCH_VARIABLE' not found" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load(CONF / "train_ppo.yaml", overrides=["cluster.train_worker_num=[1,"])
    (problem,) = e.value.problems
    assert problem.file == "command line 'cluster.train_worker_num=[1,'"
    assert problem.message == "Hydra could not compose the config: no viable alternative at input '[1,'"


def test_a_whole_training_config_resolves_only_the_keys_placement_reads(monkeypatch):
    """env: and buffer.storage are read key by key: their other interpolations (the application's) stay."""
    pytest.importorskip("omegaconf")
    monkeypatch.delenv("RLPLACE_NOT_SET", raising=False)
    text = """\
        cluster: {train_worker_num: 1, eval_worker_num: 2}
        env:
          num_workers: ${cluster.eval_worker_num}
          video_dir: ${oc.env:RLPLACE_NOT_SET}/videos
        policy: {}
        train: {}
        buffer:
          storage:
            type: ${kind}
            path: ${oc.env:RLPLACE_NOT_SET}/buffer
        kind: sharded
        """
    spec = load(textwrap.dedent(text))
    assert spec.component("env").num_workers == 2 and spec.settings.buffer_worker_num is None
