"""Writing every file rlplace writes: the ones a user names (`--svg`, `--html`, `--export`, `schema -o`, `run --out`'s
pictures and resource_pool_auto.yaml), the demo's checkpoints, and rlplace's own records.

One way for all: the content goes to a new file beside the target, created exclusively under a random name and
never through a link (O_EXCL|O_NOFOLLOW: a link planted at a guessed temporary name changes nothing; the demo's
checkpoint used to go to a fixed `train.npz.tmp.npz`, which a link there redirected), which then replaces the
target in one rename. So a reader never sees half a picture, and a symbolic link at the target (one planted in
/tmp pointing at ~/.bashrc, say) is refused, never written through: `os.replace` would replace the link itself,
and refusing says so instead of silently turning the user's link into a file. A target that exists but is no
regular file (a directory, a FIFO, a device) is refused too. An existing file of the user's keeps its
permissions (`rwx` bits only: a setuid or setgid bit is never copied); a file another user owns (planted where
the user writes, with mode 4777 say) gives nothing: the new file gets the mode a new one gets.

A folder rlplace writes several files into (`run --out DIR`) is made by `output_folder`, which refuses a link there
for the same reason.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import stat

from rlplace.errors import RlplaceError


def write_file(path: str | os.PathLike[str], content: str | bytes, *, mode: int = 0o666) -> pathlib.Path:
    """Write `content` (text as UTF-8) to `path` atomically, without following a link there; returns the path.

    A new file gets `mode` less the umask (0o600: readable by its owner only). RlplaceError when `path` is a link
    or not a regular file; OSError (naming `path`) when the folder is missing or not writable."""
    target = pathlib.Path(path)
    existing = _regular_file(target)
    # an existing file of ours keeps its mode
    kept = stat.S_IMODE(existing.st_mode) & 0o777 if existing is not None and existing.st_uid == os.geteuid() else None
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.rlplace-tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temporary, flags, mode)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(target)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if kept is not None:
                os.fchmod(f.fileno(), kept)
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(temporary, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(e, OSError) and not isinstance(e, RlplaceError):
            raise OSError(e.errno, e.strerror, str(target)) from None
        raise
    return target


def check_output_file(path: str | os.PathLike[str]) -> None:
    """Refuse now what `write_file(path)` would refuse after a long run: a link or no regular file there
    (RlplaceError), a folder that is missing or not writable (OSError naming it). Writes nothing."""
    target = pathlib.Path(path)
    _regular_file(target)
    folder = target.parent
    if not folder.is_dir():
        raise OSError(2, "no such folder", str(folder))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OSError(13, "folder not writable", str(folder))


def _regular_file(target: pathlib.Path) -> os.stat_result | None:
    """What is at `target` (None: nothing), or RlplaceError when it is a link or no regular file."""
    existing = _no_link(target, "remove the link or name another file")
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise RlplaceError(f"{target} exists and is not a regular file; nothing was written: name another file")
    return existing


def output_folder(path: str | os.PathLike[str]) -> pathlib.Path:
    """The folder `path`, made (with its parents) when missing; RlplaceError when it is a symbolic link or no
    folder, OSError (naming it) when it cannot be made."""
    folder = pathlib.Path(path)
    existing = _no_link(folder, "name the folder itself")
    if existing is not None and not stat.S_ISDIR(existing.st_mode):
        raise RlplaceError(f"{folder} exists and is not a folder; nothing was written: name another one")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(folder)) from None
    return folder


def _no_link(path: pathlib.Path, fix: str) -> os.stat_result | None:
    """What is at `path` itself (None: nothing); RlplaceError saying `fix` when it is a symbolic link, which a
    stranger may have planted where rlplace writes (/tmp) to make it overwrite the link's target."""
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(existing.st_mode):
        raise RlplaceError(
            f"{path} is a symbolic link (to {os.readlink(path)}); rlplace does not write through links, so nothing "
            f"was written: {fix}"
        )
    return existing
