"""What rlplace prints is text: terminal controls from configs, inventories and command lines are shown as escapes,
and rich markup in them is printed as written, never interpreted (issue 36, item 4).

The review's attacks: escape sequences in a config or inventory value that retitle the terminal (`\\e]0;...\\a`),
clear it (`\\e[2J`) or write the clipboard (`\\e]52;...`), a CR that writes over a printed line, and rich markup in
an inventory's model name (`[/bogus]`: a MarkupError traceback, no plan) or in an argument of `rlplace run --`
(the command never ran). Every output is captured as a pipe gets it and must hold no control character at all.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import xml.dom.minidom

import pytest

from rlplace.cli import main
from rlplace.printable import printable

RLPLACE = str(pathlib.Path(sys.executable).with_name("rlplace"))
#: A terminal acts on any of these; the output of a command holds none (newlines and tabs aside).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: Window title, screen clear, clipboard write, carriage return, bell, right-to-left override.
ATTACK = "\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZWNobyBvd25lZA==\x07\r\u202egnp.exe"
MARKUP = "[red]x[/red][/bogus]"


def yaml_text(value: str) -> str:
    """`value` as a double-quoted YAML scalar (its controls written as YAML escapes)."""
    return '"' + value.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]0;t\x07", "\\x1b]0;t\\a"),
        ("a\rb\x08c\x0bd\x0ce\x00", "a\\rb\\bc\\vd\\fe\\0"),
        ("\x9b2J \x7f", "\\x9b2J \\x7f"),
        ("\u202eabc\u2066\u2028", "\\u202eabc\\u2066\\u2028"),
        ("two\nlines\tand a tab, ünïcödé, [red]markup[/]", "two\nlines\tand a tab, ünïcödé, [red]markup[/]"),
    ],
    ids=["osc", "c0", "c1-del", "bidi", "kept"],
)
def test_printable_writes_controls_as_escapes_and_keeps_the_rest(text, shown):
    assert printable(text) == shown
    assert printable(shown) == shown  # idempotent: printing a printed text again changes nothing


@pytest.fixture
def attack_job(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(
        "cluster:\n  num_nodes: 1\n  node_groups:\n    - label: gpu\n      node_ranks: 0\n      env_configs:\n"
        f"        - node_ranks: 0\n          env_vars:\n            - TITLE: {yaml_text(ATTACK + MARKUP)}\n"
        f"          python_interpreter_path: {yaml_text('/usr/bin/py' + ATTACK)}\n"
        "  component_placement:\n    actor: {node_group: gpu, placement: 0-1}\n"
    )
    return job


def test_the_plan_table_shows_controls_as_escapes_and_markup_as_written(attack_job, capsys):
    assert main(["plan", str(attack_job), "--nodes", "1x8"]) == 0
    out, err = capsys.readouterr()
    assert not CONTROL.search(out + err), repr(out + err)
    assert f"TITLE={printable(ATTACK)}{MARKUP}, python /usr/bin/py{printable(ATTACK)}" in out, out


def test_messages_show_controls_as_escapes(tmp_path, capsys):
    """Values are quoted with their escapes already (`repr`); a file name was printed raw (a planted file the user
    tab-completes, or names in a script)."""
    job = tmp_path / "job.yaml"
    job.write_text(f"cluster:\n  train_worker_num: {yaml_text(ATTACK + MARKUP)}\n")
    planted = tmp_path / f"job{ATTACK}.yaml"
    planted.write_text("cluster:\n  train_worker_num: 0\n")
    for argv in (["validate", str(job)], ["validate", str(planted)], ["plan", str(planted), "--nodes", "1x8"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert not CONTROL.search(out + err), repr(out + err)
        assert "\\x1b]0;owned" in out + err
    assert main(["validate", str(planted)]) == 2
    assert capsys.readouterr().out.startswith(f"{tmp_path}/job{printable(ATTACK)}.yaml:2: cluster.train_worker_num")


def test_argparse_errors_show_controls_as_escapes(attack_job, capsys):
    """argparse quotes a bad value with its escapes, but lists unknown words as they are."""
    with pytest.raises(SystemExit):
        main(["plan", str(attack_job), "--nodes", "1x8", f"--bogus{ATTACK}"])
    err = capsys.readouterr().err
    assert not CONTROL.search(err) and f"unrecognized arguments: --bogus{printable(ATTACK)}" in err, repr(err)


def test_markup_and_controls_in_an_inventory_are_printed_as_written(tmp_path, capsys):
    """An inventory's model name lands in a table cell, which rich read as markup: `[/bogus]` was a MarkupError
    traceback instead of a plan."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(f"nodes:\n  - {{count: 2, gpus: 8, model: {yaml_text('A800' + MARKUP + ATTACK)}}}\n")
    job = tmp_path / "job.yaml"
    job.write_text("cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n")
    assert main(["plan", str(job), "--inventory", str(inventory)]) == 0
    out, err = capsys.readouterr()
    assert not CONTROL.search(out + err), repr(out + err)
    assert f"nodes 0-1 (8x A800{MARKUP}{printable(ATTACK)})" in out, out


def test_pictures_hold_no_control_character(attack_job, tmp_path, capsys):
    """XML allows none (the SVG did not parse), and `cat plan.html` would obey them."""
    svg, page = tmp_path / "plan.svg", tmp_path / "plan.html"
    assert main(["plan", str(attack_job), "--nodes", "1x8", "--svg", str(svg), "--html", str(page)]) == 0
    for picture in (svg, page):
        assert not CONTROL.search(picture.read_text()), picture
    xml.dom.minidom.parse(str(svg))
    assert printable(ATTACK) in svg.read_text()


@pytest.mark.slow
def test_run_prints_a_command_with_markup_and_controls_as_written_and_runs_it(tmp_path):
    """`rlplace run ... -- CMD '[/bogus]'` was a MarkupError traceback at the echo of the command, which never ran."""
    (tmp_path / "job.yaml").write_text("cluster:\n  train_worker_num: 1\n")
    script = "import sys; print('ran with', len(sys.argv) - 1, 'arguments')"
    argv = [RLPLACE, "run", "job.yaml", "--simulate", "1x4", "--", sys.executable, "-c", script, MARKUP, ATTACK]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert "ran with 2 arguments" in done.stdout
    assert not CONTROL.search(done.stderr), repr(done.stderr)
    assert MARKUP in done.stderr and printable(ATTACK) in done.stderr, done.stderr
