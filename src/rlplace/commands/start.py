"""`rlplace start`: `ray start` on this node, labelled with its node rank and accelerator model.

The labels are what makes node ranks real: the live inventory numbers nodes by them and placement
groups select nodes by them. The rank comes from `--node-rank`, else RLPLACE_NODE_RANK, else
RLINF_NODE_RANK (so RLinf users switch without edits). Exclusive hardware attached to the node (a
robot) is advertised as a custom resource so no other job can take it, and the variables its robots are
enumerated from (`ROBOT_IP`, `CAMERA_SERIALS`, `CAN_INTERFACE`, ... as RLinf reads them) are published as
labels for live plans. Ray is started with
RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 so that workers given no GPU see none. Everything after the
rlplace options and a `--` goes to `ray start` unchanged (`--labels` and `--resources` are merged).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import pathlib
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from rlplace.commands import local_nodes
from rlplace.config.hardware import env_var_names
from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.model import DEFAULT_TOPOLOGY, NVLINK_DOMAIN, RACK
from rlplace.plan import hardware_resource_name
from rlplace.printable import printable
from rlplace.ray import auth, token_file
from rlplace.ray.labels import (
    ACCELERATOR_LABEL,
    HIDE_GPUS_ENV,
    LOOPBACK_ENV,
    NODE_RANK_ENV_VARS,
    NODE_RANK_LABEL,
    SPARE_LABEL,
    is_label_value,
    label_value,
    node_env_labels,
)

#: `ray start --head` listens here unless `--port` says otherwise.
DEFAULT_RAY_PORT = 6379
#: `--node-ip-address` values that confine a head to this machine (`LOOPBACK_ENV`).
LOOPBACK = ("127.0.0.1", "localhost")
#: Ray's advice at the end of `ray start` (`ray stop`, which ends every Ray process of this machine), left out of
#: its output, and rlplace's, which the report ends with.
RAY_STOP_ADVICE = "To terminate the Ray runtime, run"
STOP_ADVICE = "Stop this node: rlplace stop (not `ray stop`, which ends every Ray process of this machine)"


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
    # -- topology (issue 23): the labels the planner reads a node's NVLink domain, rack and zone from --
    p.add_argument("--rack", help=f'this node\'s rack: the label {RACK_LABEL}=RACK (docs/guide.md, "Topology")')
    p.add_argument(
        "--nvlink-domain", metavar="DOMAIN", help=f"this node's NVLink domain: the label {DOMAIN_LABEL}=DOMAIN"
    )
    p.add_argument(
        "--zone", help=f"this node's zone: Ray's own label {ZONE_LABEL}, set through {ZONE_ENV} for ray start"
    )
    # -- hot spares (issue 11) --
    p.add_argument(
        "--spare",
        action="store_true",
        help="join as a hot spare: no rank and no work until a ranked node with the same GPUs is lost, then its "
        "workers move here (see docs/ray.md)",
    )
    # -- token authentication (issue 19) --
    p.add_argument(
        "--token-file",
        type=auth.absolute_path,
        metavar="PATH",
        help="the cluster's token: a head requires the one in PATH (created with a new token when missing), a "
        "node joining presents it (default: $RAY_AUTH_TOKEN, else $RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="head only: start without token authentication, so anyone who can reach the cluster's ports can run "
        "code on its nodes",
    )
    p.add_argument("--dry-run", action="store_true", help="print the ray start command instead of running it")
    p.add_argument("ray_args", nargs=argparse.REMAINDER, help="after `--`: further `ray start` options, passed through")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.spare:
        check_spare(args.node_rank, os.environ, args.head)
    check_auth_options(args.head, args.insecure, args.token_file, os.environ)
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
        env_labels=node_env_labels(os.environ, env_var_names()),
        topology=topology_labels(args.rack, args.nvlink_domain),
    )
    zone = zone_environment(args.zone)
    if args.dry_run:
        shown = {**HIDE_GPUS_ENV, **zone, **(_planned_head_auth(args) if args.head else {})}
        print(printable(" ".join(f"{k}={v}" for k, v in shown.items() if v is not None)), printable(shlex.join(cmd)))
        return 0
    if not os.path.exists(ray):
        raise RlplaceError(f"the `ray` command is not installed next to {sys.executable} nor on PATH")
    node_ip = _take_option([a for a in args.ray_args if a != "--"], "--node-ip-address")[0]
    loopback = args.head and node_ip in LOOPBACK
    address = check_can_start(head=args.head, address=args.address, ray_args=args.ray_args, node_ip=node_ip)
    token, created = None, False
    if args.head and not args.insecure:
        token, created = auth.token_for_head(os.environ, args.token_file)
    if args.head:
        access = auth.Access(address, requires_token=token is not None, token=token)
    else:
        access = auth.check_access(address, os.environ, args.token_file, fix=NODE_FIX)
        auth.check_mode(access, os.environ.get(auth.MODE_ENV))
    role = "head" if args.head else "spare" if args.spare else "node"
    token_path = access.token.path if access.token else None
    record = local_nodes.new_record(role, address, str(token_path) if token_path else None)
    added = {**auth.ray_start_environment(access.token), **zone, local_nodes.MARKER_ENV: record.id}
    if loopback:
        added[LOOPBACK_ENV] = "0"
    report = head_report(access, created, node_ip) if args.head else node_report(access)
    block = "--block" in args.ray_args
    if block:  # `ray start --block` returns only when the node ends: say how to join it now
        print(printable(report), file=sys.stdout if access.requires_token else sys.stderr, flush=True)
    code = run_recorded(cmd, start_environment(os.environ, added), record, block=block)
    if code == 0 and not block:
        print(printable(report), file=sys.stdout if access.requires_token else sys.stderr)
    return code


#: What a node is told to do when it lacks the cluster's token.
NODE_FIX = (
    "pass --token-file FILE, a copy of the head's token file (`rlplace start --head` printed its path), or set "
    f"{auth.TOKEN_PATH_ENV}=FILE"
)


def check_auth_options(head: bool, insecure: bool, token_file: pathlib.Path | None, environ: Mapping[str, str]) -> None:
    """--insecure is for a head, and says the opposite of --token-file; RAY_AUTH_MODE=disabled alone does not open a
    head (that takes --insecure, so it is never an accident)."""
    if insecure and not head:
        raise ConfigError(
            Problem(path="--insecure", value=True, message="only a head is started open; a node takes the head's mode")
        )
    if insecure and token_file is not None:
        raise ConfigError(
            Problem(path="--insecure", value=True, message=f"contradicts --token-file {token_file}: drop one of them")
        )
    mode = environ.get(auth.MODE_ENV, "").strip().lower()
    if head and not insecure and mode == "disabled":
        raise ConfigError(
            Problem(
                path=f"${auth.MODE_ENV}",
                value=environ[auth.MODE_ENV],
                message="rlplace start --head requires a token unless --insecure is given; unset it, or pass "
                "--insecure to start an open cluster",
            )
        )


def _planned_head_auth(args: argparse.Namespace) -> dict[str, str | None]:
    """The token environment `--dry-run` shows for a head (nothing is created; the token itself is never shown)."""
    if args.insecure:
        return auth.ray_start_environment(None)
    path = auth.head_token_path(os.environ, args.token_file)
    return {auth.MODE_ENV: "token", auth.TOKEN_ENV: f"<the token in {path}>" if path else f"<${auth.TOKEN_ENV}>"}


def run_recorded(cmd: list[str], env: dict[str, str], record: local_nodes.NodeRecord, *, block: bool) -> int:
    """Run `ray start` with the node recorded for `rlplace stop`; whatever a failed (or interrupted, or ended
    `--block`) start leaves running is stopped, so no half-started raylet stays behind."""
    record.save()
    try:
        code = ray_start(cmd, env)
    except BaseException:
        local_nodes.stop(record)
        raise
    if code != 0 or block:
        stopped = local_nodes.stop(record)
        if code != 0 and stopped.processes:
            names = ", ".join(f"{name} {pid}" for pid, name in stopped.processes)
            print(f"rlplace: `ray start` failed; stopped what it had started: {names}", file=sys.stderr)
        return code
    with contextlib.suppress(RlplaceError):  # the pids are for the user to see; /proc may be missing (not Linux)
        pids = [pid for pid, _ in local_nodes.marked_processes(local_nodes.MARKER_ENV, record.id)]
        dataclasses.replace(record, pids=sorted(pids)).save()
    return code


def ray_start(cmd: list[str], env: dict[str, str]) -> int:
    """`ray start`, its output passed through line by line, except Ray's advice to stop the node with `ray stop`,
    which ends every Ray process of this machine (other users' nodes, other starts): rlplace's report says how.
    On a terminal Ray keeps its pretty style (it writes timestamped records into a pipe)."""
    if sys.stdout.isatty() and not any(a.startswith("--log-style") for a in cmd):
        cmd = [*cmd, "--log-style=pretty", "--log-color=true"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdout is not None
    try:
        held: str | None = None
        for line in proc.stdout:
            if held is not None:
                line = "" if line.strip().endswith("ray stop") else held + line
                held = None
            elif line.rstrip().endswith(RAY_STOP_ADVICE):
                held = line
                continue
            sys.stdout.write(line)
            sys.stdout.flush()
        if held is not None:
            sys.stdout.write(held)
        return proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def head_report(access: auth.Access, created: bool, node_ip: str | None = None) -> str:
    """What the user needs after `rlplace start --head`: how nodes and clients get in (never the token itself);
    for a head on 127.0.0.1 (`-- --node-ip-address 127.0.0.1`), that it runs alone and how clients of this machine
    reach it."""
    join = f"rlplace start --address {access.address} --node-rank N"
    if node_ip in LOOPBACK:
        return _loopback_report(access)
    listens = (
        ""
        if node_ip is None
        else f"\nnote: Ray's GCS and raylets listen on every address of this machine, whatever --node-ip-address "
        f"{node_ip} says (only 127.0.0.1 confines them)"
    )
    if not access.requires_token:
        return (
            f"warning: --insecure: the Ray cluster at {access.address} requires no token. Anyone who can reach its "
            "ports can join a node or connect a client and run any code on every node, as the user who started Ray, "
            "and read its data (how Ray clusters were taken over in the wild, CVE-2023-48022). Use it only on a "
            f"network you trust.\nA node joins with: {join}{listens}\n{STOP_ADVICE}"
        )
    token = access.token
    assert token is not None
    if token.path is None:
        where = f"the token is the value of ${auth.TOKEN_ENV} here: give every node and client the same one"
        node, client = join, f"{auth.TOKEN_ENV}=(the same value) rlplace status --address {access.address}"
    else:
        state = "created now" if created else "as found"
        source = "" if token.source == str(token.path) else f", {token.source}"
        where = f"token file: {token.path} ({state}{source}; rlplace never prints the token)"
        node = f"{join} --token-file {token.path}"
        client = f"{auth.TOKEN_PATH_ENV}={token.path} rlplace status --address {access.address}"
        if token.path.exists() and auth.readable_by_others(token.path):
            real = token_file.real_file(token.path)
            links = "" if real == token.path.absolute() else f" (which {token.path} links to)"
            where += f"\nwarning: other users can read {real}{links}: `chmod 600 {real}`"
        where += "".join(f"\nwarning: {note}" for note in token.notes)
    return (
        f"rlplace: the Ray cluster at {access.address} requires its token (Ray token authentication).\n"
        f"{where}\n"
        f"A node joins with (a copy of the token file on it, or a shared one):\n  {node}\n"
        f"Clients (rlplace run/status/plan, rlplace.connect) find the token where Ray looks for it, e.g.:\n  {client}"
        f"{listens}\n{STOP_ADVICE}"
    )


def _loopback_report(access: auth.Access) -> str:
    """A head on 127.0.0.1: Ray runs it as a one-machine cluster listening on loopback only (`LOOPBACK_ENV`)."""
    token = access.token
    env = f"{LOOPBACK_ENV}=0" + (f" {auth.TOKEN_PATH_ENV}={token.path}" if token and token.path else "")
    return (
        f"rlplace: the Ray cluster at {access.address} listens on 127.0.0.1 only: a one-machine cluster, which no "
        f"other node can join ({'it requires its token' if access.requires_token else 'no token: --insecure'}).\n"
        f"Clients on this machine set {LOOPBACK_ENV}=0 (Ray's switch that keeps 127.0.0.1 as their address), e.g.:\n"
        f"  {env} rlplace status --address {access.address}\n{STOP_ADVICE}"
    )


def node_report(access: auth.Access) -> str:
    if access.requires_token and access.token is not None:
        return (
            f"rlplace: the Ray cluster at {access.address} requires a token; this node presents the one from "
            f"{access.token.source}, which it accepts."
        )
    return (
        f"warning: the Ray cluster at {access.address} requires no token: anyone who can reach its ports can run "
        "code on every node, this one included. Restart its head with `rlplace start --head` to require one."
    )


def check_can_start(*, head: bool, address: str | None, ray_args: Sequence[str], node_ip: str | None = None) -> str:
    """Refuse within seconds what `ray start` would answer with a traceback (a head whose port is taken)
    or with minutes of retries (a worker whose head is unreachable). Returns the head's address (HOST:PORT): on
    `node_ip` (`--node-ip-address`) where given, else on the address Ray picks for this machine."""
    from rlplace.ray.join import reachable_address

    if not head:
        hint = "start the head first (`rlplace start --head --node-rank 0` on it) and check HOST:PORT"
        return reachable_address(address or "", hint=hint)
    from rlplace.ray import _compat

    port = _take_option([a for a in ray_args if a != "--"], "--port")[0] or str(DEFAULT_RAY_PORT)
    ip = "127.0.0.1" if node_ip in LOOPBACK else node_ip or _compat.node_ip_address()
    here = f"{ip}:{port}"
    try:
        socket.create_connection((ip, int(port)), timeout=2.0).close()
    except (OSError, ValueError):
        return here  # nothing listens there: the head can start
    if here in _compat.gcs_addresses_on_this_machine():
        raise RlplaceError(
            f"Ray already runs on this machine with its head at {here}, the port this head would take. Use that "
            f"cluster (`rlplace status --address {here}`; other nodes join it with `rlplace start --address "
            f"{here} --node-rank N`), stop it with `rlplace stop` if `rlplace start` started it (`ray stop` stops "
            f"every Ray process of this machine), or start a second head on another port: "
            f"`rlplace start --head --node-rank 0 -- --port {int(port) + 1}`"
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
    env_labels: Mapping[str, str] | None = None,
    topology: Mapping[str, str] | None = None,
) -> list[str]:
    """The `ray start` command line: role, merged `--labels` and `--resources`, then the user's options.
    `env_labels` publish the node's hardware environment (`ROBOT_IP`, ...; rlplace.ray.labels.node_env_labels);
    `topology`: the node's rack and NVLink-domain labels (`topology_labels`)."""
    rest = [a for a in ray_args if a != "--"]
    user_labels, rest = _take_option(rest, "--labels")
    user_resources, rest = _take_option(rest, "--resources")
    labels = _parse_labels(user_labels)
    ours = {NODE_RANK_LABEL: None if node_rank is None else str(node_rank), ACCELERATOR_LABEL: accelerator}
    ours.update(topology or {})
    if spare:
        ours[SPARE_LABEL] = "true"
    ours.update(env_labels or {})
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


#: The label keys `--rack` and `--nvlink-domain` set: the planner's default keys of those levels (cluster.topology).
RACK_LABEL = next(level.labels[0] for level in DEFAULT_TOPOLOGY if level.name == RACK)
DOMAIN_LABEL = next(level.labels[0] for level in DEFAULT_TOPOLOGY if level.name == NVLINK_DOMAIN)
#: Ray labels a node `ray.io/availability-zone` from this variable of `ray start`'s environment (it refuses `--labels`
#: keys under `ray.io/`), so `--zone` sets it there.
ZONE_LABEL, ZONE_ENV = "ray.io/availability-zone", "RAY_NODE_ZONE"


def topology_labels(rack: str | None, domain: str | None) -> dict[str, str]:
    """`{rack: RACK, nvlink-domain: DOMAIN}` for those given; a value Ray would refuse is a ConfigError."""
    out = {}
    for flag, key, value in (("--rack", RACK_LABEL, rack), ("--nvlink-domain", DOMAIN_LABEL, domain)):
        if value is None:
            continue
        if not is_label_value(value):
            raise ConfigError(
                Problem(
                    path=flag,
                    value=value,
                    message="not a Ray label value: at most 63 letters, digits and -_. , alphanumeric at both ends",
                )
            )
        out[key] = value
    return out


def zone_environment(zone: str | None) -> dict[str, str]:
    """`{RAY_NODE_ZONE: ZONE}` for `ray start` when `--zone` is given (checked as a label value)."""
    if zone is None:
        return {}
    if not is_label_value(zone):
        raise ConfigError(Problem(path="--zone", value=zone, message="not a Ray label value (letters, digits, -_.)"))
    return {ZONE_ENV: zone}


def start_environment(environ: Mapping[str, str], added: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The environment for `ray start`: the caller's, with GPU hiding for GPU-less workers switched on unless the
    caller says otherwise, and `added` on top (the token's variables, the node's marker; None removes one)."""
    env = {**HIDE_GPUS_ENV, **environ, **(added or {})}
    return {k: v for k, v in env.items() if v is not None}


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
