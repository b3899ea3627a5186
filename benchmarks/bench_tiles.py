"""Images beyond one machine (issue 36 goal 5): the CNN-GP + CNTK of 16×16 digits at P = 2000 as a tile store
filled by dask.distributed (``limits.kernels.kernel_blocked(net, X, out=DIR, backend="dask")``), interrupted and
resumed::

    nice python benchmarks/bench_tiles.py [--P 2000] [--json benchmarks/results/tiles.json]
    python benchmarks/run.py tiles --json benchmarks/results/tiles.json     # the same (--quick: P = 400)

Data: scikit-learn's digits (1797 images of 8×8, values /16), each pixel repeated 2×2 (``np.kron(img, ones((2, 2)))``
→ 16×16×1), followed by their left–right mirror images (3594 in all); the first P. Network: 3 × [Conv 3×3 SAME
(σ_w² = 2, σ_b² = 0.1), ReLU] → Flatten → Dense (σ_w² = 1, σ_b² = 0); tiles of 256 inputs.

Every run is a child process (``--child``) at nice 10 with one BLAS thread, its own LocalCluster of 2 single-threaded
worker processes (2 GiB each); it reports the driver's CPU, the workers' CPU (``getrusage`` in each worker, so task
CPU plus dask's own), the tasks' CPU (``time.thread_time`` of each task), wall time, and each worker's peak RSS.

1. estimate: the in-memory packed kernel at P = 200 (one process), extrapolated ∝ P² — the run is refused when it
   would exceed ``--max-cpu-minutes`` (default 30);
2. one-shot: the store filled in one run;
3. interrupted: the same call on a new store, a SIGINT (Ctrl-C) sent to the child once ``--stop-at`` tiles are on
   disk; then the same call again (resume): the tiles it computes must be exactly the missing ones and every tile
   file must equal the one-shot store's byte for byte;
4. checks: four tiles recomputed in this process (serial backend) equal the dask tiles bit for bit, and a
   400-input subset spanning three tile rows equals ``limits.kernels.kernel(net, X_subset)`` to 1e-12;
5. baseline: the in-memory ``limits.kernels.kernel(net, X)`` at the same P (one process, the one-machine path).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BLOCK, WORKERS, WORKER_MEMORY = 256, 2, "2GiB"
GiB = 2.0 ** 30
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LIMITS_BLAS_THREADS": "1"}


def images(P):
    """The first P of the 16×16 digits and their mirror images (module docstring)."""
    from sklearn.datasets import load_digits

    d = load_digits().images / 16.0
    big = np.kron(d, np.ones((1, 2, 2)))
    X = np.concatenate([big, big[:, :, ::-1]])[..., None]
    if P > X.shape[0]:
        raise ValueError(f"--P: at most {X.shape[0]} images")
    return np.ascontiguousarray(X[:P])


def network():
    import limits

    L = limits.layers
    conv = [x for _ in range(3) for x in (L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1),
                                           L.Activation("relu"))]
    return limits.serial(*conv, L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.0))


# ---------------------------------------------------------------------------------------------- children
def _worker_usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": r.ru_utime + r.ru_stime, "maxrss": r.ru_maxrss * 1024.0}


def _child_fill(a):
    import logging

    from limits import interrupts

    def ctrl_c(signum, frame):          # as the command line: recorded, so that a KeyboardInterrupt that lands in a
        interrupts.note(signum)         # callback where Python ignores it still stops the run at the next tile
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, ctrl_c)

    from distributed import Client, LocalCluster

    import limits

    X, net = images(a.P), network()
    out = {}
    w0, c0 = time.perf_counter(), time.process_time()
    with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, memory_limit=WORKER_MEMORY,
                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        try:
            st = limits.kernels.kernel_blocked(net, X, block=BLOCK, out=a.store, backend="dask", scheduler=client)
            out.update({k: st.diagnostics[k] for k in ("tiles", "computed", "reused", "recomputed", "seconds",
                                                      "task_cpu_seconds", "worker_memory_bytes", "disk_bytes_estimate")})
        except KeyboardInterrupt as exc:
            out["interrupted"] = str(exc)
        usage = client.run(_worker_usage)
    out["driver_cpu"] = time.process_time() - c0
    out["wall"] = time.perf_counter() - w0
    out["worker_cpu"] = [u["cpu"] for u in usage.values()]
    out["worker_maxrss"] = [u["maxrss"] for u in usage.values()]
    print("TILES " + json.dumps(out, default=str), flush=True)


def _child_memory(a):
    import limits

    X, net = images(a.P), network()
    limits.kernels.kernel(network(), images(20))          # warm-up (imports, first calls)
    w0, c0 = time.perf_counter(), time.process_time()
    r = limits.kernels.kernel(net, X)
    out = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0,
           "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0}
    if a.store:
        np.save(Path(a.store) / "ref_ntk.npy", r.ntk[:400, :400])
    print("TILES " + json.dumps(out), flush=True)


def _nice():
    """Niceness 10 (the shared machine's convention), never more: ``nice python bench_tiles.py`` already is."""
    os.nice(max(0, 10 - os.nice(0)))


def _spawn(kind, P, store="", **kw):
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT), "LIMITS_PROGRESS_INTERVAL": "10"}
    env.pop("LIMITS_PROGRESS", None)                      # the default: a periodic line on a pipe
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", kind, "--P", str(P),
                             "--store", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=_nice, **kw)


