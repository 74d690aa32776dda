"""Worker classes the Ray-layer tests launch (importable by the workers, so defined in a module)."""

from __future__ import annotations

import os
import sys

import rlplace


class Probe:
    """Reports where it runs, from rlplace's placement object and from the raw process environment."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.placement = rlplace.worker_placement()  # readable already in __init__

    def where(self) -> dict:
        p = rlplace.worker_placement()
        return {
            "placement": p,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "python": sys.executable,
            "tag": self.tag,
        }

    def env(self, key: str) -> str | None:
        return os.environ.get(key)

    def echo(self, value: object) -> object:
        return value

    def pid(self) -> int:
        return os.getpid()
