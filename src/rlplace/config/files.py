"""Reading the files rlplace is given: a config and every file of its defaults tree, an inventory, a node record.

Each is read the same hardened way, whoever asks (rlplace's composer, hydra-core through `hydra_guard`, the
inventory loader, `rlplace stop`): it must be a regular file (a FIFO would hang the reader, /dev/zero never
ends), it is refused by its size before a byte is read (at most `yaml_source.MAX_BYTES`), and it must be UTF-8
(the first byte that is not is named). Then `read_yaml`'s limits apply, the same for one file as for a defaults
tree (`yaml_source.Budget`). Every refusal is one line naming the file, within milliseconds.
"""

from __future__ import annotations

import os
import stat

from rlplace.config.problems import Reporter
from rlplace.config.yaml_source import MAX_BYTES, Budget, read_yaml, too_large
from rlplace.errors import ConfigError, Problem


class Unreadable(ValueError):
    """A file rlplace will not read, and why (its message says it in the words of a Problem)."""


def read_text(path: str | os.PathLike[str], *, kind: str = "config", limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file `path`, of at most `limit` bytes; Unreadable says why not.

    `kind` names what the file should be, in the message about a directory ("config", "inventory")."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens at once instead of hanging
    except FileNotFoundError:
        raise Unreadable("no such file") from None
    except OSError as e:
        raise Unreadable(f"cannot read the file: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise Unreadable(
                f"is a directory, not a{'n' if kind[0] in 'aeiou' else ''} {kind} file: name one of its YAML files"
            )
        if not stat.S_ISREG(mode.st_mode):
            raise Unreadable(f"is not a regular file but {_special(mode.st_mode)}: rlplace reads a {kind} from a file")
        if mode.st_size > limit:
            raise Unreadable(too_large(mode.st_size))
        data = read_at_most(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew meanwhile
        raise Unreadable(too_large(len(data)))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise Unreadable(f"line {line}: byte 0x{data[e.start]:02x} is not UTF-8: rlplace reads UTF-8 text") from None


def read_at_most(fd: int, size: int) -> bytes:
    """Up to `size` bytes of the open file `fd` (fewer at its end)."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_config_text(path: str | os.PathLike[str], name: str | None = None) -> str:
    """`read_text` for a config file, a refusal raised as the ConfigError naming `name` (default: the path)."""
    try:
        return read_text(path)
    except Unreadable as e:
        raise ConfigError(Problem("", str(e), file=name or os.fspath(path))) from None


def load_yaml_file(path: str | os.PathLike[str], *, kind: str, limit: int = MAX_BYTES) -> tuple[object, str]:
    """(the plain data, the text) of a YAML (or JSON) file that is no config: an inventory, a record. One
    ConfigError with every problem, each naming the file and line."""
    _, data, text = read_yaml_file(path, kind=kind, limit=limit)
    return data, text


def read_yaml_file(path: str | os.PathLike[str], *, kind: str, limit: int = MAX_BYTES) -> tuple[Reporter, object, str]:
    """`load_yaml_file`, with the reporter that read it: it knows every key's line, for checks that follow (a
    profile's values)."""
    name = os.fspath(path)
    try:
        text = read_text(path, kind=kind, limit=limit)
    except Unreadable as e:
        raise ConfigError(Problem("", str(e), file=name)) from None
    rep = Reporter(name)
    data = read_yaml(text, rep, Budget())
    if rep.problems:
        raise ConfigError(rep.sorted_problems())
    return rep, data, text


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
