"""How a driver started by `rlplace run CONFIG [OVERRIDE ...] -- COMMAND` finds the job `run` planned.

`run` gives its command the config's absolute path and the overrides in the environment, and
`rlplace.connect()` with no argument loads the same config from there (`load_driver_config`), so the plan the
script gets is the one `run` showed (on the same cluster: `run` also sets $RAY_ADDRESS). A script can still
pass a config of its own to `connect`.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping, Sequence

from rlplace.errors import RlplaceError
from rlplace.model import JobSpec

#: The config file's absolute path.
CONFIG_ENV = "RLPLACE_CONFIG"
#: The Hydra overrides, a JSON list of strings (`["cluster.train_worker_num=4"]`): any override text survives it.
OVERRIDES_ENV = "RLPLACE_OVERRIDES"


def driver_environment(config: str | os.PathLike, overrides: Sequence[str]) -> dict[str, str]:
    """The variables `rlplace run` adds to its command's environment so that `connect()` finds the job."""
    return {CONFIG_ENV: str(pathlib.Path(config).resolve()), OVERRIDES_ENV: json.dumps(list(overrides))}


def load_driver_config(environ: Mapping[str, str] | None = None) -> JobSpec:
    """The config `rlplace run` planned, from $RLPLACE_CONFIG and $RLPLACE_OVERRIDES; an RlplaceError saying what
    to do when the process was not started by `rlplace run`."""
    from rlplace.config import load

    environ = os.environ if environ is None else environ
    config = environ.get(CONFIG_ENV, "")
    if not config:
        raise RlplaceError(
            f"rlplace.connect() was given no config and ${CONFIG_ENV} is not set: pass one "
            "(`rlplace.connect('job.yaml')`), or start this script with `rlplace run job.yaml -- python SCRIPT`, "
            f"which sets ${CONFIG_ENV} to the config it planned"
        )
    text = environ.get(OVERRIDES_ENV) or "[]"
    try:
        overrides = json.loads(text)
    except ValueError:
        overrides = None
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise RlplaceError(
            f"${OVERRIDES_ENV} must be a JSON list of override strings, as `rlplace run` writes it "
            f'(["cluster.train_worker_num=4"]), got {text!r}'
        )
    return load(pathlib.Path(config), overrides=overrides)
