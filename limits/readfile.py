"""Every file limits reads, opened one way: :func:`opened` — a regular file (never a FIFO, which would block,
a device such as ``/dev/zero``, which never ends, a socket, or — where asked — a symbolic link), read with a
size cap; JSON/TOML with bounded nesting; ``.npy``/``.npz`` arrays sized from their headers (and, in an
``.npz``, from the zip central directory) before a byte is allocated. Every problem is one ``ValueError`` line
naming the option (or what the file is for) and the file::

    --x1: file x.npy does not exist
    --prediction: p.json is a FIFO, not a regular file
    model file m.toml is 3 MiB, more than the 1 MiB limit for such a file
    --x-train: X.npz[X] holds a 2000000×1000 float64 array = 14.9 GiB, more than the 11.8 GiB limit for the
    arrays of one file (half the physical memory)

``what`` is an option (``"--x1"``: the message starts with it and a colon) or a noun (``"model file"``).
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat

MAX_TEXT_BYTES = 1 << 20            # a model/layer/sweep file is a few hundred bytes
MAX_DEPTH = 100                     # nesting of a JSON/TOML document (a model file nests 3 deep, a result ≈ 10)
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def human(n) -> str:
    """Bytes as ``'512 B'``, ``'1 MiB'``, ``'14.9 GiB'``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"       # pragma: no cover


def shown(path) -> str:
    """The path as printed in a one-line message (quoted when it holds control characters)."""
    s = os.fspath(path) if not isinstance(path, str) else path
    s = s if isinstance(s, str) else os.fsdecode(s)
    return s if s.isprintable() else repr(s)


def named(what: str, path) -> str:
    """``'--x1: x.npy'`` for an option, ``'model file m.toml'`` for a noun."""
    return f"{what}: {shown(path)}" if what.startswith("-") else f"{what} {shown(path)}"


def kind(mode: int) -> str:
    """What a non-regular file is: 'a directory', 'a FIFO', …"""
    if stat.S_ISDIR(mode):
        return "a directory"
    return next((text for test, text in _KINDS if test(mode)), "not a regular file")


def array_limit() -> float:
    """Bytes one array read from a file may take: half the physical memory (8 GiB where the OS does not say)."""
    try:
        return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):       # pragma: no cover - non-POSIX
        return 8.0 * 2**30


def _limit_text(limit) -> str:
    if limit is None:
        return f"{human(array_limit())} limit for the arrays of one file (half the physical memory)"
    return f"{human(limit)} limit for such a file"


def refuse_os_error(exc: OSError, what, path):
    """The one-line ValueError for an OSError met while opening or reading ``path``."""
    if exc.errno == errno.ENOENT:
        missing = f"{what}: file {shown(path)}" if what.startswith("-") else named(what, path)
        return ValueError(f"{missing} does not exist")
    if exc.errno == errno.ELOOP:
        return ValueError(f"{named(what, path)} is a symbolic link; give the file itself")
    if exc.errno == errno.EISDIR:
        return ValueError(f"{named(what, path)} is a directory, not a file")
    return ValueError(f"{named(what, path)} cannot be read ({exc.strerror or exc})")


