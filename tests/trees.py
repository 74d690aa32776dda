"""Writing small config trees (a Hydra primary with its groups) into a test's temporary folder."""

from __future__ import annotations

import pathlib
import textwrap


def write_tree(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """Write `files` (relative path -> YAML text, dedented) below `root`, folders included; returns `root`."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root
