"""Train PPO on CartPole with its workers placed by a cluster config: the Python API, end to end.

    rlplace start --head --node-rank 0          # and `rlplace start --address HEAD:6379 --node-rank N` elsewhere
    python examples/cartpole_ppo/train.py examples/cartpole_ppo/configs/disaggregate.yaml

No cluster at hand? `rlplace run CONFIG --simulate 2x4:A800,1x2:RTX4090,1x0` does the same on an embedded one, and
`rlplace run CONFIG --simulate 2x4:A800,1x2:RTX4090,1x0 -- python examples/cartpole_ppo/train.py CONFIG` runs this
very script there (it joins the cluster `rlplace run` started: $RAY_ADDRESS).
The pipeline itself (what to copy into your own codebase) is src/rlplace/examples/cartpole_ppo/pipeline.py.
"""

from __future__ import annotations

import argparse
import sys

import rlplace
from rlplace.examples.cartpole_ppo.pipeline import Budget, run_pipeline
from rlplace.examples.cartpole_ppo.report import outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="cluster config YAML (either dialect)")
    parser.add_argument("--address", default="auto", help="Ray address (default: the cluster this machine joined)")
    parser.add_argument("--iterations", type=int, default=Budget().iterations)
    args = parser.parse_args()

    def progress(iteration: int, curve) -> None:
        print(f"iteration {iteration:3d}: average return {curve.average:6.1f} ({len(curve.returns)} episodes)")

    try:
        with rlplace.connect(args.config, address=args.address) as job:  # plan + placement groups, or a clear error
            result = run_pipeline(job, Budget(iterations=args.iterations), progress=progress)
    except rlplace.RlplaceError as e:
        print(e, file=sys.stderr)
        return 2
    print(outcome(result))
    for p in result.placed:
        print(f"{p.actor_name:18} node {p.node_rank}  GPUs {list(p.gpus)}")
    return 0 if result.curve.solved else 1


if __name__ == "__main__":
    sys.exit(main())
