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


# -- issue 36: every writer, a link at the temporary name, another user's mode bits ------------------------------


def test_the_demos_checkpoint_is_written_whole_and_never_through_a_link(tmp_path):
    """The checkpoint went to a fixed temporary name, `train.npz.tmp.npz`, through any link planted there."""
    from rlplace.examples.cartpole_ppo.ppo import PPOConfig
    from rlplace.examples.cartpole_ppo.workers import TrainWorker

    victim = tmp_path / "bashrc"
    victim.write_text(PRECIOUS)
    (tmp_path / "train.npz.tmp.npz").symlink_to(victim)  # the old temporary name
    worker = TrainWorker(vars(PPOConfig()), 0, str(tmp_path / "train.npz"))
    worker.save_checkpoint()
    assert victim.read_text() == PRECIOUS
    assert TrainWorker(vars(PPOConfig()), 0, str(tmp_path / "train.npz")).restore()
    (tmp_path / "train.npz").unlink()
    (tmp_path / "train.npz").symlink_to(victim)
    with pytest.raises(RlplaceError, match="is a symbolic link"):
        worker.save_checkpoint()
    assert victim.read_text() == PRECIOUS


def test_a_link_at_every_temporary_name_changes_nothing(tmp_path, monkeypatch):
    """The temporary file beside the target is created exclusively and never through a link: a link planted at
    the very name it will use (here made predictable) fails the write, and its target is untouched."""
    import secrets

    from rlplace.output_files import write_file

    victim = tmp_path / "bashrc"
    victim.write_text(PRECIOUS)
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: "guessed")
    (tmp_path / ".plan.svg.guessed.rlplace-tmp").symlink_to(victim)
    with pytest.raises(OSError):
        write_file(tmp_path / "plan.svg", "<svg/>")
    assert victim.read_text() == PRECIOUS and not (tmp_path / "plan.svg").exists()


def test_only_the_users_own_permission_bits_are_kept(job, tmp_path, monkeypatch, capsys):
    """A file of the user's keeps its rwx bits but never a setuid, setgid or sticky bit; a file another user
    planted (mode 4777, say) passes on nothing: the new file gets the mode a new one gets."""
    from rlplace.output_files import write_file

    own = tmp_path / "own.svg"
    own.write_text("old")
    own.chmod(0o4750)
    assert main(["plan", str(job), "--nodes", "2x4", "--svg", str(own)]) == 0
    assert stat.S_IMODE(own.stat().st_mode) == 0o750
    fresh = stat.S_IMODE(write_file(tmp_path / "fresh.txt", "x").stat().st_mode)
    planted = tmp_path / "planted.svg"
    planted.write_text("old")
    planted.chmod(0o4777)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # as if another user owned it
    assert main(["plan", str(job), "--nodes", "2x4", "--svg", str(planted)]) == 0
    assert stat.S_IMODE(planted.stat().st_mode) == fresh
    capsys.readouterr()


@pytest.mark.parametrize("command", ["run", "demo"])
def test_run_and_demo_refuse_a_link_as_their_out_folder(tmp_path, command):
    """`--out DIR` holds the pictures and resource_pool_auto.yaml: a planted link there sent them elsewhere. Refused
    before any cluster starts."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out"
    link.symlink_to(elsewhere)
    config = pathlib.Path(__file__).parents[1] / "src/rlplace/examples/cartpole_ppo/configs/disaggregate.yaml"
    argv = [RLPLACE, command, *([str(config), "--simulate", "2x4,1x4"] if command == "run" else []), "--out", str(link)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith(
        f"error: {link} is a symbolic link (to {elsewhere}); rlplace does not write through links"
    ), done.stderr
    assert list(elsewhere.iterdir()) == [] and "Starting" not in done.stdout + done.stderr
