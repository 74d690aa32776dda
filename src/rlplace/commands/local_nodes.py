"""The Ray nodes `rlplace start` started on this machine: a record for each, and stopping exactly their processes.

`ray start` detaches its daemons (GCS, raylet, dashboard, monitors), and the raylet later forks the workers, so
no pid known at start covers them all. Instead every process of one start carries a marker in its environment,
inherited from `ray start`: RLPLACE_STARTED_NODE=<id>. The record (~/.rlplace/started/<id>.json, one per node,
with the host name, so a home directory shared by the nodes of a cluster works) holds that id; stopping a node
ends the processes of this machine carrying its id, and nothing else: not the Ray processes of another user, of
another `rlplace start`, or of a test's simulated cluster. Linux: the environment is read from /proc.

The order is the one `ray stop` uses (raylet, then the other processes, then the GCS, each given a grace period
after SIGTERM, then SIGKILL): a GCS stopped together with its raylet leaves both waiting on each other.

A record is read as untrusted input (`read_records`): by the config's hardened reader, as a regular file of its
owner's in a folder only its owner may write, with an id of `new_record`'s form that names its own file. Anything
else is ignored with a line saying why, and never acted on: an id like `../../../../tmp/victim` once made
`stop` delete /tmp/victim.json. Records are written atomically, readable by their owner only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import stat
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from rlplace.errors import ConfigError, RlplaceError
from rlplace.output_files import write_file

#: The environment variable that marks every process of one `rlplace start`.
MARKER_ENV = "RLPLACE_STARTED_NODE"
#: How long `stop` waits, in all, for processes to end after SIGTERM before it sends SIGKILL.
GRACE_S = 15.0
#: A record's id, as `new_record` makes them: it names the record's file and the processes' marker.
_ID = re.compile(r"[0-9a-f]{12}")
ROLES = ("head", "node", "spare")
#: A record is a few hundred bytes; a larger file is no record.
_MAX_RECORD_BYTES = 64 * 1024


@dataclass(frozen=True)
class NodeRecord:
    """What `rlplace start` records about a node it started (read back by `rlplace stop`)."""

    id: str
    host: str
    role: str  # "head", "node", "spare"
    address: str  # the head's GCS address (of the cluster it joined, for a node)
    started_at: float
    token_file: str | None = None
    pids: list[int] = field(default_factory=list)  # the processes found right after start, for the user to see

    @property
    def path(self) -> Path:
        if not _ID.fullmatch(self.id):
            raise RlplaceError(f"{self.id!r} is not a node record's id (12 hex digits); no file is named by it")
        return records_dir() / f"{self.id}.json"

    def save(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_file(self.path, json.dumps(asdict(self), indent=2) + "\n", mode=0o600)

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        what = "the head" if self.role == "head" else f"the {self.role} of the cluster at"
        return f"{what} {self.address} (started {when}, id {self.id})"


@dataclass(frozen=True)
class Stopped:
    """What `stop` ended: every process as (pid, name), and those that needed SIGKILL."""

    record: NodeRecord
    processes: list[tuple[int, str]]
    killed: list[tuple[int, str]]


def records_dir() -> Path:
    return Path.home() / ".rlplace" / "started"


def new_record(role: str, address: str, token_file: str | None) -> NodeRecord:
    return NodeRecord(uuid.uuid4().hex[:12], socket.gethostname(), role, address, time.time(), token_file)


def records_here() -> list[NodeRecord]:
    """The records of nodes started on this host, oldest first (files that are no valid record are ignored)."""
    return read_records()[0]


def read_records() -> tuple[list[NodeRecord], list[str]]:
    """The records of nodes started on this host, oldest first, and a line for each file ignored and why."""
    folder = records_dir()
    try:
        where = os.lstat(folder)
    except FileNotFoundError:
        return [], []
    unsafe = _unsafe(where, "folder")
    if unsafe is not None:
        return [], [f"ignored every record in {folder}: it {unsafe}"]
    host = socket.gethostname()
    found, ignored = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            record = _record(path)
        except (ConfigError, ValueError) as e:
            ignored.append(f"ignored {path}: {_why(e)}; remove it if rlplace did not write it")
            continue
        if record.host == host:
            found.append(record)
    return sorted(found, key=lambda r: r.started_at), ignored


def _record(path: Path) -> NodeRecord:
    """The record in `path`, checked; ValueError (or the reader's ConfigError) says why it is none."""
    from rlplace.config.files import load_yaml_file  # the one hardened reader of YAML and JSON

    unsafe = _unsafe(os.lstat(path), "file")
    if unsafe is not None:
        raise ValueError(unsafe)
    data, _ = load_yaml_file(path, kind="node record", limit=_MAX_RECORD_BYTES)
    names = {f.name for f in fields(NodeRecord)}
    if not isinstance(data, dict) or not {"id", "host", "role", "address", "started_at"} <= data.keys() <= names:
        raise ValueError(f"it is not a node record (keys {', '.join(sorted(names))})")
    record = NodeRecord(**data)
    if not isinstance(record.id, str) or not _ID.fullmatch(record.id) or path.name != f"{record.id}.json":
        raise ValueError(f"its id {record.id!r} is not the 12 hex digits of its file name")
    texts = (record.host, record.address) + ((record.token_file,) if record.token_file is not None else ())
    if record.role not in ROLES or not all(isinstance(t, str) for t in texts):
        raise ValueError("its role, host, address or token file is not what rlplace start writes")
    numbers = isinstance(record.started_at, int | float) and isinstance(record.pids, list)
    if not numbers or not all(isinstance(pid, int) and not isinstance(pid, bool) for pid in record.pids):
        raise ValueError("its start time or pids are not numbers")
    return record


def _unsafe(st: os.stat_result, what: str) -> str | None:
    """Why a records folder or file cannot be trusted (None: it can): a link, not yours, writable by others."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if what == "file" and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != os.getuid():
        return "belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "may be written by other users"
    return None


def _why(e: Exception) -> str:
    if isinstance(e, ConfigError):
        return "; ".join(p.message for p in e.problems)
    return str(e)


def marked_processes(variable: str, value: str) -> list[tuple[int, str]]:
    """(pid, name) of every live process of this machine whose environment holds `variable=value`, except this
    process; processes of other users, whose environment cannot be read, are not looked at."""
    if not Path("/proc/self/environ").exists():
        raise RlplaceError(
            "finding the processes of a node needs Linux's /proc; stop Ray here with `ray stop` (it ends every Ray "
            "process of this machine)"
        )
    wanted = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0") and running(int(entry.name)):
                found.append((int(entry.name), (entry / "comm").read_text().strip()))
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def stop(record: NodeRecord, grace_s: float = GRACE_S) -> Stopped:
    """End every process of `record`'s node and forget the record."""
    processes, killed = end_marked(MARKER_ENV, record.id, grace_s)
    record.forget()
    return Stopped(record, processes, killed)


def end_marked(
    variable: str, value: str, grace_s: float = GRACE_S
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """End the processes marked `variable=value` in Ray's order (raylet, the others, the GCS); returns them all and
    those that needed SIGKILL, as (pid, name)."""
    seen: dict[int, str] = {}
    killed: list[tuple[int, str]] = []
    for bucket in ("raylet", None, "gcs_server"):
        processes = [(pid, name) for pid, name in marked_processes(variable, value) if _in(bucket, name)]
        seen.update(processes)
        killed += end(processes, grace_s / 3)
    left = marked_processes(variable, value)  # a worker forked meanwhile
    seen.update(left)
    killed += end(left, 0.0)
    return sorted(seen.items()), killed


def end(processes: Iterable[tuple[int, str]], grace_s: float) -> list[tuple[int, str]]:
    """SIGTERM each process, wait up to `grace_s` for all to end, SIGKILL the rest; returns those killed."""
    processes = list(processes)
    for pid, _ in processes:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(running(pid) for pid, _ in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = [(pid, name) for pid, name in processes if running(pid)]
    for pid, _ in killed:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while any(running(pid) for pid, _ in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    return killed


def _in(bucket: str | None, name: str) -> bool:
    return name == bucket if bucket else name not in ("raylet", "gcs_server")


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def running(pid: int) -> bool:
    """Running, not a zombie waiting for its parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
