"""Writing the files a user names (`--svg`, `--html`, `--export`, `--out`, `schema -o`) and rlplace's own records.

One way for all: the text goes to a new file beside the target (created exclusively, never through a link), which
then replaces the target in one rename. So a reader never sees half a picture, and a symbolic link at the target
(one planted in /tmp pointing at ~/.bashrc, say) is refused, never written through: `os.replace` would replace
the link itself, and refusing says so instead of silently turning the user's link into a file. A target that
exists but is no regular file (a directory, a FIFO, a device) is refused too; an existing file keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import stat

from rlplace.errors import RlplaceError


def write_file(path: str | os.PathLike[str], text: str, *, mode: int = 0o666) -> pathlib.Path:
    """Write `text` (UTF-8) to `path` atomically, without following a link there; returns the path written.

    A new file gets `mode` less the umask (0o600: readable by its owner only). RlplaceError when `path` is a link
    or not a regular file; OSError (naming `path`) when the folder is missing or not writable."""
    target = pathlib.Path(path)
    try:
        existing = os.lstat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISLNK(existing.st_mode):
        raise RlplaceError(
            f"{target} is a symbolic link (to {os.readlink(target)}); rlplace does not write through links, so "
            "nothing was written: remove the link or name another file"
        )
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise RlplaceError(f"{target} exists and is not a regular file; nothing was written: name another file")
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.rlplace-tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temporary, flags, mode)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(target)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if existing is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(existing.st_mode))
            f.write(text.encode("utf-8"))
        os.replace(temporary, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(e, OSError) and not isinstance(e, RlplaceError):
            raise OSError(e.errno, e.strerror, str(target)) from None
        raise
    return target
