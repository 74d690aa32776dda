"""The one wrapping rule of every command's output: a terminal's width on a terminal, no wrapping elsewhere.

On a terminal rich wraps sentences between words and table cells within their column (never cut with "…").
Anywhere else (a pipe, a file, a test) nobody's width is known, and 80 columns would break lines mid-sentence
and mid-value: lines are left whole, for `grep` and for the reader's own pager or editor.
"""

from __future__ import annotations

import sys

from rich.console import Console

#: Console width when the stream is not a terminal: wide enough that no line wraps mid-value or is cut.
UNWRAPPED = 100_000


def console(*, stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr) that follows the rule above."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=UNWRAPPED)
