"""`rlplace validate` and `rlplace schema` as a user runs them: output lines and exit codes."""

from __future__ import annotations

import json
import pathlib

import pytest

from rlplace.cli import main

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "spec_examples"


def test_validate_prints_ok_for_every_spec_example(capsys):
    files = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
    assert main(["validate", *files]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{f}: ok" for f in files]


def test_validate_prints_each_problem_with_its_line_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "job.yaml"
    bad.write_text("cluster:\n  train_worker_num: 2\n  placement:\n    mode: manul\n")
    good = EXAMPLES / "auto-default.yaml"
    assert main(["validate", str(bad), str(good)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{bad}:4: cluster.placement.mode: must be one of 'auto', 'manual', got 'manul'; did you mean 'manual'?",
        f"{good}: ok",
    ]


def test_validate_missing_file_is_a_clear_error_without_traceback(capsys):
    assert main(["validate", "nowhere.yaml"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "nowhere.yaml: no such file\n" and "Traceback" not in captured.err


def test_schema_to_stdout_and_to_a_file(tmp_path, capsys):
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    target = tmp_path / "rlplace.schema.json"
    assert main(["schema", "--output", str(target)]) == 0
    assert json.loads(target.read_text()) == printed
    cluster = printed["properties"]["cluster"]["anyOf"]
    assert {"train_worker_num", "resource_pool"} <= set(cluster[0]["properties"])
    assert {"num_nodes", "node_groups", "component_placement"} <= set(cluster[1]["properties"])


def test_schema_accepts_every_spec_example_and_flags_a_typo(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    yaml = pytest.importorskip("yaml")
    main(["schema"])
    validator = jsonschema.Draft202012Validator(json.loads(capsys.readouterr().out))
    for path in EXAMPLES.glob("*.yaml"):
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, f"{path.name}: {errors[0].message}"
    assert list(validator.iter_errors({"cluster": {"num_nodes": 2, "node_gruops": []}}))
