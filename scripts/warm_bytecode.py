"""Write the bytecode of what `make test` and `make demo` import, once, in one process (run by the Makefile after
it installs the venv).

pip installs with `--no-compile` (the Makefile): compiling every module of ray, torch and the rest took 16 s of one
core, most of them modules no run imports. Left to the runs, the first seconds of `make test` would compile the
same modules in a dozen processes at once (the session cluster's agents, the first Ray workers, the xdist workers),
each its own copy. Importing these here compiles them once (about 8 s, while pip installs torch), and a run then
loads them. `warm_bytecode.py torch` does the same for torch, once it is installed.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

#: What the suite's processes import first: the driver and Ray's own processes (its workers, agents, dashboard,
#: monitors), the test tools, and the libraries rlplace and its demo load. Modules named on the command line
#: instead (the Makefile names torch once it is installed) may be missing: an optional extra.
MODULES = (
    "ray",
    "ray.cluster_utils",
    "ray._private.workers.default_worker",
    "ray._private.workers.setup_worker",
    "ray._private.runtime_env.agent.main",
    "ray._private.log_monitor",
    "ray.dashboard.agent",
    "ray.dashboard.dashboard",
    "ray.autoscaler._private.monitor",
    "pytest",
    "xdist",
    "hypothesis",
    "sybil",
    "numpy",
    "gymnasium",
    "hydra",
    "omegaconf",
    "jsonschema",
    "rich",
    "yaml",
    "rlplace.cli",
)


def main(names: list[str]) -> int:
    """Import `names` where given (optional extras: one not installed is skipped), else `MODULES`."""
    sys.dont_write_bytecode = False  # whatever $PYTHONDONTWRITEBYTECODE says: writing it is the point
    for name in names or MODULES:
        with contextlib.suppress(*((ImportError,) if names else ())):
            importlib.import_module(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