@contextlib.contextmanager
def opened(path, what: str, *, limit: float | None = None, nofollow: bool = False, hint: str = ""):
    """``(file object, size)`` of ``path`` opened for binary reading — refused unless a regular file (checked on the
    open descriptor: no race between a check and the open) of at most ``limit`` bytes. Opened with
    ``O_NONBLOCK`` (a FIFO never blocks the open) and, with ``nofollow``, ``O_NOFOLLOW`` (a symbolic link is
    refused, not followed)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise refuse_os_error(exc, what, path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            k = kind(st.st_mode)
            raise ValueError(f"{named(what, path)} is {k}, not a " + ("file" if k == "a directory" else "regular file"))
        if limit is not None and st.st_size > limit:
            raise ValueError(f"{named(what, path)} is {human(st.st_size)}, more than the {_limit_text(limit)}"
                             + (f"; {hint}" if hint else ""))
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        try:
            yield fh, st.st_size
        except OSError as exc:
            raise refuse_os_error(exc, what, path) from None


def read_bytes(path, what: str, limit: float = MAX_TEXT_BYTES, *, nofollow: bool = False, hint: str = "") -> bytes:
    """The bytes of ``path`` (at most ``limit``, checked on the descriptor and again while reading, so a file
    growing under us cannot pass it); ``hint`` ends the message of a file over the limit."""
    with opened(path, what, limit=limit, nofollow=nofollow, hint=hint) as (fh, size):
        data = fh.read(min(int(limit), size) + 1)           # what fstat promised (+1: did it grow?)
        if len(data) > size:
            data += fh.read(int(limit) + 1 - len(data))
    if len(data) > limit:
        raise ValueError(f"{named(what, path)} grew beyond the {_limit_text(limit)}")
    return data


def read_text(path, what: str, limit: float = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path`` (:func:`read_bytes`)."""
    try:
        return read_bytes(path, what, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{named(what, path)} is not UTF-8 text") from None


# ---------------------------------------------------------------------------------------------- JSON / TOML
def check_depth(doc, where: str, max_depth: int = MAX_DEPTH):
    """``doc`` (parsed JSON/TOML) unless nested deeper than ``max_depth`` lists/tables (iterative: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > max_depth:
                raise ValueError(f"{where} is nested too deeply (more than {max_depth} levels)")
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return doc


def parse_json(text: str, where: str, max_depth: int = MAX_DEPTH):
    """JSON ``text`` parsed with nesting at most ``max_depth``; a ValueError naming ``where`` otherwise."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f"{where} is nested too deeply (more than {max_depth} levels)") from None
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    return check_depth(doc, where, max_depth)


def parse_toml(text: str, where: str, max_depth: int = MAX_DEPTH):
    """TOML ``text`` parsed with nesting at most ``max_depth`` (``tomllib``; ``tomli`` before Python 3.11)."""
    try:
        import tomllib
    except ModuleNotFoundError:        # pragma: no cover — Python 3.10
        import tomli as tomllib
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise ValueError(f"{where} is nested too deeply (more than {max_depth} levels)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where} is not valid TOML: {exc}") from None
    return check_depth(doc, where, max_depth)


def read_json(path, what: str, limit: float = MAX_TEXT_BYTES, max_depth: int = MAX_DEPTH):
    return parse_json(read_text(path, what, limit), named(what, path), max_depth)


def read_toml(path, what: str, limit: float = MAX_TEXT_BYTES, max_depth: int = MAX_DEPTH):
    return parse_toml(read_text(path, what, limit), named(what, path), max_depth)


# ---------------------------------------------------------------------------------------------- .npy / .npz
NPY_MAGIC, ZIP_MAGIC = b"\x93NUMPY", b"PK"


def _npy_header(fh, where):
    """(shape, fortran, dtype) from the ``.npy`` header at the position of ``fh`` (numpy's safe parser, a
    header of at most 10 kB); object arrays are refused (they would need pickle)."""
    import numpy as np

    try:
        version = np.lib.format.read_magic(fh)
        read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise ValueError(f"unsupported .npy format version {version}")
        shape, fortran, dtype = read(fh)
    except (ValueError, SyntaxError, EOFError, TypeError, OverflowError) as exc:
        raise ValueError(f"{where} is not a readable .npy array (damaged or truncated header: {exc})") from None
    if dtype.hasobject:
        raise ValueError(f"{where} holds a pickled (object) array; pickles are never loaded — save a numeric "
                         "array instead")
    return tuple(int(s) for s in shape), bool(fortran), dtype


def _npy_body(fh, where, data_bytes, budget):
    """The array of the ``.npy`` stream ``fh`` (positioned at its magic) holding ``data_bytes`` bytes after the
    header: the header's shape × itemsize must match them and fit in ``budget`` before anything is allocated."""
    import numpy as np

    start = fh.tell()
    shape, fortran, dtype = _npy_header(fh, where)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=object))
    if nbytes > budget[0]:
        dims = "×".join(map(str, shape)) or "scalar"
        raise ValueError(f"{where} holds a {dims} {dtype} array = {human(nbytes)}, more than the "
                         f"{_limit_text(budget[1])}")
    have = data_bytes - (fh.tell() - start)
    if have != nbytes:
        raise ValueError(f"{where} is damaged or truncated (its header says {nbytes} bytes of data, it holds {have})")
    buf = bytearray(nbytes)
    view, got = memoryview(buf), 0
    while got < nbytes:
        n = fh.readinto(view[got:])
        if not n:
            raise ValueError(f"{where} is truncated ({got} of {nbytes} bytes of data)")
        got += n
    budget[0] -= nbytes
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _npz_members(fh, where, size, budget, first_only, key=None):
    """``[(key, array), …]`` of the ``.npz`` archive ``fh``: every member's uncompressed size read from the zip
    central directory (and its ``.npy`` header) before it is decompressed — a zip bomb is refused unread."""
    import zipfile

    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{where} is a corrupt or truncated .npz archive ({exc})") from None
    out = []
    with zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if key is not None and len(infos) > 1:
            infos = [i for i in infos if i.filename in (key, f"{key}.npy")]
            if not infos:
                keys = [i.filename.removesuffix(".npy") for i in zf.infolist()]
                raise ValueError(f"{where} holds {keys}; store the array under {key!r}")
        infos = infos[:1] if first_only else infos
        total = sum(i.file_size for i in infos)
        if total > budget[0]:
            big = max(infos, key=lambda i: i.file_size)
            raise ValueError(f"{where} would take {human(total)} uncompressed (member {big.filename!r}: "
                             f"{human(big.file_size)}), more than the {_limit_text(budget[1])}")
        for info in infos:
            name = info.filename.removesuffix(".npy")
            at = f"{where}[{name}]"
            try:
                with zf.open(info) as member:
                    out.append((name, _npy_body(member, at, info.file_size, budget)))
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
                raise ValueError(f"{at} is corrupt or truncated ({type(exc).__name__}: {exc})") from None
    return out


