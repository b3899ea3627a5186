"""What every on-disk store of limits (sweep stores, ``limits transfer``'s — a sweep store —, kernel tile stores)
may be and how it is locked.

* **Where a store is made.** Only in a new directory, an empty one, or one that already is a store of the same
  kind (:func:`check_store_dir`): a store named after a foreign non-empty directory — a home folder, a source
  tree, another kind of store — is refused before a file is written into it.
* **The lock** (:func:`open_lock`) is a regular file opened read-only (``O_RDONLY | O_CREAT | O_NOFOLLOW |
  O_NONBLOCK``) and held with ``fcntl.flock``; it is never truncated or written. A symbolic link, a FIFO, a device
  or a hard link (``st_nlink > 1``: another file reached through the store, whose lock would then be ours) as
  the lock file is refused. Who holds a lock is written beside it to a new file renamed into place
  (:func:`write_holder`), never into the lock itself.
* **Read-only file systems.** Where the lock file cannot be created because the directory is not writable
  (``EROFS``, ``EACCES``, ``EPERM``), :func:`open_lock` returns None: nothing can write there either, so a
  complete store is read without a lock; whatever a run would have to write there is refused by the caller
  with the count of what is missing.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def writable(directory) -> bool:
    """Whether files can be created in the existing ``directory`` (probed by creating and removing a temporary
    ``.NAME.tmp`` file: ``os.access`` is wrong for root, ACLs and read-only mounts); False on a read-only file
    system or without permission, other ``OSError`` raised."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".limits-write-check.", suffix=".tmp", dir=directory)
    except OSError as exc:
        if exc.errno in _READ_ONLY:
            return False
        raise
    os.close(fd)
    os.unlink(tmp)
    return True


def open_lock(path, what: str, kind: str) -> int | None:
    """A descriptor of the lock file ``path`` for ``fcntl.flock`` (module docstring), or None when it does not exist
    and cannot be created because its directory is read-only. ``ValueError`` naming ``what`` (the option) when
    ``path`` is a symbolic link, not a regular file or a hard link; ``kind`` names the store in the message."""
    flags = (os.O_RDONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{what}: {path} is a symbolic link; a {kind} holds regular files only — remove "
                             "it") from None
        if exc.errno in _READ_ONLY and not os.path.lexists(path):
            return None
        raise ValueError(f"{what}: cannot create the lock file {path} ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from .readfile import kind as kind_of

            raise ValueError(f"{what}: {path} is {kind_of(st.st_mode)}, not a regular file; a {kind} holds regular "
                             "files only — remove it")
        if st.st_nlink > 1:
            raise ValueError(f"{what}: {path} is a hard link ({st.st_nlink} names for one file): a lock file is "
                             f"the {kind}'s own, never another file reached through it — remove it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_holder(path) -> list:
    """The words of the holder file ``path`` (``["PID", "HOST"]``), or [] when it is missing or unreadable."""
    from .readfile import read_bytes

    try:
        return read_bytes(path, "lock holder", 200, nofollow=True).decode("utf-8", "replace").split()
    except ValueError:
        return []


def write_holder(path) -> bool:
    """Record this process (``"PID HOST"``) in the holder file ``path`` — a new file renamed into place, so a link
    there is replaced, never written through. The record is informational (the lock is the ``flock``): where it
    cannot be written (a read-only store, a full disk — which the store's own writes then report) the old record
    is removed if possible and False returned."""
    import contextlib
    import socket

    from .results import atomic_write_text

    try:
        atomic_write_text(path, f"{os.getpid()} {socket.gethostname()}\n")
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return False
    return True


def check_store_dir(path, what: str, kind: str, is_store, own=()) -> bool:
    """Refuse (``ValueError`` naming ``what``) to make a ``kind`` store in ``path`` unless it is new, empty (but
    for the names ``own`` and temporary ``.NAME.tmp`` files a killed run may leave) or already such a store
    (``is_store(path)`` true). Returns whether the directory already exists."""
    path = Path(path)
    if not os.path.lexists(path):
        return False
    if path.is_symlink() and not path.exists() or not path.is_dir():
        raise ValueError(f"{what}: {path} exists and is not a directory")
    if is_store(path):
        return True
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise ValueError(f"{what}: cannot read the directory {path} ({exc.strerror or exc})") from None
    foreign = [n for n in names if n not in own and not (n.startswith(".") and n.endswith(".tmp"))]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f", … ({len(foreign)} entries)" if len(foreign) > 3 else "")
        raise ValueError(f"{what}: {path} is a non-empty directory that is not a {kind} (it holds {shown}); a "
                         f"{kind} is made only in a new or empty directory — choose another one")
    return True
