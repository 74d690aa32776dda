"""Byte counts as users write them (`14G`, `512M`, `1GiB`, `1000000`): `cluster.model_bytes` and the estimate's
command-line flags (`rlplace plan --model-bytes/--batch-bytes`) read them the same way."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*$", re.IGNORECASE)
#: How a size is written, for messages.
SIZE_FORM = "a size such as 14G, 512M, 1GiB or 1000000"


def parse_size(value: object) -> int:
    """`"14G"` -> 14e9, `"1GiB"` -> 2**30, an integer as it is; ValueError saying the form otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SIZE.match(value) if isinstance(value, str) else None
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"must be {SIZE_FORM} (bytes, more than 0), got {value!r}")
    unit = (m.group(2) or "").lower()
    base = 1024 if unit.endswith("i") else 1000
    return int(float(m.group(1)) * base ** ("kmgt".index(unit[0]) + 1 if unit else 0))