def load_arrays(path, what: str, *, first_only: bool = False, limit: float | None = None, nofollow: bool = False,
                key: str | None = None, allow_empty: bool = False):
    """``[(key, array), …]`` of an ``.npy`` (key ``""``) or ``.npz`` file, recognised by content, never unpickled;
    the arrays together at most ``limit`` bytes (default :func:`array_limit`), checked from the headers before
    anything is allocated. ``first_only``: the first member of an ``.npz`` only; ``key``: the member ``key`` of
    an ``.npz`` holding several (its only member otherwise)."""
    budget = [float(array_limit() if limit is None else limit), limit]
    with opened(path, what, nofollow=nofollow) as (fh, size):
        magic = fh.read(6)
        fh.seek(0)
        where = named(what, path)
        if size > budget[0] + (1 << 20):          # not even the headers could make this fit (a sparse file, say)
            raise ValueError(f"{where} is {human(size)}, more than the {_limit_text(limit)}")
        if magic == NPY_MAGIC:
            return [("", _npy_body(fh, where, size, budget))]
        if magic.startswith(ZIP_MAGIC):
            out = _npz_members(fh, where, size, budget, first_only, key)
            if not out and not allow_empty:
                raise ValueError(f"{where} holds no arrays")
            return out
    raise ValueError(f"{where} is not an .npy/.npz file (save it with numpy.save or numpy.savez)")


def load_npz(path, what: str, limit: float | None = None) -> dict:
    """All arrays of the ``.npz`` file ``path`` as a dict (:func:`load_arrays`)."""
    with opened(path, what) as (fh, _):
        if not fh.read(2).startswith(ZIP_MAGIC):
            raise ValueError(f"{named(what, path)} is not an .npz archive (damaged or not written by limits)")
    return dict(load_arrays(path, what, limit=limit, allow_empty=True))


def array_from_bytes(data: bytes, where: str, limit: float | None = None):
    """The array of an in-memory ``.npy`` (same checks as :func:`load_arrays`)."""
    budget = [float(array_limit() if limit is None else limit), limit]
    return _npy_body(io.BytesIO(data), where, len(data), budget)
