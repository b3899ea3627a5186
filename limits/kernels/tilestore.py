"""A kernel as a directory of tiles: ``kernel_blocked(model, X, out=DIR, backend=…)`` → :class:`TileStore`.

Layout of ``DIR``::

    store.json                      what the tiles hold: P, block, kernels, the model, the inputs' digest and the
                                    kernel digest K = SHA-256(model JSON, inputs' dtype/shape/bytes, P, block); the
                                    model JSON of a composition (``limits.serial``) is its canonical serialisation
                                    ``Serial.to_dict()`` (every layer and hyperparameter, floats that round-trip)
    lock                            held (``fcntl.flock``) by the one process filling or reading the store; opened
                                    read-only, never written (:mod:`limits.stores`)
    lock.pid                        "PID HOST" of the holder (a new file renamed into place)
    nngp/000003_000007.tile         tile (I, J) = rows [3b, 4b) × columns [7b, 8b), I ≤ J (upper triangle)
    ntk/…                           the same for the NTK when requested

A tile file is self-describing and content-addressed (as git objects or zarr's tokenised chunks)::

    b"limits-tile\\n" · a 500-byte JSON header {"kernel": K, "name", "tile": [I, J], "shape", "dtype": "<f8",
    "sha256": SHA-256 of the data} · the tile's float64 entries (little-endian, C order)

so a tile is tied to the kernel it belongs to (model, inputs, block, its position) and to its own bytes. Reading
one verifies both before a number is used: a tile of another kernel (copied from another store, or written by a
second process) is "foreign", a tile whose bytes do not match its digest (a flipped bit, a torn write) or whose
header is unreadable is "damaged"; either is recomputed and counted (``diagnostics["recomputed"]``), never used.
A verified tile is re-hashed only when its inode, size, mtime or ctime change (``ctime`` cannot be set back), so
the matrix–vector products of the solver read each tile at the cost of an ``fstat`` after the first pass.
Symbolic links, FIFOs, devices and sockets in a store are refused (``O_NOFOLLOW``, ``lstat``); temporary
files left by a killed writer (``.NAME.*.tmp``) are removed on resume, under the lock.

Measured (tests/largep/test_store_identity.py, benchmarks/tilestore_attacks.py): 400 of 400 random single-bit
flips anywhere in a tile file (magic, header or data) refused, 0 false alarms in 200 verifications of intact
tiles; tiles copied from another model's store, one flipped exponent bit and two processes on one new store,
which made ``limits regress --solver cg`` exit 0 with means 2.8, 2.2e-5 and 2.8 off the Cholesky answer, now
give the Cholesky answer to 1e-12 (the tile recomputed) or exit 2 (the second writer). The price: one read and
SHA-256 pass over the tiles per process, +0.6–1.4 s CPU on a 3.6–4.1 s rerun at P = 6000 (192 MiB of tiles);
the matrix–vector products of the solver read tiles as fast as before.

One writer per store: the lock is taken before the store is examined and held until the caller is done
(:func:`store_lock`, re-entrant in one process); a second process gets a ``ValueError`` naming the store and the
holder's pid. The OS drops the lock when its process dies however it dies, so a stale lock of a dead process is
simply taken over (and reported in ``diagnostics["stale_lock_pid"]``). The lock file is opened read-only and never
written; a hard link (``st_nlink > 1``) as ``lock`` or ``store.json`` is refused, as are symbolic links, and the
holder's "PID HOST" goes to ``lock.pid``, a new file renamed into place (:mod:`limits.stores`). A store is made
only in a new or empty directory or an existing tile store. A complete store on a read-only file system is read as
it is, without a lock (``diagnostics["read_only"]``); a missing tile there is refused with the count.

Each tile is one file written by one task to a temporary name and renamed into place
(:func:`limits.results.atomic_write_bytes`), so a killed worker or driver leaves only whole tiles and a rerun
computes exactly the missing ones. (zarr would add a dependency whose chunk writes we would still have to make
atomic and tie to their kernel ourselves.)

Compositions (``limits.serial`` of :mod:`limits.layers`, inputs (P, d), (P, T, C) or (P, H, W, C)) are stored the
same way: tile (I, J) is the cross kernel of the row blocks X_I × X_J by the packed path of
:mod:`limits.kernels.packed` (a diagonal tile its symmetric kernel, each pair once), on inputs copied to 64-byte
aligned memory so that a dask worker's tile equals this process's bit for bit; the composition is run on the
first input before the store is made (shape errors, a read-out with spatial axes). Before a tile is computed the
disk the missing tiles need (exact) is compared with the file system's free space and one task's peak memory
(:func:`task_memory`: for a composition the packed kernel's outputs, recorded per-input quantities and one chunk,
:func:`limits.kernels.composed.packed_bytes`) with the workers' ``memory_limit`` (half the available memory on the
serial backend); either too large is refused with the estimate. Measured (benchmarks/bench_tiles.py,
benchmarks/tilestore_attacks.py ``--compositions``): see the row "images beyond one machine" of docs/performance.rst; the three
attacks above on two CNN compositions give the Cholesky answer to the CG tolerance (1e-10; tiles recomputed:
6 foreign, 1 damaged) or exit 2 (the second writer).

Each task is one tile through all layers and the read-out (``compute``, given by
:func:`limits.kernels.kernel_blocked`: the symmetric tile for I = J, the cross tile X_I × X_J otherwise), so a worker needs the
inputs (P×d, scattered once) and O(block²) numbers: about (3 + 2·kernels)·8·block² bytes (≈ 170 MiB at
block 2048 for the NNGP alone) whatever P is. The driver holds X and a list of tile names.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TileStore", "fill_tiles", "worker_memory", "checked_inputs", "model_record", "kernel_digest", "store_dir",
           "store_lock", "task_memory", "check_resources", "is_composition"]

FORMAT = "limits-kernel-tiles"
VERSION = 2
_KERNELS = ("nngp", "ntk")
TILE_MAGIC = b"limits-tile\n"
HEADER_BYTES = 500                  # magic + header = 512 bytes: the data start 8-byte aligned (BLAS-friendly)
LOCK_NAME = "lock"
HOLDER_NAME = "lock.pid"                # "PID HOST" of the lock's holder (renamed into place)
_TILE_NAME = re.compile(r"(\d{6})_(\d{6})\.tile")
_TEMP = re.compile(r"\..+\.tmp")


def _digest(X) -> str:
    """SHA-256 of the inputs' dtype, shape and bytes."""
    X = np.ascontiguousarray(X)
    h = hashlib.sha256()
    h.update(f"{X.dtype.str}{X.shape}".encode())
    h.update(X.tobytes())
    return h.hexdigest()


