"""Every command's rich console: a terminal's width on a terminal, no wrapping elsewhere, and only text printed.

On a terminal rich wraps sentences between words and table cells within their column (never cut with "…").
Anywhere else (a pipe, a file, a test) nobody's width is known, and 80 columns would break lines mid-sentence
and mid-value: lines are left whole, for `grep` and for the reader's own pager or editor.

What is printed holds values from configs, inventories, the environment and command lines. So the consoles read
no rich markup (a `[/bogus]` argument to `rlplace run -- ...` was a MarkupError, and the command never ran; rlplace's
own styles are `Text` styles), and every text they write goes through `printable`, which writes terminal controls
as visible escapes: a string (a table cell too) before rich makes a `Text` of it (which would drop a BEL or a CR
unseen), and every segment rendered, however it was built. rich's own control codes (styles, a progress bar's
cursor moves) are not text segments and pass.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from rlplace.printable import printable

#: Console width when the stream is not a terminal: wide enough that no line wraps mid-value or is cut.
UNWRAPPED = 100_000


class _PrintableConsole(Console):
    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)  # before rich's Text drops a BEL or CR unseen

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and segment.text:
                text = printable(segment.text)
                if text is not segment.text:
                    segment = Segment(text, segment.style)
            yield segment


def console(*, stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr) that follows the rules above."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else UNWRAPPED
    return _PrintableConsole(stderr=stderr, width=width, markup=False)
