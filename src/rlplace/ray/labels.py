"""The node labels rlplace sets and reads, defined once (no Ray import: `rlplace start` uses it too).

`rlplace start` writes them with `ray start --labels`; `rlplace.ray.join` reads them back to number
the nodes; placement-group bundles select nodes with them. Keys and values follow the Kubernetes label
rules Ray enforces (63 characters, alphanumeric at both ends, `-_.` inside).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

NODE_RANK_LABEL = "rlplace/node-rank"
ACCELERATOR_LABEL = "rlplace/accelerator"
#: A hot spare (`rlplace start --spare`): no rank, no work, until a ranked node is lost and the job moves that
#: node's workers onto it. Value "true".
SPARE_LABEL = "rlplace/spare"
#: A node of a cluster rlplace simulates on this machine (`rlplace run --simulate`, `rlplace demo`,
#: `rlplace.simulated_cluster`): an embedded cluster, started and stopped by one run. Value "true".
SIMULATED_LABEL = "rlplace/simulated"
#: Ray sets this label on every node itself; used to pin bundles when the nodes carry no rank labels.
RAY_NODE_ID_LABEL = "ray.io/node-id"

#: Environment variables that give a node its rank at start-up, in order of precedence
#: (RLINF_NODE_RANK so RLinf users can switch without edits).
NODE_RANK_ENV_VARS = ("RLPLACE_NODE_RANK", "RLINF_NODE_RANK")

#: Set in the environment of `ray start` so that Ray blanks CUDA_VISIBLE_DEVICES for workers that got
#: no GPU (by default Ray 2.60 leaves it untouched, and a CPU-only worker sees every GPU of its node).
HIDE_GPUS_ENV = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "1"}

#: Ray's switch that keeps a loopback node address: Ray 2.60 otherwise replaces 127.0.0.1 by this machine's address
#: (`ray start --node-ip-address`, `ray.init`), and its GCS and raylets listen on every address the machine has.
#: Off ("0"), Ray runs a one-machine cluster on 127.0.0.1 only, and a client of this machine needs it off too.
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.\-]{0,61}[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """Turn free text (a GPU name such as 'NVIDIA GeForce RTX 4090') into a valid label value."""
    value = re.sub(r"[^A-Za-z0-9_.\-]+", "-", text.strip()).strip("-_.")[:63].strip("-_.")
    if not _LABEL_VALUE.match(value):
        raise ValueError(f"cannot make a node label value out of {text!r}")
    return value


def is_label_value(text: str) -> bool:
    return bool(_LABEL_VALUE.match(text))


#: The environment a node was started with, as far as placement reads it (the variables of RLinf's hardware
#: types: `ROBOT_IP`, `CAMERA_SERIALS`, ...): `rlplace start` publishes each one set as labels
#: `rlplace/env.<NAME>.<i>`, and the live inventory reads them back into `Node.env` (`node_env`). A label value
#: holds 63 of [A-Za-z0-9._-], so the value is written as "x" and the hex of its bytes, 31 bytes a label.
ENV_LABEL_PREFIX = "rlplace/env."
_ENV_CHUNK = 31


def node_env_labels(environ: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The labels that publish the variables `names` of `environ` that are set."""
    out: dict[str, str] = {}
    for name in names:
        if name in environ:
            data = environ[name].encode()
            parts = [data[i : i + _ENV_CHUNK] for i in range(0, len(data), _ENV_CHUNK)] or [b""]
            out.update({f"{ENV_LABEL_PREFIX}{name}.{j}": "x" + part.hex() for j, part in enumerate(parts)})
    return out


def node_env(labels: Mapping[str, str]) -> dict[str, str]:
    """The variables a node's labels publish (`node_env_labels` read back); labels of another shape are skipped."""
    parts: dict[str, dict[int, bytes]] = {}
    for key, value in labels.items():
        if not key.startswith(ENV_LABEL_PREFIX) or not value.startswith("x"):
            continue
        name, _, index = key[len(ENV_LABEL_PREFIX) :].rpartition(".")
        try:
            parts.setdefault(name, {})[int(index)] = bytes.fromhex(value[1:])
        except ValueError:
            continue
    return {name: b"".join(p[i] for i in sorted(p)).decode(errors="replace") for name, p in parts.items()}
