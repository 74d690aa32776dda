"""Values read from the environment stay out of messages, exports and non-text values too (issue 36, item 4).

The review found three ways around the masking of issue 27: a defaults entry choosing its option from the
environment (`- db: ${oc.env:SK}`) named the secret in "no option 'sk-...'", from rlplace's composer and from
hydra-core's; `plan --export` wrote a pool named `${oc.env:SK}` with its value; and a value that is no text
(`${oc.decode:${oc.env:PIN}}`, an int) was not masked anywhere. Each is shown as the config writes it, unless the
user asks for the values (`--show-env`).
"""

from __future__ import annotations

import json

import pytest
from tests.trees import write_tree

from rlplace.cli import main
from rlplace.config import load

SECRET = "sk-live-36-0123456789abcdef"
PIN = "98765432"


@pytest.fixture(autouse=True)
def secrets_in_the_environment(monkeypatch):
    monkeypatch.setenv("RLPLACE_TEST_SK", SECRET)
    monkeypatch.setenv("RLPLACE_TEST_PIN", PIN)


@pytest.mark.parametrize("overrides", [[], ["cluster.train_worker_num=2"]], ids=["rlplace", "hydra-core"])
def test_a_defaults_choice_from_the_environment_is_not_named_in_the_error(tmp_path, overrides, capsys):
    tree = write_tree(
        tmp_path,
        {
            "conf/main.yaml": "defaults:\n  - db: ${oc.env:RLPLACE_TEST_SK}\n  - _self_\n"
            "cluster: {train_worker_num: 1}\n",
            "conf/db/mysql.yaml": "x: 1\n",
        },
    )
    main_yaml = str(tree / "conf/main.yaml")
    assert main(["validate", main_yaml, *overrides]) == 2
    out = capsys.readouterr().out
    assert SECRET not in out and "${oc.env:RLPLACE_TEST_SK}" in out, out
    assert main(["validate", main_yaml, *overrides, "--show-env"]) == 2
    assert SECRET in capsys.readouterr().out


def test_an_exported_pool_named_from_the_environment_is_written_as_the_config_writes_it(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text(
        "cluster:\n  resource_pool:\n    - {name: '${oc.env:RLPLACE_TEST_SK}', num_node: 1, num_gpus: 8, train: 0-1}\n"
        "  placement: {mode: manual}\n  train_worker_num: 2\n"
    )
    exported = tmp_path / "resource_pool_auto.yaml"
    for flags in ([], ["--show-env"]):  # a file to reuse: the same either way
        assert main(["plan", str(job), "--nodes", "1x8", "--export", str(exported), *flags]) == 0
        capsys.readouterr()
        assert SECRET not in exported.read_text() and "name: '${oc.env:RLPLACE_TEST_SK}'" in exported.read_text()
    reused = load(exported.read_text() + "placement: {mode: manual}\ntrain_worker_num: 2\n")
    assert reused.node_groups[0].label == SECRET  # the exported file, used, reads the environment again


def test_a_value_from_the_environment_that_is_no_text_is_masked_too(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text(
        "cluster:\n  num_nodes: 1\n  node_groups:\n    - label: gpu\n      node_ranks: 0\n      env_configs:\n"
        "        - node_ranks: 0\n          env_vars:\n            - PIN: ${oc.decode:${oc.env:RLPLACE_TEST_PIN}}\n"
        "  component_placement:\n    actor: {node_group: gpu, placement: 0-1}\n"
    )
    assert main(["plan", str(job), "--nodes", "1x8"]) == 0
    table = capsys.readouterr().out
    assert PIN not in table and "PIN=${oc.decode:${oc.env:RLPLACE_TEST_PIN}}" in table, table
    assert main(["plan", str(job), "--nodes", "1x8", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert PIN not in json.dumps(doc["workers"])
    assert doc["from_environment"] == {
        "cluster.node_groups[0].env_configs[0].env_vars[0].PIN": "${oc.decode:${oc.env:RLPLACE_TEST_PIN}}"
    }
    too_many = tmp_path / "nodes.yaml"
    too_many.write_text(
        "cluster:\n  num_nodes: ${oc.decode:${oc.env:RLPLACE_TEST_PIN}}\n  component_placement: {a: 0}\n"
    )
    assert main(["validate", str(too_many)]) == 2
    out = capsys.readouterr().out
    assert PIN not in out and "${oc.decode:${oc.env:RLPLACE_TEST_PIN}} is too large" in out, out
    assert main(["validate", str(too_many), "--show-env"]) == 2
    assert f"{PIN} is too large" in capsys.readouterr().out
