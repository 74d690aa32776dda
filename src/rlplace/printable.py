"""Text from outside rlplace (a config, an inventory, the environment, a command line) as rlplace prints it.

Any value can hold characters a terminal obeys instead of showing: `label: "\\e]0;owned\\a"` retitles the window,
`\\e[2J` clears the screen, `\\e]52;c;...\\a` writes the clipboard, `\\r` and backspaces write over what was printed
before, a right-to-left override reverses what follows it. `printable` writes each such character as an escape a
reader sees (`\\x1b`, `\\r`, `\\u202e`), so what reaches the terminal is text and nothing else; newlines and tabs
stay (messages have several lines). Every printed line goes through it: the CLI's messages and plain prints
(`cli.py`, `commands/`), and every rich console's output (`viz/console.py`), whose consoles also never read rich
markup in text, so `[/bogus]` in a value or an argument is printed as written (it was a MarkupError).
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls (0x9b is a CSI of its own), the bidirectional overrides and
#: isolates, and the line and paragraph separators some terminals break lines at.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x07": "\\a", "\x00": "\\0"}


def printable(text: object) -> str:
    """`str(text)` with every character a terminal would act on written as a visible escape (idempotent)."""
    text = str(text)
    return _UNPRINTABLE.sub(_visible, text) if _UNPRINTABLE.search(text) else text


def _visible(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
