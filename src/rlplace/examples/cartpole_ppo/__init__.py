"""PPO on CartPole, placed by rlplace: the reference pipeline behind `rlplace demo`.

`configs/` holds its cluster YAMLs, one per strategy, in both dialects, all sized for the demo's
simulated cluster `DEMO_NODES`: two nodes of 4 A800s, one of 2 RTX 4090s and one CPU-only node (logical
GPUs; the same shape as the test suite's session cluster, so every config is tested as shipped).
"""

from __future__ import annotations

import pathlib

CONFIGS = pathlib.Path(__file__).parent / "configs"
#: The demo's simulated cluster, in `--nodes` syntax (COUNTxGPUS groups in node-rank order).
DEMO_NODES = "2x4:A800,1x2:RTX4090,1x0"
#: The config `rlplace demo` runs.
DEMO_CONFIG = CONFIGS / "node-groups.yaml"


def config_names() -> list[str]:
    """The strategy configs shipped, by file stem (`disaggregate`, `colocate-offload`, ...)."""
    return sorted(p.stem for p in CONFIGS.glob("*.yaml"))