def _result(proc, timeout=3600):
    out, err = proc.communicate(timeout=timeout)
    line = [ln for ln in out.splitlines() if ln.startswith("TILES ")]
    if not line:
        raise RuntimeError(f"child failed ({proc.returncode}): {err[-2000:]}")
    r = json.loads(line[-1][6:])
    r["progress_lines"] = sum("kernel tiles" in ln for ln in err.splitlines())
    return r


def _tile_files(store):
    return sorted(p for k in ("nngp", "ntk") for p in (Path(store) / k).glob("*.tile"))


# ---------------------------------------------------------------------------------------------- the run
def _estimate(P, max_minutes):
    import limits

    X, net = images(200), network()
    limits.kernels.kernel(net, X[:20])
    c0 = time.process_time()
    limits.kernels.kernel(net, X)
    per_pair = (time.process_time() - c0) / (200 * 201 / 2)
    est = per_pair * P * (P + 1) / 2
    if 3 * est > 60 * max_minutes:       # one-shot, interrupted + resumed, baseline
        raise SystemExit(f"estimated {3 * est / 60:.1f} CPU-min (> {max_minutes}); lower --P")
    return est


def _interrupted(P, store, stop_at):
    proc = _spawn("fill", P, store)
    n_files = 2 * stop_at                                 # NNGP and NTK files of stop_at tiles
    t0 = time.perf_counter()
    while proc.poll() is None and len(_tile_files(store)) < n_files:
        time.sleep(0.2)
        if time.perf_counter() - t0 > 3600:
            break
    proc.send_signal(signal.SIGINT)                       # a Ctrl-C of the driver (its workers ignore it)
    return _result(proc)


