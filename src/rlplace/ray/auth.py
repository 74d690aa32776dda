"""Ray's token authentication as rlplace uses it: where the token is looked for, the token file a head creates,
and the check that every client and joining node makes before Ray would retry for 20 s.

What this relies on (Ray 2.60, measured; docs/ray.md "Token authentication"):
- a process's mode is RAY_AUTH_MODE (`token`, or `disabled`, the default), read into Ray's config when Ray is
  imported (re-read on request); its token is RAY_AUTH_TOKEN (stripped; empty counts as unset), else the file
  RAY_AUTH_TOKEN_PATH names (Ray aborts the process when that file is missing or empty), else ~/.ray/auth_token;
- a client without the cluster's token, or with a wrong one, retries for 20 s and ends in "Failed to connect to Ray
  cluster"; a node joining without it retries as long, then prints a traceback;
- a process in token mode without any token aborts (a failed C++ check, not an exception), and a driver in token
  mode on a cluster that requires none cannot start actors there: a client must take the cluster's mode;
- asking the GCS for its cluster id answers within milliseconds, with "Unauthenticated" when the token is missing
  or wrong: that is how `check_access` learns whether a cluster requires a token and whether ours is accepted.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rlplace.errors import ClusterAccessError, RlplaceError
from rlplace.ray import _compat
from rlplace.ray import token_file as token_file_module  # (`token_file` is the --token-file parameter's name)

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
#: Every variable of Ray's token authentication (tests keep them out of their own environment).
AUTH_ENV_VARS = (MODE_ENV, TOKEN_ENV, TOKEN_PATH_ENV)
#: What a client is told to do when it lacks the token.
CLIENT_FIX = (
    "copy the head's token file (`rlplace start --head` printed its path) to this machine and set "
    f"{TOKEN_PATH_ENV}=FILE, or put it at ~/.ray/auth_token"
)
#: The bound on asking a GCS for its cluster id (Ray alone waits 5 s twice, then 30 s, on a port that is no GCS).
_PROBE_CONNECT_S, _PROBE_ANSWER_S = 1, 3


class InsecureClusterWarning(UserWarning):
    """`connect` joined a cluster that requires no token although some of its nodes run on other hosts."""


class TokenFileWarning(UserWarning):
    """A token file that works but should be fixed: lines after the token (Ray ignores them), a group may write it."""


@dataclass(frozen=True)
class Token:
    """A token and where it was found, as the user would name it (`$RAY_AUTH_TOKEN_PATH=/x`); the value never
    appears in a repr or a message."""

    value: str = field(repr=False)
    source: str
    path: Path | None = None
    notes: tuple[str, ...] = ()  # what the user should fix about its file (token_file.read_file), said once


@dataclass(frozen=True)
class Access:
    """How this process gets into the cluster whose GCS is at `address`."""

    address: str
    requires_token: bool
    token: Token | None = None  # the token the cluster accepted, when it requires one

    def describe(self) -> str:
        if self.requires_token and self.token is not None:
            return f"requires a token (Ray token authentication); this process holds it, from {self.token.source}"
        if self.requires_token:
            return "requires a token (Ray token authentication)"
        return (
            "is OPEN: it requires no token, so anyone who can reach its ports can run code on its nodes "
            "(start it with `rlplace start --head` to require one)"
        )


# -- where the token is -----------------------------------------------------------------------------------------


def default_token_file() -> Path:
    """Ray's own default (`ray get-auth-token` and every Ray process look there last)."""
    return Path.home() / ".ray" / "auth_token"


def find_token(environ: Mapping[str, str], token_file: Path | None = None) -> Token | None:
    """The token in Ray's order of precedence ($RAY_AUTH_TOKEN, the file $RAY_AUTH_TOKEN_PATH names,
    ~/.ray/auth_token), preceded by `token_file` (`--token-file`) when given; None when there is none.

    A file named explicitly (`token_file`, $RAY_AUTH_TOKEN_PATH) that cannot be read or is empty is an error, as
    in Ray (which aborts the process); an empty or missing ~/.ray/auth_token just means no token. Every token is
    checked as `token_file` says (a file another user owns, a character Ray would abort on, ...)."""
    if token_file is not None:
        return _read_named(token_file, f"--token-file {token_file}")
    value = env_token(environ)
    if value is not None:
        return Token(value, f"${TOKEN_ENV}")
    named = environ.get(TOKEN_PATH_ENV, "")
    if named:
        return _read_named(absolute_path(named), f"${TOKEN_PATH_ENV}={named}")
    default = default_token_file()
    try:
        return _read_named(default, str(default), missing_ok=True)
    except FileNotFoundError:
        return None
    except ClusterAccessError as e:
        if str(e).startswith(f"{default}: the token file is empty"):
            return None  # as in Ray: an empty default file is no token
        raise


