"""A kernel as a directory of tiles: ``kernel_blocked(model, X, out=DIR, backend=…)`` → :class:`TileStore`.

Layout of ``DIR``::

    store.json                      what the tiles hold: P, block, kernels, the model, a SHA-256 of X
    nngp/000003_000007.npy          tile (I, J) = rows [3b, 4b) × columns [7b, 8b), I ≤ J (upper triangle)
    ntk/…                           the same for the NTK when requested

Why ``.npy`` tiles and not zarr: each tile is one file written by one task to a temporary name and
renamed into place (:func:`limits.results.atomic_write_bytes`), so a tile that exists is complete, a
killed worker or driver leaves only whole tiles, and a rerun computes exactly the missing ones; numpy
reads them with ``allow_pickle=False`` and no new dependency. (zarr would add a dependency whose chunk
writes we would still have to make atomic ourselves.) Two processes filling one store write identical
bytes under the same names, so the last rename wins harmlessly.

Each task is one tile through all layers and the read-out (``compute``, given by
:func:`limits.kernels.kernel_blocked`: the symmetric tile for I = J, the cross tile X_I × X_J otherwise), so a worker needs the
inputs (P×d, scattered once) and O(block²) numbers: about (3 + 2·kernels)·8·block² bytes (≈ 170 MiB at
block 2048 for the NNGP alone) whatever P is. The driver holds X and a list of tile names.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TileStore", "fill_tiles", "worker_memory", "checked_inputs", "model_record"]

FORMAT = "limits-kernel-tiles"
VERSION = 1
_KERNELS = ("nngp", "ntk")


def _digest(X) -> str:
    X = np.ascontiguousarray(X, dtype=np.float64)
    h = hashlib.sha256()
    h.update(repr(X.shape).encode())
    h.update(X.tobytes())
    return h.hexdigest()


def worker_memory(block, n_kernels=1) -> float:
    """Bytes one tile task holds at its peak: the tile's outputs, the fused recursion's scratch (7 arrays
    of kernel_blocked's inner block, at most 256²) and the serialised copy written to disk."""
    inner = min(int(block), 256)
    return 8.0 * ((2 * n_kernels + 1) * block * block + 7 * inner * inner)


def _write_npy(path, a):
    from ..results import atomic_write_bytes

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


def _complete(path, shape) -> bool:
    """True when ``path`` is a whole float64 ``.npy`` of ``shape`` (header read, size checked)."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shp, fortran, dtype = read(fh)
            start = fh.tell()
        return (tuple(shp) == tuple(shape) and dtype == np.float64 and not fortran
                and os.path.getsize(path) == start + 8 * int(np.prod(shape)))
    except (OSError, ValueError, SyntaxError):
        return False


@dataclass
class TileStore:
    """A kernel stored as upper-triangle tiles (module docstring). ``diagnostics`` of the run that
    filled it: tiles total / computed / reused, seconds, backend."""
    path: Path
    P: int
    block: int
    kernels: tuple
    model: dict
    x_sha256: str
    diagnostics: dict = field(default_factory=dict)

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
        return self.path / name / f"{a:06d}_{b:06d}.npy"

    def shape(self, a, b):
        s, t = self.span(a), self.span(b)
        return (s.stop - s.start, t.stop - t.start)

    def missing(self):
        """Tile pairs (a, b) for which some requested kernel has no complete file."""
        return [(a, b) for a, b in self.pairs()
                if not all(_complete(self.tile_path(k, a, b), self.shape(a, b)) for k in self.kernels)]

    # -- reading ------------------------------------------------------------------------------------
    def tile(self, name, a, b) -> np.ndarray:
        return np.load(self.tile_path(name, a, b), allow_pickle=False)

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
        path = Path(path)
        meta_path = path / "store.json"
        try:
            if not meta_path.is_file():
                raise ValueError("no store.json")
            if meta_path.stat().st_size > 1 << 24:
                raise ValueError("store.json is larger than 16 MiB")
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} v{VERSION} store")
            kernels = tuple(meta["kernels"])
            if not kernels or any(k not in _KERNELS for k in kernels):
                raise ValueError(f"kernels {kernels!r}")
            return cls(path, int(meta["P"]), int(meta["block"]), kernels, dict(meta["model"]), str(meta["x_sha256"]))
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise ValueError(f"out: {path} is not a readable kernel tile store ({exc})") from None

    @classmethod
    def create(cls, path, P, block, kernels, model, x_sha256) -> "TileStore":
        """Open the store at ``path`` if it holds the same kernel (then its tiles are reused), else create it;
        a store of a different kernel (model, inputs, block or kernels) is refused, never overwritten."""
        from ..results import atomic_write_text

        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ValueError(f"out: {path} exists and is not a directory")
        if (path / "store.json").exists():
            s = cls.open(path)
            same = (s.P, s.block, s.model, s.x_sha256) == (P, block, model, x_sha256)
            if not same or not set(kernels) <= set(s.kernels):
                raise ValueError(f"out: {path} holds the tiles of a different kernel (model, inputs, block or "
                                 "kernels differ); choose another directory or remove it")
            return s
        if path.exists() and any(path.iterdir()):
            raise ValueError(f"out: {path} is a non-empty directory without store.json; choose an empty or new one")
        meta = {"format": FORMAT, "version": VERSION, "P": int(P), "block": int(block), "kernels": list(kernels),
                "model": model, "x_sha256": x_sha256}
        for k in kernels:
            (path / k).mkdir(parents=True, exist_ok=True)
        atomic_write_text(path / "store.json", json.dumps(meta, indent=1, sort_keys=True))
        return cls(path, int(P), int(block), tuple(kernels), model, x_sha256)


def checked_inputs(model, get, X, what):
    """(model, kernels, X) validated at the edge: a kernel-regime model (as :func:`limits.kernels.kernel_blocked`
    requires), ``get`` ⊆ {"nngp", "ntk"}, X a finite P×d_in float64 array."""
    from ..checks import finite_array
    from ..model import ModelError, as_model

    m = as_model(model)
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    get = (get,) if isinstance(get, str) else tuple(get)
    if not get or any(g not in _KERNELS for g in get) or len(set(get)) != len(get):
        raise ValueError(f"get must be a non-empty subset of {_KERNELS}, got {get!r}")
    if "ntk" in get and m.param_name == "SP":
        raise ModelError(f"{what}: the NTK of a standard-parameterised (SP) network grows ∝ N; use "
                         "parameterisation='NTK' or get=('nngp',)")
    X = finite_array(X, "X")
    if X.ndim != 2 or X.shape[1] != m.d_in or X.shape[0] < 1:
        raise ValueError(f"X must be a P×{m.d_in} array (the model's d_in), got shape {X.shape}")
    return m, get, X


def model_record(m) -> dict:
    """The model as a JSON-able dict (what store.json records); a model with an unregistered callable
    activation has none, and cannot be stored."""
    try:
        return json.loads(m.to_json())
    except (TypeError, ValueError) as exc:
        raise ValueError("a tile store records its model in store.json: use a registered activation name "
                         f"({exc})") from None


def write_tiles(paths, arrays):
    """Write the tile arrays to their paths, each atomically (what a tile task does last)."""
    for p, a in zip(paths, arrays):
        _write_npy(p, a)


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

        n = int(n_workers) if n_workers else max(1, os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                               dashboard_address=":0", silence_logs=logging.ERROR)
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
        paths = [str(store.tile_path(k, a, b)) for k in store.kernels]
        f = client.submit(compute, m, Xf, a, b, store.block, store.kernels, paths, pure=False,
                          key=f"limits-tile-{store.x_sha256[:12]}-{a}-{b}-{time.monotonic_ns()}")
        futures[f] = ab
        return f

    ac = as_completed([submit(ab) for _, ab in zip(range(4 * nw), it)])
    try:
        for fut in ac:
            ab = futures.pop(fut)
            try:
                cpu += fut.result()
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


def fill_tiles(model, X, out, compute, *, block=2048, get=("nngp",), backend="serial", scheduler=None,
               n_workers=None, memory_limit="2GiB", progress=None) -> TileStore:
    """Fill (or complete) the tile store ``out`` with the read-out kernels ``get`` of ``model`` on ``X``;
    ``compute(model, X, a, b, block, kernels, paths)`` computes and writes tile (a, b) and returns its CPU
    seconds (:func:`limits.kernels.blocked.compute_tile`).

    ``backend``: "serial" (this process) or "dask" (``scheduler`` None → a LocalCluster of ``n_workers``
    single-threaded workers with ``memory_limit`` each; an address string or a ``distributed.Client``
    → that cluster, whose workers must see ``out`` on a shared file system). Tiles already complete in
    ``out`` are reused — a killed run, of a worker or of this process, resumes where it stopped. Each tile
    equals the corresponding block of :func:`limits.kernels.kernel_blocked` (same recursion, same
    arithmetic per entry). Returns the :class:`TileStore`; ``diagnostics`` hold ``tiles``, ``computed``,
    ``reused``, ``seconds`` (wall), ``task_cpu_seconds`` and ``worker_memory_bytes`` (the per-task bound).
    """
    from ..checks import positive_int
    from ..progress import progress as _progress

    m, get, X = checked_inputs(model, get, X, "limits.kernels.kernel_blocked")
    block = positive_int(block, "block")
    if backend not in ("serial", "dask"):
        raise ValueError(f"backend must be 'serial' or 'dask', got {backend!r}")
    if backend == "serial" and scheduler is not None:
        raise ValueError("scheduler: only meaningful with backend='dask'")
    P = X.shape[0]
    block = min(block, P)
    store = TileStore.create(out, P, block, tuple(get), model_record(m), _digest(X))
    store.kernels = tuple(get)
    todo = store.missing()
    t0, cpu = time.perf_counter(), 0.0
    bar = _progress(total=len(todo), desc=f"kernel tiles {P}×{P} ({backend})",
                    disable=None if progress is None else not progress)
    try:
        if todo and backend == "serial":
            for a, b in todo:
                cpu += compute(m, X, a, b, block, store.kernels, [store.tile_path(k, a, b) for k in store.kernels])
                bar.update(1)
        elif todo:
            client, own = _dask_client(scheduler, n_workers, memory_limit)
            try:
                cpu = _run_dask(todo, store, m, X, client, bar, compute)
            finally:
                for obj in own:
                    try:
                        obj.close()
                    except Exception:  # noqa: BLE001 — shutting down
                        pass
    finally:
        bar.close()
    left = store.missing()
    if left:
        raise RuntimeError(f"out: {len(left)} tiles of {out} are still missing after the run (first {left[0]}); "
                           "run the same call again to resume")
    n = len(store.pairs())
    store.diagnostics = {"tiles": n, "computed": len(todo), "reused": n - len(todo), "backend": backend,
                         "seconds": time.perf_counter() - t0, "task_cpu_seconds": cpu,
                         "worker_memory_bytes": worker_memory(block, len(get))}
    return store
