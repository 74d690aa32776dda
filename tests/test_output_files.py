"""Files rlplace writes where the user says (`--svg`, `--html`, `--export`, `schema -o`, and `run --out`'s pictures,
written by the same functions) never go through a symbolic link, and `plan` says what it wrote (issue 27, finding
11; issue 25: `plan --svg` said nothing).

The attack: another user plants /tmp/plan.svg -> ~/.bashrc; the victim's `rlplace plan job.yaml --svg /tmp/plan.svg`
overwrote ~/.bashrc. Now the link is refused, saying so, and nothing is written anywhere.
"""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import pytest

from rlplace.cli import main
from rlplace.config import load
from rlplace.errors import RlplaceError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan
from rlplace.viz.picture import write_html, write_svg

JOB = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  placement: {strategy: disaggregate}\n"
PRECIOUS = "export PATH=$HOME/bin:$PATH\n"
RLPLACE = str(pathlib.Path(sys.executable).with_name("rlplace"))


@pytest.fixture
def job(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


@pytest.fixture
def planted(tmp_path):
    """A link planted where the user will write, pointing at a file of theirs."""
    target = tmp_path / "bashrc"
    target.write_text(PRECIOUS)
    link = tmp_path / "out" / "plan.svg"
    link.parent.mkdir()
    link.symlink_to(target)
    return link, target


@pytest.mark.parametrize("flag", ["--svg", "--html", "--export"])
def test_plan_refuses_to_write_through_a_link(job, planted, flag, capsys):
    link, target = planted
    assert main(["plan", str(job), "--nodes", "2x4", flag, str(link)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: {link} is a symbolic link (to {target}); rlplace does not write through links, so nothing was "
        "written: remove the link or name another file\n"
    )
    assert target.read_text() == PRECIOUS and link.is_symlink()


def test_schema_and_the_picture_writers_refuse_links_too(planted, capsys):
    link, target = planted
    assert main(["schema", "-o", str(link)]) == 1
    assert "is a symbolic link" in capsys.readouterr().err
    result = plan(load(JOB), parse_nodes("2x4"))
    for write in (write_svg, write_html):  # what `rlplace run --out DIR` writes its pictures with
        with pytest.raises(RlplaceError, match="is a symbolic link"):
            write(result, link)
    assert target.read_text() == PRECIOUS


def test_plan_says_what_it_wrote_and_replaces_a_file_whole(job, tmp_path, capsys):
    svg, page = tmp_path / "plan.svg", tmp_path / "plan.html"
    page.write_text("old")
    page.chmod(0o640)
    assert main(["plan", str(job), "--nodes", "2x4", "--svg", str(svg), "--html", str(page), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"wrote {svg} (topology picture, SVG)",
        f"wrote {page} (topology picture and plan, HTML)",
    ]
    assert out.startswith("{")  # stdout stays the plan's JSON
    assert svg.read_text().startswith("<?xml") and page.read_text().startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(page.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml", "plan.html", "plan.svg"]  # no temporary left


def test_a_fifo_or_a_missing_folder_is_not_written_into(job, tmp_path):
    """A FIFO at the path made the writer wait for a reader forever: now it is refused at once (in a subprocess
    with a timeout, so that the code before the fix fails this instead of hanging)."""
    fifo = tmp_path / "plan.svg"
    os.mkfifo(fifo)
    done = subprocess.run(
        [RLPLACE, "plan", str(job), "--nodes", "2x4", "--svg", str(fifo)], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 1 and f"error: {fifo} exists and is not a regular file; nothing was written" in (
        done.stderr
    ), done.stderr
    missing = tmp_path / "missing" / "plan.svg"
    done = subprocess.run(
        [RLPLACE, "plan", str(job), "--nodes", "2x4", "--svg", str(missing)], capture_output=True, text=True, timeout=20
    )
    assert done.stderr == f"error: {missing}: No such file or directory (check the path and its permissions)\n"