def env_token(environ: Mapping[str, str]) -> str | None:
    """$RAY_AUTH_TOKEN as Ray reads it: unset or empty is no token; anything else is the token, stripped of the
    whitespace Ray strips (token_file.RAY_WHITESPACE, not Python's wider set: a token ending in U+00A0 or U+001C is
    not the token Ray would send) and checked (token_file.check_value). A value of whitespace only is refused:
    Ray takes it for an empty token and aborts the process."""
    raw = environ.get(TOKEN_ENV, "")
    if not raw:
        return None
    value = raw.strip(token_file_module.RAY_WHITESPACE)
    if not value:
        raise ClusterAccessError(
            f"${TOKEN_ENV} holds only whitespace: Ray would take it for an empty token and abort the process; unset "
            "it, or set it to the cluster's token"
        )
    token_file_module.check_value(value, f"${TOKEN_ENV}")
    return value


def looked_at(environ: Mapping[str, str], token_file: Path | None = None) -> str:
    """Where `find_token` looked, in order, with what it found there: for messages when it found nothing."""
    places = [] if token_file is None else [f"--token-file {token_file} ({_file_state(token_file)})"]
    places.append(f"${TOKEN_ENV} ({'empty' if TOKEN_ENV in environ else 'unset'})")
    named = environ.get(TOKEN_PATH_ENV, "")
    places.append(f"${TOKEN_PATH_ENV} ({_file_state(Path(named)) if named else 'unset'})")
    default = default_token_file()
    places.append(f"{default} ({_file_state(default)})")
    return ", ".join(places)


def head_token_path(environ: Mapping[str, str], token_file: Path | None = None) -> Path | None:
    """The file holding the token a new head will require (None: the token is $RAY_AUTH_TOKEN's value):
    `--token-file`, else $RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token, as Ray looks for it.

    `--token-file` beside a token variable that names another token is refused: two sources would leave nodes and
    clients guessing which one counts."""
    if token_file is not None:
        given = [f"${v}" for v in (TOKEN_ENV, TOKEN_PATH_ENV) if environ.get(v, "")]
        if given and absolute_path(environ.get(TOKEN_PATH_ENV, "")) != token_file.absolute():
            raise ClusterAccessError(
                f"--token-file {token_file} and {' and '.join(given)} both name a token; drop one of them"
            )
        return token_file
    if environ.get(TOKEN_ENV, ""):
        return None
    named = environ.get(TOKEN_PATH_ENV, "")
    return absolute_path(named) if named else default_token_file()


def token_for_head(environ: Mapping[str, str], token_file: Path | None = None) -> tuple[Token, bool]:
    """The token a new head will require, and whether it was created now: the one `head_token_path` names, used as
    it is; a file named there that does not exist yet is created with a new random token (mode 0600)."""
    path = head_token_path(environ, token_file)
    if path is None:
        token = Token(env_token(environ) or "", f"${TOKEN_ENV}")
        token_file_module.head_check(token.value, token.source)
        return token, False
    named = environ.get(TOKEN_PATH_ENV, "")
    source = f"--token-file {path}" if token_file else f"${TOKEN_PATH_ENV}={named}" if named else str(path)
    if not os.path.lexists(path):
        return create_token_file(path, source), True
    token = _read_named(path, source)
    token_file_module.head_check(token.value, source)
    return token, False


def ray_start_environment(token: Token | None) -> dict[str, str | None]:
    """What `ray start` (and `rlplace run`'s command) gets added to (None: removed from) its environment so that it
    requires or presents `token` (None: no token, an open node): the mode, and the token's value as rlplace read
    and checked it. Never the file's path: Ray would read the file again later, and whoever may replace it meanwhile
    (a shared folder) would choose the token; and a relative path means another file in Ray's workers, which run
    elsewhere."""
    if token is None:
        return {MODE_ENV: "disabled"}
    return {MODE_ENV: "token", TOKEN_ENV: token.value, TOKEN_PATH_ENV: None}


def create_token_file(path: Path, source: str | None = None) -> Token:
    """Write a new random token (256 bits, as `ray get-auth-token --generate`) to `path`, readable by its owner
    only (0600; a directory created for it is 0700). Never overwrites a file."""
    value = secrets.token_hex(32)
    path = absolute_path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value)
    return Token(value, source or str(path), path)


