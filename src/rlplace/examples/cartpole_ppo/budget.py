"""How long the demo trains and how much experience per iteration.

Its own module, free of numpy, gymnasium and Ray, because the CLI reads the defaults while building its
parser: `rlplace validate` must not pay for (or need) the demo's dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """The defaults solve CartPole in about 32 iterations when placed (26 in one process)."""

    iterations: int = 60
    total_envs: int = 16  # split over the env workers
    steps: int = 64  # per env per iteration (each step is one call from an env worker to its eval worker)
    seed: int = 0
    stop_when_solved: bool = True
