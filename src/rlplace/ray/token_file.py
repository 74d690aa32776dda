"""A token as Ray reads it, checked first for what would let someone else in, or make Ray abort with no message.

Ray reads a token file's first line (`std::getline`) and strips it of " \\t\\n\\r\\f\\v"; $RAY_AUTH_TOKEN is stripped
whole (src/ray/rpc/authentication/authentication_token_loader.cc). It checks nothing else: every gRPC call then
carries "Bearer TOKEN" in a header, where gRPC accepts printable ASCII only, and a process holding a token with
a newline, a control or a non-ASCII character dies on its first call (exit 134, "Illegal header value"). So
before a token is used (`read_file`, `check_value`), rlplace refuses, naming the place, never the token:

- a file that is no regular file (a FIFO would hang the reader, /dev/zero never ends), larger than
  MAX_FILE_BYTES, or not UTF-8;
- a file (or a link to it) owned by another user than you or root, or that everyone may write: its owner, or
  anyone, chooses the token you present, or that your head requires;
- a token with a character gRPC refuses, saying at which line and character.

A file with more than one line is used as Ray uses it, its first line, with a note saying the rest is ignored;
a file your group may write gets a note too. Advice names the real file, not a link to it (`chmod` on a link
changes the file it points to). A head additionally refuses a token shorter than MIN_HEAD_CHARS (`head_check`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rlplace.errors import ClusterAccessError

#: A token file is one line (Ray's own: 64 hex digits; a Kubernetes service-account token is about 1 KB).
MAX_FILE_BYTES = 64 * 1024
#: Ray accepts any non-empty token; it generates 64 hex digits (256 bits, `ray get-auth-token --generate`) and
#: rlplace start does the same. A head started by rlplace requires at least 32 characters (128 bits as hex).
MIN_HEAD_CHARS = 32
#: What Ray strips from a token (TrimWhitespace in authentication_token_loader.cc): not str.strip()'s wider set.
RAY_WHITESPACE = " \t\n\r\f\v"


def read_file(path: Path, source: str) -> tuple[str, tuple[str, ...]]:
    """(the token in `path`, notes for the user) as Ray reads it; ClusterAccessError naming `source` otherwise.

    FileNotFoundError when there is no such file (the caller knows whether that is an error)."""
    real = Path(os.path.realpath(path))
    shown = str(real) if real == Path(os.path.abspath(path)) else f"{real} (which {path} links to)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens at once, never hangs
    except FileNotFoundError:
        raise
    except OSError as e:
        why = f"cannot read the token file ({e.strerror or type(e).__name__})"
        raise _refused(source, why, "fix the path (Ray itself aborts on a token path it cannot read)") from None
    try:
        st = os.fstat(fd)
        _check_file(path, st, source, shown)
        data = os.read(fd, MAX_FILE_BYTES + 1)  # a regular file: one read returns what it holds, up to the size
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        why = f"the token file {shown} holds more than {MAX_FILE_BYTES // 1024} KiB"
        raise _refused(source, why, "a token file is one line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        why = f"line {line} of the token file {shown} is not UTF-8 (byte 0x{data[e.start]:02x})"
        raise _refused(source, why, "write the token as text") from None
    first, _, rest = text.partition("\n")
    token = first.strip(RAY_WHITESPACE)
    if not token:
        more = "; Ray reads only the first line" if rest.strip() else ""
        raise ClusterAccessError(f"{source}: the token file is empty{more}; write the cluster's token into it")
    check_value(token, f"{source}, line 1")
    notes = []
    if rest.strip(RAY_WHITESPACE):
        extra = rest.strip(RAY_WHITESPACE).count("\n") + 2
        lines = "line 2" if extra == 2 else f"lines 2-{extra}"
        notes.append(f"{source}: only the first line of {shown} is the token, as Ray reads it; {lines} are ignored")
    if st.st_mode & stat.S_IWGRP:
        notes.append(f"{source}: your group may write {shown}, and so choose the token: `chmod 600 {real}`")
    return token, tuple(notes)


def check_value(token: str, where: str) -> None:
    """Refuse a token holding a character gRPC cannot carry in a header (Ray would abort the process)."""
    for i, c in enumerate(token):
        if not " " <= c <= "~":
            kind = f"a control character (U+{ord(c):04X})" if ord(c) < 0x20 or ord(c) == 0x7F else "not ASCII"
            raise ClusterAccessError(
                f"{where}: character {i + 1} of the token is {kind}; gRPC carries only printable ASCII in the header "
                "Ray sends the token in, and Ray would abort the process: write the token without it"
            )


def head_check(token: str, source: str) -> None:
    """A head requires a token long enough not to be guessed."""
    if len(token) < MIN_HEAD_CHARS:
        raise ClusterAccessError(
            f"{source}: the token is {len(token)} character{'s' if len(token) != 1 else ''} long; a head requires at "
            f"least {MIN_HEAD_CHARS} (Ray checks none; `rlplace start --head` creates 64 random hex digits): write a "
            "longer one, or name a file that does not exist yet and rlplace creates it"
        )


def real_file(path: Path) -> Path:
    """The file a token path names, links followed: the one advice must name."""
    return Path(os.path.realpath(path))


def _check_file(path: Path, st: os.stat_result, source: str, shown: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) else "no file"
        raise _refused(source, f"the token file {shown} is {kind}, not a regular file", "name a file")
    mine = (os.getuid(), 0)
    link = os.lstat(path)
    if st.st_uid not in mine or link.st_uid not in mine:
        owner = st.st_uid if st.st_uid not in mine else link.st_uid
        what = shown if st.st_uid not in mine else f"the link {path}"
        raise _refused(
            source,
            f"{what} belongs to another user (uid {owner}), who can then choose the token",
            "use a token file of your own",
        )
    if st.st_mode & stat.S_IWOTH:
        why = f"every user may write the token file {shown}, and so choose the token"
        raise _refused(source, why, f"`chmod 600 {real_file(path)}`")


def _refused(source: str, why: str, fix: str) -> ClusterAccessError:
    return ClusterAccessError(f"{source}: {why}" + (f"; {fix}" if fix else ""))
