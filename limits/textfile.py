"""Reading a small user text file (a model file) without trusting it: regular files only (a FIFO would
block, ``/dev/zero`` never ends), at most ``limit`` bytes, UTF-8. Every problem is a ``ValueError``
naming the file."""
from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_TEXT_BYTES = 1 << 20        # 1 MiB: a model file is a few hundred bytes


def read_text(path, what: str = "file", limit: int = MAX_TEXT_BYTES) -> str:
    """The text of ``path``: opened without blocking, refused unless a regular file of at most ``limit``
    bytes (checked on the open descriptor, and again while reading, so a growing file cannot exceed it)."""
    path = Path(path)
    name = f"{what} {str(path)!r}"
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ValueError(f"{name} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{name} cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ValueError(f"{name} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{name} is not a regular file (a FIFO, device or socket); give a file")
        if st.st_size > limit:
            raise ValueError(f"{name} is {st.st_size} bytes, more than the {limit} bytes such a file may have")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ValueError(f"{name} grew beyond the {limit} bytes such a file may have")
    except OSError as exc:
        raise ValueError(f"{name} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not UTF-8 text") from None