def _kernel_id(model: dict, x_sha256: str, P: int, block: int) -> str:
    text = json.dumps({"format": FORMAT, "version": VERSION, "model": model, "x": x_sha256, "P": int(P),
                       "block": int(block)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_digest(model, X, block, get=("nngp",)) -> str:
    """The digest every tile of ``model``'s kernel on ``X`` at tile edge ``block`` carries (module docstring)."""
    m, _, X = checked_inputs(model, get, X, "kernel_digest")
    return _kernel_id(model_record(m), _digest(X), X.shape[0], min(int(block), X.shape[0]))


def worker_memory(block, n_kernels=1) -> float:
    """Bytes one tile task holds at its peak: the tile's outputs, the fused recursion's scratch (7 arrays
    of kernel_blocked's inner block, at most 256²) and the serialised copy written to disk."""
    inner = min(int(block), 256)
    return 8.0 * ((2 * n_kernels + 1) * block * block + 7 * inner * inner)


def task_memory(m, X, block, get) -> float:
    """Bytes one tile task allocates at its peak (estimated from shapes before anything is allocated): for a
    model :func:`worker_memory`; for a composition the packed kernel of block × block inputs
    (:func:`limits.kernels.composed.packed_bytes`) and two copies of one tile as it is written."""
    if is_composition(m):
        from .composed import packed_bytes

        return packed_bytes(m, X.shape[1:], block, block, "ntk" in get) + 16.0 * block * block
    return worker_memory(block, len(get))


def _limit_bytes(memory_limit):
    """A dask memory limit ("2GiB", bytes) in bytes, or None when it sets none ("auto", 0, None)."""
    if memory_limit is None or memory_limit == "auto":
        return None
    if isinstance(memory_limit, str):
        try:
            from dask.utils import parse_bytes
        except ImportError:                          # pragma: no cover — dask missing: the backend says so later
            return None
        memory_limit = parse_bytes(memory_limit)
    return float(memory_limit) or None


def check_resources(store, todo, m, X, get, backend, scheduler, memory_limit):
    """Refuse (``ValueError`` with the estimate) before a tile is computed when the missing tiles need more disk
    than the store's file system has free, or one tile task more memory than a worker has (``memory_limit`` of
    the LocalCluster made here; half the available memory on the serial backend). Returns the estimates."""
    from ..readfile import human

    disk = float(sum(len(store.kernels) * (len(TILE_MAGIC) + HEADER_BYTES + 8.0 * np.prod(store.shape(a, b)))
                     for a, b in todo))
    free = shutil.disk_usage(store.path).free
    if disk > free:
        raise ValueError(f"out: the {len(todo)} missing tiles need ≈ {human(disk)} of disk in {store.path}, "
                         f"{human(free)} free on its file system; free space or choose another directory")
    task = task_memory(m, X, store.block, get)
    if backend == "dask":
        limit = _limit_bytes(memory_limit) if scheduler is None else None
        src = f"the workers' memory_limit ({human(limit)})" if limit else ""
    else:
        from ..memory import available_memory

        avail = available_memory()
        limit, src = (None, "") if avail is None else (0.5 * avail, f"half the available memory ({human(avail)})")
    if limit is not None and task > limit:
        raise ValueError(f"out: one tile task (block {store.block}) needs ≈ {human(task)}, more than {src}; use a "
                         "smaller block (or raise memory_limit if the memory is there)")
    return {"disk_bytes": disk, "task_memory_bytes": task}


def tile_bytes(header: dict, a) -> bytes:
    """The file of one tile: magic, the header (with the SHA-256 of the data) padded to 500 bytes, the data."""
    data = np.ascontiguousarray(a, dtype="<f8").tobytes()
    head = json.dumps({**header, "shape": list(np.shape(a)), "dtype": "<f8",
                       "sha256": hashlib.sha256(data).hexdigest()}, sort_keys=True).encode()
    if len(head) >= HEADER_BYTES:
        raise ValueError(f"tile header too long ({len(head)} bytes)")
    return TILE_MAGIC + head.ljust(HEADER_BYTES - 1) + b"\n" + data


def write_tiles(targets, arrays):
    """Write each tile array to its ``(path, header)`` target, atomically (what a tile task does last)."""
    from ..results import atomic_write_bytes

    for (path, header), a in zip(targets, arrays):
        atomic_write_bytes(path, tile_bytes(header, a))


class _Bad(Exception):
    """A tile that cannot be used: ``reason`` "foreign" or "damaged" (module docstring)."""

    def __init__(self, reason, detail):
        super().__init__(detail)
        self.reason = reason


# ---------------------------------------------------------------------------------------------- the lock
_HELD: dict = {}          # realpath of a store → [fd, depth] (the lock is re-entrant within one process)


def _pid_alive(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


@contextlib.contextmanager
def store_lock(path, what="out"):
    """Hold the store's lock (module docstring); yields the pid of a dead process whose stale lock was taken over,
    or None. A second process gets a ``ValueError`` naming the store and the holder's pid. The lock file is opened
    read-only and never written (:func:`limits.stores.open_lock`: a symbolic link, a hard link or a non-regular
    file there is refused); the holder's ``PID HOST`` goes to ``lock.pid``, a new file renamed into place. Where
    the store is read-only and has no lock file, no lock is taken: nothing can write there (:func:`fill_tiles`
    then only reads a complete store)."""
    path = Path(path)
    key = os.path.realpath(path)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield None
        finally:
            _HELD[key][1] -= 1
        return
    import fcntl

    from ..stores import open_lock, read_holder, write_holder

    fd = open_lock(path / LOCK_NAME, what, "tile store")
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = read_holder(path / HOLDER_NAME)
                who = f"process {holder[0]}" + (f" on {holder[1]}" if len(holder) > 1 else "") if holder else \
                    "another process"
                raise ValueError(f"{what}: {path} is in use by {who} (lock {path / LOCK_NAME}); one writer per tile "
                                 "store — wait for it to finish or use another directory") from None
        old = read_holder(path / HOLDER_NAME)
        stale = None
        if len(old) >= 2 and old[0].isdigit() and old[1] == socket.gethostname() and not _pid_alive(int(old[0])):
            stale = int(old[0])
        if fd is not None:
            write_holder(path / HOLDER_NAME)          # False on a read-only store: then nobody else writes either
        _HELD[key] = [fd, 1]
        try:
            yield stale
        finally:
            del _HELD[key]
    finally:
        if fd is not None:
            os.close(fd)                  # closing the descriptor releases the lock


# ---------------------------------------------------------------------------------------------- the store
@dataclass
class TileStore:
    """A kernel stored as upper-triangle tiles (module docstring). ``diagnostics`` of the run that
    filled it: tiles total / computed / reused / recomputed, seconds, backend."""
    path: Path
    P: int
    block: int
    kernels: tuple
    model: dict
    x_sha256: str
    diagnostics: dict = field(default_factory=dict)
    kernel: str = ""
    _verified: dict = field(default_factory=dict, repr=False)
    _repair: object = field(default=None, repr=False)

    def __post_init__(self):
        self.kernel = _kernel_id(self.model, self.x_sha256, self.P, self.block)

    # -- layout ---------------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return -(-self.P // self.block)

    def span(self, a) -> slice:
        return slice(a * self.block, min((a + 1) * self.block, self.P))

    def pairs(self):
        n = self.n_blocks
        return [(a, b) for a in range(n) for b in range(a, n)]

    def tile_path(self, name, a, b) -> Path:
        return self.path / name / f"{a:06d}_{b:06d}.tile"

    def shape(self, a, b):
        s, t = self.span(a), self.span(b)
        return (s.stop - s.start, t.stop - t.start)

    def targets(self, a, b, kernels=None):
        """``[(path, header), …]`` of tile (a, b) of every kernel: what a tile task writes."""
        return [(str(self.tile_path(k, a, b)), {"kernel": self.kernel, "name": k, "tile": [a, b]})
                for k in (kernels or self.kernels)]

    # -- verified reading -----------------------------------------------------------------------
    def _read(self, name, a, b, load=True):
        """Tile (a, b) of ``name`` after checking that it is a regular file of the expected size whose header
        names this kernel, this tile and whose data match its SHA-256 (skipped while the file's identity is the
        one verified before); raises :class:`_Bad` ("foreign" / "damaged") or ``ValueError`` (not a regular file).
        ``load=False``: verify only (nothing is read when the identity was verified before); returns None."""
        from ..readfile import opened

        path = self.tile_path(name, a, b)
        shape = self.shape(a, b)
        size = len(TILE_MAGIC) + HEADER_BYTES + 8 * shape[0] * shape[1]
        with opened(path, "tile store", nofollow=True) as (fh, _):
            st = os.fstat(fh.fileno())
            ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if st.st_size != size:
                raise _Bad("damaged", f"{st.st_size} bytes instead of {size}")
            if not load and self._verified.get((name, a, b)) == ident:
                return None
            buf = np.empty(size, dtype=np.uint8)            # aligned: the data view below is BLAS-ready
            got = fh.readinto(memoryview(buf))
        raw = memoryview(buf)
        if got != size or bytes(raw[:len(TILE_MAGIC)]) != TILE_MAGIC:
            raise _Bad("damaged", "not a tile file")
        fresh = self._verified.get((name, a, b)) != ident
        if fresh:
            try:
                head = json.loads(bytes(raw[len(TILE_MAGIC):len(TILE_MAGIC) + HEADER_BYTES]))
                kernel, tname, pos, shp, dtype, sha = (head[k] for k in ("kernel", "name", "tile", "shape", "dtype",
                                                                           "sha256"))
            except (ValueError, KeyError, TypeError) as exc:
                raise _Bad("damaged", f"unreadable header ({exc})") from None
            if (kernel, tname, pos) != (self.kernel, name, [a, b]):
                raise _Bad("foreign", f"a tile of kernel {str(kernel)[:12]}…, {tname} {pos}")
            if shp != list(shape) or dtype != "<f8" or \
                    hashlib.sha256(raw[len(TILE_MAGIC) + HEADER_BYTES:]).hexdigest() != sha:
                raise _Bad("damaged", "its data do not match their SHA-256")
            self._verified[(name, a, b)] = ident
        return buf[len(TILE_MAGIC) + HEADER_BYTES:].view("<f8").reshape(shape) if load else None

    def tile(self, name, a, b) -> np.ndarray:
        """Tile (a, b) of ``name``, verified (:meth:`_read`). A tile that fails is recomputed when this store was
        filled in this process (counted in ``diagnostics["recomputed_while_reading"]``, with a warning), else a
        ``RuntimeError`` names it."""
        try:
            return self._read(name, a, b)
        except (_Bad, ValueError) as exc:
            if isinstance(exc, ValueError) and "does not exist" not in str(exc):
                raise
            if self._repair is None:
                raise RuntimeError(f"tile store {self.path}: tile {name} {(a, b)} is missing or unusable ({exc}); "
                                   "fill the store again (the same call) to recompute it") from None
            warnings.warn(f"tile store {self.path}: tile {name} {(a, b)} changed while it was being used ({exc}); "
                          "recomputed", RuntimeWarning, stacklevel=2)
            self._repair(a, b)
            self.diagnostics["recomputed_while_reading"] = self.diagnostics.get("recomputed_while_reading", 0) + 1
            return self._read(name, a, b)

    def scan(self):
        """(pairs to compute, {"foreign": n, "damaged": n}): every tile read and verified once (module docstring)."""
        todo, bad = [], {}
        for a, b in self.pairs():
            reasons = []
            for k in self.kernels:
                try:
                    self._read(k, a, b, load=False)
                except _Bad as exc:
                    reasons.append(exc.reason)
                except ValueError as exc:
                    if "does not exist" not in str(exc):
                        raise
                    reasons.append("missing")
            if reasons:
                todo.append((a, b))
                worst = "foreign" if "foreign" in reasons else ("damaged" if "damaged" in reasons else None)
                if worst:
                    bad[worst] = bad.get(worst, 0) + 1
        return todo, bad

    def sweep(self, remove=True) -> int:
        """Refuse non-regular entries (links included) in the store, and hard links among its own files
        (``store.json``, the lock: ``st_nlink > 1``); remove orphan temporary tiles (the caller holds the lock;
        ``remove=False`` on a read-only store); returns how many were removed."""
        from ..readfile import kind

        removed = 0
        for entry in os.scandir(self.path):
            st = entry.stat(follow_symlinks=False)
            mode = st.st_mode
            if entry.name in self.kernels or entry.name in _KERNELS:
                if not stat.S_ISDIR(mode):
                    raise ValueError(f"out: {entry.path} is {kind(mode)}, not a directory of tiles; a tile store "
                                     "holds regular files and its kernel directories only")
                continue
            if not stat.S_ISREG(mode):
                raise ValueError(f"out: {entry.path} is {kind(mode)}; a tile store holds regular files only — "
                                 "remove it")
            if st.st_nlink > 1 and not _TEMP.fullmatch(entry.name):
                raise ValueError(f"out: {entry.path} is a hard link ({st.st_nlink} names for one file); a tile "
                                 "store's own files are never shared with another file — remove it (copy a store "
                                 "with cp -r, not cp -l)")
        for k in self.kernels:
            for entry in os.scandir(self.path / k):
                mode = entry.stat(follow_symlinks=False).st_mode
                if not stat.S_ISREG(mode):
                    raise ValueError(f"out: {entry.path} is {kind(mode)}; a tile store holds regular files only — "
                                     "remove it")
                if _TEMP.fullmatch(entry.name) and remove:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
        return removed

    def matvec(self, V, name="nngp", shift=0.0) -> np.ndarray:
        """(K + shift·I) V for V of shape (P,) or (P, r), streaming every stored tile once."""
        V = np.asarray(V, dtype=np.float64)
        one = V.ndim == 1
        V2 = V[:, None] if one else V
        out = shift * V2 if shift else np.zeros_like(V2)
        for a, b in self.pairs():
            T = self.tile(name, a, b)
            I, J = self.span(a), self.span(b)
            out[I] += T @ V2[J]
            if a != b:
                out[J] += T.T @ V2[I]
        return out[:, 0] if one else out

    def diagonal(self, name="nngp") -> np.ndarray:
        return np.concatenate([np.diag(self.tile(name, a, a)) for a in range(self.n_blocks)])

    def to_array(self, name="nngp") -> np.ndarray:
        """The full P×P matrix (for small P and tests only: it is what the store exists to avoid)."""
        out = np.empty((self.P, self.P))
        for a, b in self.pairs():
            T = self.tile(name, a, b)
            out[self.span(a), self.span(b)] = T
            out[self.span(b), self.span(a)] = T.T
        return out

    # -- creation -----------------------------------------------------------------------------------
    @classmethod
    def open(cls, path) -> "TileStore":
        from ..readfile import parse_json, read_text

        path = Path(path)
        try:
            meta = parse_json(read_text(path / "store.json", "store.json", 1 << 24), "store.json")
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} store")
            if meta.get("version") != VERSION:
                raise ValueError(f"written by another version of limits (format {meta.get('version')!r}, this one "
                                 f"reads {VERSION}: tiles without digests are never trusted); remove it or choose "
                                 "another directory")
            kernels = tuple(meta["kernels"])
            if not kernels or any(k not in _KERNELS for k in kernels):
                raise ValueError(f"kernels {kernels!r}")
            s = cls(path, int(meta["P"]), int(meta["block"]), kernels, dict(meta["model"]), str(meta["x_sha256"]))
            if meta.get("kernel") != s.kernel:
                raise ValueError("its kernel digest does not match its own description (edited or damaged)")
            return s
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise ValueError(f"out: {path} is not a readable kernel tile store ({exc})") from None

    @classmethod
    def create(cls, path, P, block, kernels, model, x_sha256) -> "TileStore":
        """Open the store at ``path`` if it holds the same kernel (then its tiles are reused), else create it;
        a store of a different kernel (model, inputs, block or kernels) is refused, never overwritten. The caller
        holds :func:`store_lock`."""
        from ..results import atomic_write_text

        path = Path(path)
        if (path / "store.json").exists() or (path / "store.json").is_symlink():
            s = cls.open(path)
            same = (s.P, s.block, s.model, s.x_sha256) == (P, block, model, x_sha256)
            if not same or not set(kernels) <= set(s.kernels):
                raise ValueError(f"out: {path} holds the tiles of a different kernel (model, inputs, block or "
                                 "kernels differ); choose another directory or remove it")
            return s
        if any(e.name not in (LOCK_NAME, HOLDER_NAME) and not _TEMP.fullmatch(e.name) for e in os.scandir(path)):
            raise ValueError(f"out: {path} is a non-empty directory without store.json; choose an empty or new one")
        s = cls(path, int(P), int(block), tuple(kernels), model, x_sha256)
        meta = {"format": FORMAT, "version": VERSION, "P": int(P), "block": int(block), "kernels": list(kernels),
                "model": model, "x_sha256": x_sha256, "kernel": s.kernel}
        for k in kernels:
            (path / k).mkdir(exist_ok=True)
        atomic_write_text(path / "store.json", json.dumps(meta, indent=1, sort_keys=True))
        return s


def checked_inputs(model, get, X, what):
    """(model, kernels, X) validated at the edge: a kernel-regime model (as :func:`limits.kernels.kernel_blocked`
    requires) and X a finite P×d_in float64 array, or a composition (``limits.serial``) and X of shape ``(P, d)`` or
    ``(P, *spatial, C)`` that it maps to a read-out (checked on the first input before anything is stored);
    ``get`` ⊆ {"nngp", "ntk"}."""
    from ..checks import finite_array
    from ..layers import as_serial
    from ..model import ModelError, as_model

    get = (get,) if isinstance(get, str) else tuple(get)
    if not get or any(g not in _KERNELS for g in get) or len(set(get)) != len(get):
        raise ValueError(f"get must be a non-empty subset of {_KERNELS}, got {get!r}")
    s = as_serial(model)
    if s is not None:
        from .composed import composition_inputs, kernel as composed_kernel

        X = composition_inputs(X, "X")
        composed_kernel(s, X[:1], None, get)          # the composition's own errors (shapes, spatial read-out) now
        return s, get, X
    m = as_model(model)
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    if "ntk" in get and m.param_name == "SP":
        raise ModelError(f"{what}: the NTK of a standard-parameterised (SP) network grows ∝ N; use "
                         "parameterisation='NTK' or get=('nngp',)")
    X = finite_array(X, "X")
    if X.ndim != 2 or X.shape[1] != m.d_in or X.shape[0] < 1:
        raise ValueError(f"X must be a P×{m.d_in} array (the model's d_in), got shape {X.shape}")
    return m, get, X


def is_composition(m) -> bool:
    from ..layers import Serial

    return isinstance(m, Serial)


def model_record(m) -> dict:
    """The model as a JSON-able dict (what store.json records and the kernel digest hashes): a composition's
    canonical serialisation (``Serial.to_dict``: every layer, its hyperparameters as round-tripping floats), a
    model's ``to_json``; a model with an unregistered callable activation has none, and cannot be stored."""
    try:
        return json.loads(json.dumps(m.to_dict(), sort_keys=True)) if is_composition(m) else json.loads(m.to_json())
    except (TypeError, ValueError) as exc:
        raise ValueError("a tile store records its model in store.json: use a registered activation name "
                         f"({exc})") from None


def _dask_client(scheduler, n_workers, memory_limit):
    """(client, objects to close): a LocalCluster of ``n_workers`` single-threaded worker processes with
    ``memory_limit`` each when ``scheduler`` is None, else the scheduler at that address / the Client given."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:                       # pragma: no cover — depends on the install
        raise ValueError("backend='dask' needs dask.distributed: pip install 'limits[cluster]'") from exc
    if isinstance(scheduler, Client):
        return scheduler, []
    if scheduler is None:
        import logging

        from ..interrupts import children_ignore_sigint

        n = int(n_workers) if n_workers else max(1, os.cpu_count() or 1)
        # a Ctrl-C reaches the driver only (no worker tracebacks); dask's own log lines stay quiet — a failed
        # task reaches us through its future, and "lost scattered data" at an interrupted shutdown is expected
        with children_ignore_sigint():
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                                   dashboard_address=":0", silence_logs=logging.CRITICAL)
        client = Client(cluster)
        return client, [client, cluster]
    if not isinstance(scheduler, str) or not scheduler.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        raise ValueError(f"scheduler must be None, an address like tcp://host:8786 or a distributed.Client, "
                         f"got {scheduler!r}")
    try:
        client = Client(scheduler, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"scheduler: cannot connect to {scheduler}: {exc}") from exc
    return client, [client]


def _run_dask(todo, store, m, X, client, bar, compute):
    """Submit the missing tiles as tasks (at most 4 per worker in flight); X is scattered once."""
    from distributed import as_completed

    nw = max(1, len(client.scheduler_info().get("workers", {})))
    Xf = client.scatter(X, broadcast=True)
    it = iter(todo)
    futures, cpu = {}, 0.0

    def submit(ab):
        a, b = ab
        f = client.submit(compute, m, Xf, a, b, store.block, store.kernels, store.targets(a, b), pure=False,
                          key=f"limits-tile-{store.kernel[:12]}-{a}-{b}-{time.monotonic_ns()}")
        futures[f] = ab
        return f

    ac = as_completed([submit(ab) for _, ab in zip(range(4 * nw), it)])
    try:
        for fut in ac:
            ab = futures.pop(fut)
            try:
                cpu += fut.result()
            except OSError:                  # a full disk, a file too large: the user's to fix, named by its path
                raise
            except Exception as exc:  # noqa: BLE001 — KilledWorker after dask's allowed retries, …
                raise RuntimeError(f"tile {ab} failed on the cluster ({type(exc).__name__}: {exc}); the tiles "
                                   "already written are kept: run the same call again to resume") from exc
            bar.update(1)
            nxt = next(it, None)
            if nxt is not None:
                ac.add(submit(nxt))
    finally:
        if futures:
            client.cancel(list(futures))
    return cpu


def is_tile_store(path) -> bool:
    """Whether ``path`` holds a tile store's description (``store.json``; :meth:`TileStore.open` checks it)."""
    return os.path.lexists(Path(path) / "store.json")


def store_dir(out) -> Path:
    """The store directory, created if missing: a new or empty directory, or a tile store
    (:func:`limits.stores.check_store_dir`; anything else — a file, a foreign non-empty directory — is refused
    before a file is written into it)."""
    from ..stores import check_store_dir

    path = Path(out)
    check_store_dir(path, "out", "kernel tile store", is_tile_store, own=(LOCK_NAME, HOLDER_NAME))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"out: cannot create the tile store {path} ({exc.strerror or exc})") from None
    return path


def fill_tiles(model, X, out, compute, *, block=2048, get=("nngp",), backend="serial", scheduler=None,
               n_workers=None, memory_limit="2GiB", progress=None) -> TileStore:
    """Fill (or complete) the tile store ``out`` with the read-out kernels ``get`` of ``model`` on ``X``;
    ``compute(model, X, a, b, block, kernels, targets)`` computes tile (a, b), writes it to its ``(path, header)``
    targets (:func:`write_tiles`) and returns its CPU seconds (:func:`limits.kernels.blocked.compute_tile`).

    ``backend``: "serial" (this process) or "dask" (``scheduler`` None → a LocalCluster of ``n_workers``
    single-threaded workers with ``memory_limit`` each; an address string or a ``distributed.Client``
    → that cluster, whose workers must see ``out`` on a shared file system). Tiles already in ``out`` are read
    and verified (module docstring): those of this kernel are reused — a killed run, of a worker or of this
    process, resumes where it stopped — and those of another kernel or damaged are recomputed. Each tile
    equals the corresponding block of :func:`limits.kernels.kernel_blocked` (same recursion, same
    arithmetic per entry). ``model`` may be a composition (``limits.serial``; module docstring). Before a tile is
    computed, the missing tiles' disk and one task's memory are checked (:func:`check_resources`). Holds the
    store's lock while it runs (:func:`store_lock`). Returns the
    :class:`TileStore`; ``diagnostics`` hold ``tiles``, ``computed``, ``reused``, ``recomputed`` ({"foreign": n,
    "damaged": n}), ``orphans_removed``, ``kernel`` (the digest), ``seconds`` (wall), ``task_cpu_seconds``,
    ``worker_memory_bytes`` (the per-task estimate, :func:`task_memory`) and ``disk_bytes_estimate``. A Ctrl-C stops the run with a ``KeyboardInterrupt`` saying
    that the tiles written are kept and a rerun resumes.
    """
    from ..checks import positive_int

    m, get, X = checked_inputs(model, get, X, "limits.kernels.kernel_blocked")
    block = positive_int(block, "block")
    if backend not in ("serial", "dask"):
        raise ValueError(f"backend must be 'serial' or 'dask', got {backend!r}")
    if backend == "serial" and scheduler is not None:
        raise ValueError("scheduler: only meaningful with backend='dask'")
    P = X.shape[0]
    block = min(block, P)
    path = store_dir(out)
    from ..stores import writable

    if not writable(path):
        with store_lock(path):
            return _read_only(path, P, block, get, m, X)
    with store_lock(path) as stale:
        store = TileStore.create(path, P, block, tuple(get), model_record(m), _digest(X))
        store.kernels = tuple(get)
        t0 = time.perf_counter()
        orphans = store.sweep()
        todo, bad = store.scan()
        if bad:
            warnings.warn(f"tile store {path}: " + ", ".join(f"{n} {k} tile{'s' * (n > 1)}" for k, n in bad.items())
                          + " (" + "; ".join({"foreign": "of another kernel", "damaged": "whose bytes do not match "
                                              "their digest"}[k] for k in bad) + ") recomputed", RuntimeWarning,
                          stacklevel=3)
        est = check_resources(store, todo, m, X, get, backend, scheduler, memory_limit)
        cpu = _fill(store, todo, m, X, compute, backend, scheduler, n_workers, memory_limit, progress)
        left, _ = store.scan()
        if left:
            raise RuntimeError(f"out: {len(left)} tiles of {out} are still missing after the run (first {left[0]}); "
                               "run the same call again to resume")
    n = len(store.pairs())
    store.diagnostics = {"tiles": n, "computed": len(todo), "reused": n - len(todo), "recomputed": bad,
                         "orphans_removed": orphans, "kernel": store.kernel,
                         "backend": backend, "seconds": time.perf_counter() - t0, "task_cpu_seconds": cpu,
                         "worker_memory_bytes": est["task_memory_bytes"], "disk_bytes_estimate": est["disk_bytes"]}
    if stale is not None:
        store.diagnostics["stale_lock_pid"] = stale
    store._repair = lambda a, b: compute(m, X, a, b, block, store.kernels, store.targets(a, b))
    return store


def _read_only(path, P, block, get, m, X) -> TileStore:
    """A complete store on a read-only file system (or a directory we cannot write), read as it is: every tile
    verified, nothing written; a missing or unusable tile is refused with the count."""
    t0 = time.perf_counter()
    if not is_tile_store(path):
        raise ValueError(f"out: {path} is on a read-only file system (or not writable) and holds no tile store; "
                         "choose a writable directory")
    store = TileStore.open(path)
    if (store.P, store.block, store.model, store.x_sha256) != (P, block, model_record(m), _digest(X)) \
            or not set(get) <= set(store.kernels):
        raise ValueError(f"out: {path} holds the tiles of a different kernel (model, inputs, block or kernels "
                         "differ) and is read-only; choose another directory")
    store.kernels = tuple(get)
    store.sweep(remove=False)
    todo, bad = store.scan()
    n = len(store.pairs())
    if todo:
        raise ValueError(f"out: {path} is on a read-only file system (or not writable) and {len(todo)} of {n} tiles "
                         f"are missing or unusable ({', '.join(f'{v} {k}' for k, v in bad.items()) or 'missing'}); "
                         "fill the store where it is writable (or copy it and give the copy)")
    store.diagnostics = {"tiles": n, "computed": 0, "reused": n, "recomputed": {}, "orphans_removed": 0,
                         "kernel": store.kernel, "backend": "none (read-only store)", "read_only": True,
                         "seconds": time.perf_counter() - t0, "task_cpu_seconds": 0.0, "worker_memory_bytes": 0.0,
                         "disk_bytes_estimate": 0.0}
    return store


def _fill(store, todo, m, X, compute, backend, scheduler, n_workers, memory_limit, progress) -> float:
    """Compute the tiles ``todo`` (serially or as dask tasks); returns their CPU seconds. A Ctrl-C becomes a
    ``KeyboardInterrupt`` whose message says that the tiles written are kept and a rerun resumes (also in library
    use, where dask's callbacks may swallow the Ctrl-C: :func:`limits.interrupts.recorded`)."""
    from ..interrupts import recorded
    from ..progress import progress as _progress

    bar = _progress(total=len(todo), desc=f"kernel tiles {store.P}×{store.P} ({backend})",
                    disable=None if progress is None else not progress)
    cpu = 0.0
    try:
        with recorded():
            if todo and backend == "serial":
                for a, b in todo:
                    cpu += compute(m, X, a, b, store.block, store.kernels, store.targets(a, b))
                    bar.update(1)
            elif todo:
                client, own = _dask_client(scheduler, n_workers, memory_limit)
                try:
                    cpu = _run_dask(todo, store, m, X, client, bar, compute)
                finally:
                    _close_quietly(own)
    except KeyboardInterrupt:
        kept = sum(all(os.path.isfile(store.tile_path(k, a, b)) for k in store.kernels) for a, b in store.pairs())
        raise KeyboardInterrupt(f"{kept} of {len(store.pairs())} tiles are kept in {store.path}; run the same "
                                "command again to resume") from None
    finally:
        bar.close()
    return cpu


def _close_quietly(objs):
    """Close a dask client and cluster; their warnings and errors at shutdown (a worker already gone) are not ours."""
    for obj in objs:
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj.close()