def readable_by_others(path: Path) -> bool:
    """A token file that group or others may read lets them into the cluster too."""
    return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def _read_named(path: Path, source: str, *, missing_ok: bool = False) -> Token:
    """The token in the file `path` names (token_file.read_file's checks); a missing file is an error, as in Ray,
    unless `missing_ok` (then FileNotFoundError: ~/.ray/auth_token missing is no token)."""
    try:
        value, notes = token_file_module.read_file(path, source)
    except FileNotFoundError as e:
        if missing_ok:
            raise
        raise ClusterAccessError(
            f"{source}: cannot read the token file ({e.strerror}); fix the path (Ray itself aborts on a token path "
            "it cannot read)"
        ) from None
    return Token(value, source, absolute_path(path), notes)


def absolute_path(path: str | Path) -> Path:
    """A token path as every process must read it (also `--token-file`'s type): absolute, since `ray start` runs
    Ray's processes in other folders, where a relative path names another file or none (Ray's workers abort); links
    kept, so messages name the path the user gave."""
    return Path(os.path.abspath(path)) if str(path) else Path()


def _file_state(path: Path) -> str:
    """What is at `path`, for `looked_at` (never reading a FIFO or a device, which could hang or never end)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
        with path.open("rb") as f:
            return "present" if f.read(token_file_module.MAX_FILE_BYTES).strip() else "empty"
    except FileNotFoundError:
        return "no such file"
    except OSError as e:
        return e.strerror or type(e).__name__


# -- asking the cluster ------------------------------------------------------------------------------------------


def check_access(
    address: str, environ: Mapping[str, str], token_file: Path | None = None, *, fix: str = CLIENT_FIX
) -> Access:
    """Whether the cluster whose GCS is at `address` requires a token, and the token it accepts; within seconds.

    Raises ClusterAccessError naming where the token was looked for when the cluster requires one and none was
    found, or naming the token's source when the cluster refuses it. Leaves this process's Ray mode as it was."""
    if _gcs_accepts(address, None):
        return Access(address, requires_token=False)
    token = find_token(environ, token_file)
    for note in token.notes if token is not None else ():
        warnings.warn(note, TokenFileWarning, stacklevel=2)
    if token is None:
        raise ClusterAccessError(
            f"the Ray cluster at {address} requires a token and none was found: looked at "
            f"{looked_at(environ, token_file)}; {fix}"
        )
    if not _gcs_accepts(address, token):
        raise ClusterAccessError(
            f"the Ray cluster at {address} refused the token from {token.source}: it is not this cluster's token; {fix}"
        )
    return Access(address, requires_token=True, token=token)


#: RAY_AUTH_MODE and RAY_AUTH_TOKEN as `authenticate` set them, so that a later connection (to another cluster) does
#: not take them for the user's own settings.
_mode_set_here: str | None = None
_token_set_here: str | None = None


def authenticate(address: str) -> Access:
    """Check access to the cluster at `address` and put this process in the cluster's mode, for `ray.init`:
    RAY_AUTH_MODE=token when it requires a token (as Ray itself does when it joins a local cluster holding one), and
    RAY_AUTH_TOKEN the token checked here when it came from a file, which Ray would otherwise read again (and
    whoever can replace the file meanwhile would choose what this process presents)."""
    global _mode_set_here, _token_set_here
    user_mode = os.environ.get(MODE_ENV)
    if user_mode is not None and user_mode == _mode_set_here:
        user_mode = None
    if _token_set_here is not None and os.environ.get(TOKEN_ENV) == _token_set_here:
        del os.environ[TOKEN_ENV]
    _token_set_here = None
    access = check_access(address, os.environ)
    check_mode(access, user_mode)
    if user_mode is None:
        if access.requires_token:
            os.environ[MODE_ENV] = _mode_set_here = "token"
        elif _mode_set_here is not None:
            os.environ.pop(MODE_ENV, None)
            _mode_set_here = None
    if access.token is not None and access.token.path is not None:
        os.environ[TOKEN_ENV] = _token_set_here = access.token.value
    _compat.reload_auth_settings()
    return access


def check_mode(access: Access, user_mode: str | None) -> None:
    """Refuse a RAY_AUTH_MODE the user set that contradicts the cluster: token mode on an open cluster cannot start
    actors there, and disabled mode on a secured one cannot get in."""
    wanted = "token" if access.requires_token else "disabled"
    if user_mode is None or user_mode.strip().lower() == wanted:
        return
    if access.requires_token:
        source = access.token.source if access.token else "where Ray looks for it"
        raise ClusterAccessError(
            f"{MODE_ENV}={user_mode} is set here, but the Ray cluster at {access.address} requires a token: unset "
            f"{MODE_ENV} (the token from {source} is then used)"
        )
    raise ClusterAccessError(
        f"{MODE_ENV}={user_mode} is set here, but the Ray cluster at {access.address} does not require a token, and "
        f"a process in token mode cannot start actors on it: unset {MODE_ENV}"
    )


def connected_access(address: str) -> Access:
    """The access of a process already connected to the cluster at `address`: it is in the cluster's mode (a
    token-mode driver cannot work on an open cluster, and a driver without token cannot get into a secured one)."""
    return Access(address, requires_token=os.environ.get(MODE_ENV, "").strip().lower() == "token")


# -- telling the user -------------------------------------------------------------------------------------------

_warned: set[str] = set()


def open_cluster_warning(
    access: Access, node_addresses: Iterable[str | None], local_addresses: Iterable[str]
) -> str | None:
    """The warning for an open cluster with nodes on other hosts than this one (None when there is nothing to say):
    its GCS and raylets then listen on a network, where anyone who reaches them can run code on every node."""
    if access.requires_token:
        return None
    remote = sorted({a for a in node_addresses if a} - set(local_addresses) - {"127.0.0.1", "localhost", "::1"})
    if not remote:
        return None
    shown = ", ".join(remote[:3]) + (f" and {len(remote) - 3} more" if len(remote) > 3 else "")
    return (
        f"the Ray cluster at {access.address} requires no token, and it has nodes on other hosts ({shown}): anyone "
        "who can reach its ports can run code on every node. Restart it with `rlplace start --head` (token "
        "authentication, the default), or keep its network private"
    )


def warn_if_open(access: Access, node_addresses: Iterable[str | None], local_addresses: Iterable[str]) -> None:
    """Warn once per process and cluster (InsecureClusterWarning) when `open_cluster_warning` has something to say."""
    message = open_cluster_warning(access, node_addresses, local_addresses)
    if message is not None and access.address not in _warned:
        _warned.add(access.address)
        warnings.warn(message, InsecureClusterWarning, stacklevel=3)


def _gcs_accepts(address: str, token: Token | None) -> bool:
    """Whether the GCS at `address` answers a request carrying `token` (None: no token) with its cluster id.
    Bounded to ~5 s on a port that answers but is no GCS. Ray's log line about the refusal is kept off the
    terminal: the caller says what happened."""
    probe = {
        MODE_ENV: "token" if token else "disabled",
        TOKEN_ENV: token.value if token else None,
        TOKEN_PATH_ENV: None,
        "RAY_gcs_rpc_server_connect_timeout_s": str(_PROBE_CONNECT_S),
        "RAY_py_gcs_connect_timeout_s": str(_PROBE_ANSWER_S),
    }
    try:
        with _environ(probe), _ray_log_lines_hidden():
            try:
                return _compat.gcs_accepts(address)
            except _compat.GcsUnreachable as e:
                raise RlplaceError(
                    f"{address} accepts connections but does not answer as a Ray head within "
                    f"{_PROBE_CONNECT_S + _PROBE_ANSWER_S} s ({e}); is it the head's GCS port (`ray start --port`, "
                    "default 6379), not the dashboard's (8265) or the client server's (10001)?"
                ) from None
    finally:
        _compat.reload_auth_settings()


@contextlib.contextmanager
def _environ(values: Mapping[str, str | None]) -> Iterator[None]:
    """os.environ with `values` set (None: removed), restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_environ(values)
        yield
    finally:
        _set_environ(saved)


def _set_environ(values: Mapping[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


#: A line of Ray's C++ log: `[2026-12-01 20:41:32,832 W 20782 20782] gcs_client.cc:210: ...`.
_RAY_LOG_LINE = re.compile(rb"^\[\d{4}-\d\d-\d\d [\d:,]+ [DIWEC] \d+ \d+\] ")


@contextlib.contextmanager
def _ray_log_lines_hidden() -> Iterator[None]:
    """Keep the lines Ray's C++ code writes to file descriptor 2 meanwhile off the terminal; pass any other on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            other = [line for line in caught.read().splitlines(keepends=True) if not _RAY_LOG_LINE.match(line)]
            if other:
                os.write(2, b"".join(other))
