"""`rlplace start`: `ray start` on this node, labelled with its node rank and accelerator model.

The labels are what makes node ranks real: the live inventory numbers nodes by them and placement
groups select nodes by them. The rank comes from `--node-rank`, else RLPLACE_NODE_RANK, else
RLINF_NODE_RANK (so RLinf users switch without edits). Exclusive hardware attached to the node (a
robot) is advertised as a custom resource so no other job can take it. Ray is started with
RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 so that workers given no GPU see none. Everything after the
rlplace options and a `--` goes to `ray start` unchanged (`--labels` and `--resources` are merged).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.plan import hardware_resource_name
from rlplace.ray.labels import (
    ACCELERATOR_LABEL,
    HIDE_GPUS_ENV,
    NODE_RANK_ENV_VARS,
    NODE_RANK_LABEL,
    SPARE_LABEL,
    is_label_value,
    label_value,
)

#: `ray start --head` listens here unless `--port` says otherwise.
DEFAULT_RAY_PORT = 6379


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "start",
        help="start Ray on this node, labelled with its node rank and accelerator",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("--node-rank", help=f"this node's rank (default: ${' / $'.join(NODE_RANK_ENV_VARS)})")
    role = p.add_mutually_exclusive_group(required=True)
    role.add_argument("--head", action="store_true", help="start the head node")
    role.add_argument("--address", metavar="HOST:PORT", help="join the cluster whose head is at HOST:PORT")
    p.add_argument("--accelerator", help="accelerator model label (default: detected with nvidia-smi)")
    p.add_argument(
        "--hardware",
        action="append",
        default=[],
        metavar="TYPE:INDEX",
        help="exclusive hardware attached here, as ranked in its node group (e.g. franka:0); repeatable",
    )
    # -- hot spares (issue 11) --
    p.add_argument(
        "--spare",
        action="store_true",
        help="join as a hot spare: no rank and no work until a ranked node with the same GPUs is lost, then its "
        "workers move here (see docs/ray.md)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the ray start command instead of running it")
    p.add_argument("ray_args", nargs=argparse.REMAINDER, help="after `--`: further `ray start` options, passed through")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.spare:
        check_spare(args.node_rank, os.environ, args.head)
    rank = resolve_node_rank(args.node_rank, os.environ)
    accelerator = args.accelerator or detect_accelerator()
    ray = shutil.which("ray") or os.path.join(os.path.dirname(sys.executable), "ray")
    cmd = ray_start_command(
        head=args.head,
        address=args.address,
        node_rank=rank,
        accelerator=accelerator,
        hardware=args.hardware,
        ray_args=args.ray_args,
        ray=ray,
        spare=args.spare,
    )
    env = start_environment(os.environ)
    if args.dry_run:
        shown = " ".join(f"{k}={v}" for k, v in HIDE_GPUS_ENV.items())
        print(f"{shown} {shlex.join(cmd)}")
        return 0
    if not os.path.exists(ray):
        raise RlplaceError(f"the `ray` command is not installed next to {sys.executable} nor on PATH")
    check_can_start(head=args.head, address=args.address, ray_args=args.ray_args)
    return subprocess.run(cmd, env=env, check=False).returncode


def check_can_start(*, head: bool, address: str | None, ray_args: Sequence[str]) -> None:
    """Refuse within seconds what `ray start` would answer with a traceback (a head whose port is taken)
    or with minutes of retries (a worker whose head is unreachable)."""
    from rlplace.ray.cluster import reachable_address

    if not head:
        hint = "start the head first (`rlplace start --head --node-rank 0` on it) and check HOST:PORT"
        reachable_address(address or "", hint=hint)
        return
    from rlplace.ray import _compat

    port = _take_option([a for a in ray_args if a != "--"], "--port")[0] or str(DEFAULT_RAY_PORT)
    ip = _compat.node_ip_address()
    try:
        socket.create_connection((ip, int(port)), timeout=2.0).close()
    except (OSError, ValueError):
        return  # nothing listens there: the head can start
    here = f"{ip}:{port}"
    if here in _compat.gcs_addresses_on_this_machine():
        raise RlplaceError(
            f"Ray already runs on this machine with its head at {here}, the port this head would take. Use that "
            f"cluster (`rlplace status --address {here}`; other nodes join it with `rlplace start --address "
            f"{here} --node-rank N`), stop it with `ray stop` (stops every Ray process of this machine), or start "
            f"a second head on another port: `rlplace start --head --node-rank 0 -- --port {int(port) + 1}`"
        )
    raise RlplaceError(
        f"port {port} on {ip} is taken by another program, so a Ray head cannot start there; pick a free port: "
        f"`rlplace start --head --node-rank 0 -- --port {int(port) + 1}`"
    )


def resolve_node_rank(cli_value: str | None, environ: Mapping[str, str]) -> int | None:
    """The node rank from the command line, else from the environment; None when none is given."""
    sources = [("--node-rank", cli_value)] + [(f"${k}", environ.get(k)) for k in NODE_RANK_ENV_VARS]
    given = [(where, value.strip()) for where, value in sources if value is not None and value.strip() != ""]
    if not given:
        return None
    where, value = given[0]
    if not value.isdigit():
        raise ConfigError(Problem(path=where, value=value, message="a node rank is an integer 0, 1, 2, ..."))
    env_values = {v for w, v in given if w.startswith("$")}
    if where.startswith("$") and len(env_values) > 1:
        shown = ", ".join(f"{w}={v}" for w, v in given)
        raise ConfigError(Problem(path=where, value=value, message=f"the environment disagrees on the rank: {shown}"))
    return int(value)


def check_spare(cli_rank: str | None, environ: Mapping[str, str], head: bool) -> None:
    """A spare has no rank (it takes the rank of the node it replaces) and is never the head (the head holds the
    cluster's state; losing it ends the cluster, so there is nothing to take over)."""
    if head:
        raise ConfigError(Problem(path="--spare", value=True, message="the head node cannot be a spare; use --address"))
    given = [("--node-rank", cli_rank)] + [(f"${k}", environ.get(k)) for k in NODE_RANK_ENV_VARS]
    for where, value in given:
        if value is not None and value.strip():
            raise ConfigError(
                Problem(
                    path=where,
                    value=value,
                    message="a spare carries no node rank (it takes over a lost node's rank); drop the rank or --spare",
                )
            )


def detect_accelerator(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str | None:
    """The first GPU's model from nvidia-smi ('NVIDIA A800-SXM4-80GB' -> 'A800-SXM4-80GB'), or None."""
    try:
        out = run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    if not names:
        return None
    words = [w for w in names[0].split() if w.upper() not in ("NVIDIA", "GEFORCE", "TESLA")]
    return label_value("".join(words[:1]) + "".join(f"-{w}" for w in words[1:]) if words else names[0])


def ray_start_command(
    *,
    head: bool,
    address: str | None,
    node_rank: int | None,
    accelerator: str | None,
    hardware: Sequence[str] = (),
    ray_args: Sequence[str] = (),
    ray: str = "ray",
    spare: bool = False,
) -> list[str]:
    """The `ray start` command line: role, merged `--labels` and `--resources`, then the user's options."""
    rest = [a for a in ray_args if a != "--"]
    user_labels, rest = _take_option(rest, "--labels")
    user_resources, rest = _take_option(rest, "--resources")
    labels = _parse_labels(user_labels)
    ours = {NODE_RANK_LABEL: None if node_rank is None else str(node_rank), ACCELERATOR_LABEL: accelerator}
    if spare:
        ours[SPARE_LABEL] = "true"
    for key, value in ours.items():
        if value is None:
            continue
        if key in labels and labels[key] != value:
            raise ConfigError(
                Problem(path="--labels", value=labels[key], message=f"{key} is set by rlplace start to {value!r}")
            )
        if not is_label_value(value):
            raise ConfigError(Problem(path=key, value=value, message="not a valid Ray label value"))
        labels[key] = value
    resources = _parse_resources(user_resources)
    resources.update({_hardware_resource(h): 1.0 for h in hardware})
    cmd = [ray, "start", "--head" if head else f"--address={address}"]
    if labels:
        cmd.append("--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    if resources:
        cmd.append("--resources=" + json.dumps(resources, separators=(",", ":")))
    return cmd + rest


def start_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment for `ray start`: the caller's, with GPU hiding for GPU-less workers switched on."""
    return {**HIDE_GPUS_ENV, **environ}


def _take_option(args: list[str], name: str) -> tuple[str | None, list[str]]:
    """Remove `name VALUE` or `name=VALUE` from `args`; return the value and the remaining args."""
    for i, arg in enumerate(args):
        if arg == name:
            if i + 1 >= len(args):
                raise ConfigError(Problem(path=name, value=None, message="needs a value"))
            return args[i + 1], args[:i] + args[i + 2 :]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1], args[:i] + args[i + 1 :]
    return None, args


def _parse_labels(text: str | None) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(Problem(path="--labels", value=item, message="each label is KEY=VALUE"))
        labels[key.strip()] = value.strip()
    return labels


def _parse_resources(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(Problem(path="--resources", value=text, message=f"not JSON: {e}")) from e
    if not isinstance(parsed, dict):
        raise ConfigError(Problem(path="--resources", value=text, message="a JSON object of name: amount"))
    return {str(k): float(v) for k, v in parsed.items()}


def _hardware_resource(item: str) -> str:
    kind, sep, index = item.partition(":")
    if not sep or not kind or not index.isdigit():
        message = "expected TYPE:INDEX, e.g. franka:0 (INDEX: its rank in its node group)"
        raise ConfigError(Problem(path="--hardware", value=item, message=message))
    return hardware_resource_name(kind, int(index))
