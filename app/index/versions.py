"""Index versions on disk, switched by one atomic step, and the one lock of their writers.

``indexes/NAME`` is a symlink to a hidden version folder ``indexes/.NAME.v-PID-ID``.
A writer (`hoprag index`, `hoprag graph build`, `hoprag index drop`) holds the name's
lock, writes a complete new version folder (`new_version`), fsyncs its files and
folders, and then points ``NAME`` at it with one `os.replace` of a freshly made symlink, so a
crash at any moment leaves either the old version or the new one in place, never
neither. Readers resolve the link once, when they open the index, and keep reading that
version (`CorpusIndex.path`); a long-lived server reopens when the link's target changed.

An index from before versions is a plain folder named ``NAME``. A directory cannot be
replaced by a symlink with rename(2), so its first new version is switched in with
renameat2(RENAME_EXCHANGE): the fresh link and the plain folder trade names in one
step, and the plain folder, now under the link's hidden name, is then deleted. That is
simpler than converting the plain folder first (rename it, then link it), which leaves a
moment with no ``NAME`` that a crash could make permanent and a reader would have to
repair.

Every other hidden ``.NAME.KIND-ID`` entry is a leftover: a version no longer pointed
to, an unfinished one, an unused link, or the temporary and retired folders of hoprag
versions before this one. Only writers make them, and every writer holds the lock, so
whatever a writer finds when it has the lock belongs to a dead process; `settle` deletes
it before the writer starts.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.errors import UserError

PAUSE_ENV = "HOPRAG_TEST_PAUSE_AT"  # the crash tests' hook, see `pause_point`
_LEFTOVER_KINDS = "v|link|tmp|old"  # tmp and old: hoprag versions before this module
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _lock_file(root: Path, name: str) -> Path:
    return root / f".{name}.lock"


@contextmanager
def name_lock(root: Path, name: str) -> Iterator[None]:
    """One writer per index name across processes; a writer that has to wait says for
    whom (the holder writes its pid into the lock file), instead of hanging silently."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(_lock_file(root, name), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            print(
                f"waiting for another hoprag index on {name!r}"
                + (f" (pid {holder})" if holder.isdigit() else ""),
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def pause_point(point: str) -> None:
    """With HOPRAG_TEST_PAUSE_AT=point, say so on stderr and wait for a signal: the crash
    tests SIGKILL a real writer at each such point (tests/test_index_crash.py)."""
    if os.environ.get(PAUSE_ENV) == point:
        print(f"paused at {point}", file=sys.stderr, flush=True)
        signal.pause()


def _leftover(name: str, entry: str) -> bool:
    """A hidden entry that a writer of `name` made (ids are digits, hex and '-', so no
    entry of another index name, which would hold a '.', ever matches)."""
    return (
        re.fullmatch(re.escape(f".{name}.") + f"({_LEFTOVER_KINDS})-[0-9a-f-]+", entry) is not None
    )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def settle(root: Path, name: str) -> Path | None:
    """The current version folder of `name` (the link's target, or a plain folder from
    before versions), after deleting every leftover; call it holding `name_lock`."""
    dest = root / name
    target = os.readlink(dest) if dest.is_symlink() else None
    if root.is_dir():
        for entry in root.iterdir():
            if entry.name != target and _leftover(name, entry.name):
                _remove(entry)
    if not dest.is_dir():
        return None
    return root / target if target else dest


@contextmanager
def new_version(root: Path, name: str) -> Iterator[Path]:
    """A new, empty, hidden version folder of `name` to write into, made the index by
    `_publish` when the block ends, deleted when it fails (a SIGKILL leaves it to the
    next writer's `settle`)."""
    version = root / f".{name}.v-{os.getpid()}-{time.time_ns():x}"
    version.mkdir()
    try:
        yield version
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        raise
    _publish(root, name, version)


def copy_version(current: Path, version: Path) -> None:
    """The whole of `current` copied into the new `version`, to be changed there. A
    full copy: hard links would let a later in-place write reach the live version."""
    shutil.copytree(current, version, symlinks=True, dirs_exist_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(folder: Path) -> None:
    """Every file and folder of `folder` on disk, so that the switch never points at
    data still in the page cache when the power fails."""
    for parent, _, files in os.walk(folder):
        for file in files:
            _fsync(Path(parent) / file)
        _fsync(Path(parent))


def _exchange(a: Path, b: Path) -> None:
    """Swap the names `a` and `b` in one step (Linux renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        raise UserError(
            f"index {b.name!r} is a folder from an older hoprag, and this file system "
            "cannot swap it for a new version in one step",
            hint=f"delete it with `hoprag index drop {b.name}`, then index again",
        )
    raise OSError(code, os.strerror(code), str(b))


def _publish(root: Path, name: str, version: Path) -> None:
    """Make the finished `version` the index `name`, in one atomic step, and delete the
    version it replaces."""
    _sync_tree(version)
    _fsync(root)
    pause_point("written")
    dest = root / name
    link = root / f".{name}.link-{os.getpid()}"
    os.symlink(version.name, link)  # relative: HOPRAG_HOME may move
    pause_point("linked")
    if dest.is_dir() and not dest.is_symlink():
        _exchange(link, dest)
        retired: Path | None = link  # now the plain folder
    else:
        retired = root / os.readlink(dest) if dest.is_symlink() else None
        os.replace(link, dest)
    _fsync(root)
    pause_point("switched")
    if retired is not None:
        _remove(retired)


def unpublish(root: Path, name: str, current: Path) -> None:
    """Delete the index `name` whose current version is `current`: out of sight in one
    step (the link removed, or a plain folder renamed to a leftover), then from disk."""
    dest = root / name
    if dest.is_symlink():
        dest.unlink()
    else:
        current = root / f".{name}.old-{os.getpid()}"
        os.rename(dest, current)
    _fsync(root)
    shutil.rmtree(current)
