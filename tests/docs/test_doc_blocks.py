"""The machinery that runs the docs' code blocks (tests/docs/blocks.py) fails when a block is wrong.

The blocks themselves are collected from the pages by the root conftest.py; here, pages written for the
test check that a wrong command, a wrong output or an invalid config fails, and that skips are honoured.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from tests.docs.blocks import ROOT, console_steps, output_matches


def run_page(tmp_path, text: str) -> subprocess.CompletedProcess[str]:
    """pytest on a page of `text` placed in a scratch docs/ beside the real conftest (its blocks only)."""
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent(text))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT), str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        ("job.yaml: ok", "job.yaml: ok\n", True),
        ("job.yaml: ok", "job.yaml: ok   \n\n", True),
        ("a\n...\nz", "a\nb\nc\nz\n", True),
        ("a\n...\nz", "a\nz\n", True),
        ("wrote ... file", "wrote the file\n", True),
        ("wrote ... file", "wrote the\nfile\n", False),
        ("job.yaml: ok", "job.yaml: ok\nmore\n", False),
        ("job.yaml: ok", "job.yml: ok\n", False),
    ],
)
def test_console_output_is_compared_line_by_line_with_ellipses(expected, actual, same):
    assert output_matches(expected, actual) is same


def test_console_steps_pair_commands_with_their_output():
    assert console_steps("$ a\n1\n2\n$ b\n") == [("a", "1\n2"), ("b", "")]
    with pytest.raises(ValueError, match="starts with a `\\$ command` line"):
        console_steps("output first\n$ a\n")


def test_wrong_blocks_fail_and_skipped_blocks_do_not_run(tmp_path):
    """One page, one block of each kind that must fail, and a skipped block that would fail if run."""
    (tmp_path / "conftest.py").write_text(
        "import pathlib\nfrom tests.docs.blocks import sybil\n\n"
        "pytest_collect_file = sybil(pathlib.Path(__file__).parent, ['*.md']).pytest()\n"
    )
    done = run_page(
        tmp_path,
        """\
        ```bash
        rlplace validate job.yaml
        ```

        ```bash
        rlplace validate no-such.yaml
        ```

        ```console
        $ rlplace validate job.yaml
        job.yaml: not ok
        ```

        ```yaml
        cluster:
          train_worker_num: two
        ```

        ```python
        >>> 1 + 1
        3
        ```

        <!-- skip: next "needs a live multi-node cluster" -->
        ```bash
        exit 1
        ```
        """,
    )
    # passed: the good bash block and the skip directive itself; failed: the four wrong ones, by line
    assert "4 failed, 2 passed, 1 skipped" in done.stdout, done.stdout
    failed = sorted(int(n) for n in re.findall(r"^FAILED .*::line:(\d+),", done.stdout, re.MULTILINE))
    assert failed == [5, 9, 14, 20], done.stdout


def test_a_file_block_is_written_for_the_blocks_after_it_not_run(tmp_path):
    """` ```python hello.py `: the page's file (docs/guide.md's train.py), written into the page's scratch
    directory for a later block to run; running it in the page's namespace would end the test (sys.exit)."""
    (tmp_path / "conftest.py").write_text(
        "import pathlib\nfrom tests.docs.blocks import sybil\n\n"
        "pytest_collect_file = sybil(pathlib.Path(__file__).parent, ['*.md']).pytest()\n"
    )
    done = run_page(
        tmp_path,
        """\
        ```python hello.py
        import sys
        print("hello from", sys.argv[1])
        sys.exit(3)
        ```

        ```console
        $ python hello.py the-page; echo "exit $?"
        hello from the-page
        exit 3
        ```
        """,
    )
    assert "2 passed" in done.stdout and "failed" not in done.stdout, done.stdout