def _checks(P, one, ref_dir):
    """Serial tiles vs dask tiles (bit for bit) and a subset vs the in-memory kernel (relative error)."""
    import limits
    from limits.kernels.blocked import composition_tile
    from limits.kernels.tilestore import TileStore

    X, net = images(P), network()
    st = TileStore.open(one)
    n = st.n_blocks
    same = 0
    picks = [(0, 0), (0, n - 1), (n // 2, n // 2 + 1), (n - 1, n - 1)]
    for a, b in picks:
        r = composition_tile(net, X[st.span(a)], None if a == b else X[st.span(b)], ("nngp", "ntk"))
        same += all(np.array_equal(r[g], st.tile(g, a, b)) for g in ("nngp", "ntk"))
    sub = np.arange(min(400, P))
    ref = np.load(ref_dir / "ref_ntk.npy") if (ref_dir / "ref_ntk.npy").exists() else \
        limits.kernels.kernel(net, X[sub], get=("ntk",)).ntk
    full = np.empty((sub.size, sub.size))
    for a, b in st.pairs():
        I, J = st.span(a), st.span(b)
        if I.start < sub.size and J.start < sub.size:
            T = st.tile("ntk", a, b)[:sub.size - I.start, :sub.size - J.start]
            full[I.start:I.start + T.shape[0], J.start:J.start + T.shape[1]] = T
            full[J.start:J.start + T.shape[1], I.start:I.start + T.shape[0]] = T.T
    err = float(np.abs(full - ref).max() / np.abs(ref).max())
    return {"serial_equal": same, "serial_checked": len(picks), "max_rel_diff": err, "checked_inputs": int(sub.size)}


def measure(P, stop_at, max_minutes, tmp):
    est = _estimate(P, max_minutes)
    print(f"estimate: {est:.0f} CPU-s for the kernel at P = {P} (P = 200 in memory, ∝ P²)", flush=True)
    one, two = tmp / "one.tiles", tmp / "two.tiles"
    base = _result(_spawn("memory", P, tmp))
    r1 = _result(_spawn("fill", P, one))
    stop = _interrupted(P, two, stop_at)
    kept = len([p for p in (two / "nngp").glob("*.tile")])
    r2 = _result(_spawn("fill", P, two))
    identical = all(a.read_bytes() == b.read_bytes() for a, b in zip(_tile_files(one), _tile_files(two))) and \
        len(_tile_files(one)) == len(_tile_files(two)) == 2 * r1["tiles"]
    checks = _checks(P, one, tmp)
    disk = sum(p.stat().st_size for p in _tile_files(one))
    cpu = r1["driver_cpu"] + sum(r1["worker_cpu"])
    return {
        "name": f"CNN-GP + CNTK tiles, 16x16 digits, P={P}, dask 2 workers", "P": P, "side": 16, "block": BLOCK,
        "tiles": r1["tiles"], "cpu_seconds": cpu, "seconds": cpu, "wall": r1["wall"],
        "task_cpu_seconds": r1["task_cpu_seconds"], "driver_cpu_seconds": r1["driver_cpu"],
        "worker_cpu_seconds": r1["worker_cpu"], "worker_peak_rss": r1["worker_maxrss"],
        "task_memory_estimate": r1["worker_memory_bytes"], "disk_bytes": disk,
        "disk_bytes_estimate": r1["disk_bytes_estimate"], "estimate_cpu_seconds": est,
        "progress_lines": r1["progress_lines"],
        "baseline_cpu_seconds": base["cpu"], "baseline_wall": base["wall"], "baseline_maxrss": base["maxrss"],
        "ratio": base["cpu"] / cpu,
        "interrupt": {"stop_at": stop_at, "message": stop.get("interrupted", ""), "kept": kept,
                      "resume_computed": r2["computed"], "resume_reused": r2["reused"],
                      "resume_cpu_seconds": r2["driver_cpu"] + sum(r2["worker_cpu"]), "resume_wall": r2["wall"],
                      "only_missing": r2["computed"] == r1["tiles"] - kept and r2["reused"] == kept,
                      "bit_identical": bool(identical)},
        **checks,
        "target": "P ≥ 2000 at 16×16 on dask; resumed = one-shot bit for bit",
        "note": (f"tasks {r1['task_cpu_seconds']:.0f} s CPU of {cpu:.0f} s (driver + 2 workers), wall {r1['wall']:.0f} s; "
                 f"worker peak RSS {', '.join(f'{v / GiB:.2f}' for v in r1['worker_maxrss'])} GiB; in-memory "
                 f"kernel {base['cpu']:.0f} s CPU, {base['maxrss'] / GiB:.2f} GiB; interrupted at {kept} tiles, "
                 f"resume computed {r2['computed']} of {r1['tiles']}, bit-identical: {identical}"),
    }


def run(quick=False, P=None, stop_at=None, max_minutes=30.0):
    P = P or (400 if quick else 2000)
    n = -(-P // BLOCK)
    stop_at = stop_at or max(1, n * (n + 1) // 6)
    tmp = Path(tempfile.mkdtemp(prefix="limits-bench-tiles-", dir=os.environ.get("LIMITS_BENCH_TMP")))
    try:
        return [measure(P, stop_at, max_minutes, tmp)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def merge(path, rows):
    """Write ``rows`` (module "tiles") into the results file ``path``, replacing its earlier tiles rows."""
    from limits.results import atomic_write_text

    path = Path(path)
    old = json.loads(path.read_text()) if path.exists() else []
    keep = [r for r in old if r.get("module") != "tiles"]
    atomic_write_text(path, json.dumps(keep + [{"module": "tiles", **r} for r in rows], indent=1, default=str) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, default=2000)
    ap.add_argument("--stop-at", type=int, default=None, help="tiles on disk before the Ctrl-C (default 1/3)")
    ap.add_argument("--max-cpu-minutes", type=float, default=30.0)
    ap.add_argument("--json", default=None, help="write the row to this results file")
    ap.add_argument("--child", default=None, choices=("fill", "memory"), help=argparse.SUPPRESS)
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        os.environ.update(ENV)
        return _child_fill(a) if a.child == "fill" else _child_memory(a)
    _nice()
    rows = run(P=a.P, stop_at=a.stop_at, max_minutes=a.max_cpu_minutes)
    print(json.dumps(rows, indent=1, default=str))
    if a.json:
        merge(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
