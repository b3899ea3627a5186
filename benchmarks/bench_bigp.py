"""Large-P kernels and kernel regression (issue 16 item 3): NNGP + NTK of an MLP, depth L = 10, erf and
relu, at P = 20,000 (quick: P = 2000) by ``limits.kernels.kernel_blocked``, and the kernel-regression
predictor ``limits.predict.kernel_regression`` at that size.

Every measured case runs in its own child process (``python benchmarks/bench_bigp.py --child SPEC``) with
one BLAS thread (OPENBLAS/OMP/MKL_NUM_THREADS=1, LIMITS_BLAS_THREADS=1) at nice 10, so that its peak
RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and its CPU time (``time.process_time``) are its own.
``seconds`` is that CPU time (the machine is shared: wall time is in the note).

Baseline = the plain numpy full-matrix recursion of the same formulas (every layer on whole P×P arrays,
the obvious vectorised code), at the largest P where it fits comfortably (P = 5000: about ten P×P
temporaries; at P = 20,000 that is 32 GB). The cost law (fitted exponent of CPU time in P, with its
standard error) is stated next to the theoretical 2 (kernel) and 3 (Cholesky).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
D_IN, DEPTH, SW2, SB2 = 20, 10, 1.5, 0.1
GiB = 2.0 ** 30


def _inputs(P, seed=0):
    return np.random.default_rng(seed).standard_normal((P, D_IN))


def _model(act, d_out=1):
    import limits

    return limits.mlp(D_IN, depth=DEPTH, activation=act, sigma_w2=SW2, sigma_b2=SB2, d_out=d_out)


def _numpy_recursion(X, act):
    """Plain numpy NNGP + NTK of the MLP on whole P×P arrays (no blocking, no symmetry, temporaries)."""
    P, d = X.shape
    K = SW2 * (X @ X.T) / d + SB2
    T = K.copy()
    for l in range(DEPTH + 1):
        q = np.diag(K).copy()
        if act == "erf":
            a = np.sqrt(np.outer(1 + 2 * q, 1 + 2 * q))
            s = np.clip(2 * K / a, -1.0, 1.0)
            E = (2 / np.pi) * np.arcsin(s)
            G = (4 / np.pi) / (a * np.sqrt(1 - s * s))
        else:
            n = np.sqrt(np.outer(q, q))
            c = np.clip(K / n, -1.0, 1.0)
            th = np.arccos(c)
            E = n * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi)
            G = (np.pi - th) / (2 * np.pi)
        K = SW2 * E + SB2
        T = K + SW2 * G * T
    return K, T


def _child(spec):
    """One measured case; prints a JSON line."""
    import resource

    os.nice(10)
    import limits
    from limits.blas import blas_threads

    kind, act, P = spec["kind"], spec["act"], int(spec["P"])
    X = _inputs(P)
    out = {}
    with blas_threads(1):
        # warm-up on 64 inputs (imports, first calls), not timed
        Xw = _inputs(64, seed=9)
        limits.kernels.kernel_blocked(_model(act), Xw, progress=False)
        limits.predict.kernel_regression(_model(act), Xw, Xw[:, :1], Xw[:8], "ntk", noise=1e-3, progress=False)
        _numpy_recursion(Xw, act)
        w0, c0 = time.perf_counter(), time.process_time()
        if kind == "kernel":
            r = limits.kernels.kernel_blocked(_model(act), X, block=spec.get("block", 256),
                                              dtype=np.dtype(spec.get("dtype", "float64")))
            out["path"] = r.diagnostics["path"]
        elif kind == "numpy":
            K, T = _numpy_recursion(X, act)
        elif kind == "regression":
            Xs = _inputs(spec["P_test"], seed=1)
            Y = np.sin(X[:, :1]) + 0.1 * np.random.default_rng(2).standard_normal((P, 1))
            r = limits.predict.kernel_regression(_model(act), X, Y, Xs, spec["kernel"], noise=spec["noise"],
                                                 var=True)
            out["stages"] = r.diagnostics["seconds"]
            out["memory_estimate_gib"] = r.memory_bytes / GiB
            out["var_min"] = float(np.min(r.var))
        elif kind == "cg":
            out.update(_cg_case(spec, X, act))
        elif kind == "float32":
            m = _model(act)
            a = limits.kernels.kernel_blocked(m, X, progress=False)
            b = limits.kernels.kernel_blocked(m, X, dtype=np.float32, progress=False)
            out["rel"] = max(float(np.max(np.abs(getattr(b, g) - getattr(a, g)) / np.abs(getattr(a, g))))
                             for g in ("nngp", "ntk"))
            out["abs_over_max"] = max(float(np.max(np.abs(getattr(b, g) - getattr(a, g))) / np.max(np.abs(getattr(a, g))))
                                      for g in ("nngp", "ntk"))
        out["cpu"] = time.process_time() - c0
        out["wall"] = time.perf_counter() - w0
        out["maxrss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GiB
        # correctness of the measured output on a random 300×300 block (cross kernel, untimed)
        rng = np.random.default_rng(3)
        if kind in ("kernel", "numpy"):
            perm = rng.permutation(P)                  # disjoint rows and columns: no coincident inputs
            i, j = np.sort(perm[:min(P // 2, 300)]), np.sort(perm[P // 2:][:300])
            ref = limits.kernels.kernel(_model(act), X[i], X[j])
            Kn, Tn = (r.nngp, r.ntk) if kind == "kernel" else (K, T)
            out["err"] = max(float(np.max(np.abs(Kn[np.ix_(i, j)] - ref.nngp)) / np.max(np.abs(ref.nngp))),
                             float(np.max(np.abs(Tn[np.ix_(i, j)] - ref.ntk)) / np.max(np.abs(ref.ntk))))
    print("BIGP " + json.dumps(out), flush=True)


def _cg_case(spec, X, act):
    """The large-P path (limits.largep): tiles on disk by dask tasks (LocalCluster of 2 single-threaded
    workers with 2 GiB each), block PCG streaming them, SLQ log det; optionally the Cholesky path on the
    same data for the difference of the means."""
    import resource
    import shutil
    import tempfile

    import limits

    P = X.shape[0]
    Xs = _inputs(spec["P_test"], seed=1)
    Y = np.sin(X[:, :1]) + 0.1 * np.random.default_rng(2).standard_normal((P, 1))
    store = tempfile.mkdtemp(prefix="limits-bench-tiles-", dir=os.environ.get("LIMITS_BENCH_TMP"))
    out = {}
    try:
        if spec.get("backend", "dask") == "dask":
            import logging

            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GiB", dashboard_address=":0",
                                   silence_logs=logging.ERROR)
            client = Client(cluster)
            sched = client
        else:
            client = sched = None
        w0, c0 = time.perf_counter(), time.process_time()
        r = limits.predict.kernel_regression(
            _model(act), X, Y, Xs, "nngp", noise=spec["noise"], solver="cg", var=np.arange(spec.get("var_points", 10)),
            backend=spec.get("backend", "dask"), scheduler=sched, store=store, rank=spec.get("rank"), progress=False)
        out["cg_wall"], out["cg_driver_cpu"] = time.perf_counter() - w0, time.process_time() - c0
        d = r.diagnostics
        out.update(iterations=d["iterations"], rank=d["rank"], stages=d["seconds"], lml=r.log_marginal_likelihood,
                   lml_se=d["log_marginal_likelihood_se"], lanczos_steps=d["lanczos_steps"],
                   true_residual=d["true_relative_residual"], tiles=d["tiles"]["tiles"],
                   task_cpu=d["tiles"]["task_cpu_seconds"], worker_bound_gib=d["tiles"]["worker_memory_bytes"] / GiB,
                   driver_memory_estimate_gib=r.memory_bytes / GiB,
                   disk_gib=sum(f.stat().st_size for f in Path(store).rglob("*.npy")) / GiB)
        if client is not None:
            out["worker_rss_gib"] = sorted(v * 1024 / GiB for v in client.run(
                lambda: __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss).values())
            out["worker_cpu"] = sum(client.run(time.process_time).values())
            client.close()
            cluster.close()
        out["driver_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GiB
        if spec.get("compare"):
            c0 = time.process_time()
            ref = limits.predict.kernel_regression(_model(act), X, Y, Xs, "nngp", noise=spec["noise"], var=True)
            out["chol_cpu"] = time.process_time() - c0
            out["mean_diff"] = float(np.max(np.abs(r.mean - ref.mean)) / np.max(np.abs(ref.mean)))
            out["var_diff"] = float(np.max(np.abs(r.var - ref.var[:r.var.size])) / np.max(np.abs(ref.var)))
            out["lml_z"] = (r.log_marginal_likelihood - ref.log_marginal_likelihood) / d["log_marginal_likelihood_se"]
    finally:
        shutil.rmtree(store, ignore_errors=True)
    return out


def _cg_rows(quick):
    """Issue 28's rows: the P = 50,000 dask path, iteration counts with and without the preconditioner,
    cost laws in P, and P = 20,000 against the Cholesky path."""
    big = 4000 if quick else 50000
    law = [1000, 2000] if quick else [5000, 10000, 20000]
    Pt, noise = 1000, 0.1
    rows = []
    runs = {P: _run_child({"kind": "cg", "act": "erf", "P": P, "P_test": Pt, "noise": noise,
                           "compare": P == law[-1]}) for P in law + [big]}
    jac = {P: _run_child({"kind": "cg", "act": "erf", "P": P, "P_test": 10, "noise": noise, "rank": 0,
                          "backend": "serial", "var_points": 1}) for P in law}
    r = runs[big]
    st = r["stages"]
    rows.append({"name": f"erf NNGP regression, P={big}, {Pt} test points, dask path (tiles on disk, PCG)",
                 "seconds": r["cg_driver_cpu"] + r["worker_cpu"], "baseline_seconds": None, "ratio": None,
                 "target": "every process's peak RSS bounded independent of P",
                 "note": f"CPU {r['cg_driver_cpu'] + r['worker_cpu']:.0f} s (driver {r['cg_driver_cpu']:.0f} s, 2 workers "
                         f"{r['worker_cpu']:.0f} s), wall {r['cg_wall']:.0f} s (tiles {st['tiles']:.0f} s, preconditioner "
                         f"{st['preconditioner']:.0f} s, CG {st['cg']:.0f} s, prediction {st['predict']:.0f} s, log det "
                         f"{st['logdet']:.0f} s); {r['tiles']} tiles, {r['disk_gib']:.1f} GiB on disk; peak RSS driver "
                         f"{r['driver_rss_gib']:.2f} GiB, workers {', '.join(f'{v:.2f}' for v in r['worker_rss_gib'])} GiB "
                         f"(bound per task {r['worker_bound_gib']:.2f} GiB, memory_limit 2 GiB); CG {r['iterations']} "
                         f"iterations (rank {r['rank']}, true residual {r['true_residual']:.1e}); log marginal likelihood "
                         f"{r['lml']:.1f} ± {r['lml_se']:.1f} (SLQ, {r['lanczos_steps']} Lanczos steps); noise {noise}"})
    its = ", ".join(f"{runs[P]['iterations']}" for P in law + [big])
    jits = ", ".join(f"{jac[P]['iterations']}" for P in law)
    rows.append({"name": "PCG iterations vs P (rank ⌈8√P⌉ pivoted Cholesky vs diagonal only)", "seconds": r["stages"]["cg"],
                 "baseline_seconds": None, "ratio": None, "target": "flat in P with the preconditioner",
                 "note": f"pivoted Cholesky: {its} iterations at P = {law + [big]}; diagonal (Jacobi) preconditioner: "
                         f"{jits} at P = {law}; tolerance 1e-10, noise {noise}"})
    tk = [runs[P]["task_cpu"] for P in law + [big]]
    e, se = _fit(law + [big], tk)
    cg = [runs[P]["stages"]["cg"] for P in law + [big]]
    e2, se2 = _fit(law + [big], cg)
    rows.append({"name": "large-P path cost laws in P", "seconds": tk[-1], "baseline_seconds": None, "ratio": None,
                 "target": "tiles ∝ P², CG ∝ iterations·P²",
                 "note": f"tile CPU ∝ P^{_law(e, se)} ({', '.join(f'{t:.0f}' for t in tk)} s); CG wall ∝ P^{_law(e2, se2)} "
                         f"({', '.join(f'{t:.1f}' for t in cg)} s; wall on a machine shared with other jobs) over P = {law + [big]}"})
    c = runs[law[-1]]
    rows.append({"name": f"P={law[-1]}: dask/PCG path vs in-memory Cholesky", "seconds": c["cg_driver_cpu"] + c["worker_cpu"],
                 "baseline_seconds": c["chol_cpu"], "ratio": c["chol_cpu"] / (c["cg_driver_cpu"] + c["worker_cpu"]),
                 "target": "same mean to 1e-8",
                 "note": f"max relative difference of the means {c['mean_diff']:.1e}, of the variances {c['var_diff']:.1e}; "
                         f"log marginal likelihood z = {c['lml_z']:+.2f} (SLQ estimate vs exact); Cholesky CPU "
                         f"{c['chol_cpu']:.0f} s; peak RSS of the PCG driver {c['driver_rss_gib']:.2f} GiB (measured before the "
                         f"Cholesky ran in the same process; the Cholesky path holds the P×P kernel, "
                         f"{8 * law[-1] ** 2 / GiB:.1f} GiB)"})
    return rows


def _cached(spec):
    """A child result recorded in ``$LIMITS_BENCH_CHILDREN`` (JSON lines {spec, out}), or None: long runs
    (P = 50,000 takes the better part of an hour) resume instead of starting over."""
    path = os.environ.get("LIMITS_BENCH_CHILDREN")
    if not path or not os.path.exists(path):
        return None
    key = json.dumps(spec, sort_keys=True)
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        if json.dumps(rec["spec"], sort_keys=True) == key:
            return rec["out"]
    return None


def _run_child(spec):
    hit = _cached(spec)
    if hit is not None:
        return hit
    out = _measure_child(spec)
    path = os.environ.get("LIMITS_BENCH_CHILDREN")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"spec": spec, "out": out}) + "\n")
    return out


def _measure_child(spec):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               LIMITS_BLAS_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                       env=env, stdout=subprocess.PIPE, text=True, check=True)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("BIGP ")][-1]
    print(f"bench_bigp child {json.dumps(spec)} -> {line[5:]}", file=sys.stderr, flush=True)
    return json.loads(line[5:])


def _fit(Ps, ts):
    """Exponent b of t ≈ a P^b by least squares in log–log, with its standard error (None for 2 points)."""
    x, y = np.log(np.asarray(Ps, float)), np.log(np.asarray(ts, float))
    if len(x) > 3:
        c, cov = np.polyfit(x, y, 1, cov=True)
        return float(c[0]), float(np.sqrt(cov[0, 0]))
    return float(np.polyfit(x, y, 1)[0]), None


def _law(b, se):
    return f"{b:.2f}" + (f" ± {se:.2f}" if se is not None else "")


def run(quick: bool) -> list[dict]:
    if os.environ.get("LIMITS_BENCH_BIGP") == "cg":       # only the large-P path's rows (issue 28)
        return _cg_rows(quick)
    return _memory_rows(quick) + _cg_rows(quick)


def _memory_rows(quick: bool) -> list[dict]:
    big = 2000 if quick else 20000
    base_P = 1000 if quick else 5000
    law_P = [500, 1000, 2000] if quick else [2500, 5000, 10000, 20000]
    rows = []
    for act in ("erf", "relu"):
        k = {P: _run_child({"kind": "kernel", "act": act, "P": P}) for P in sorted(set(law_P + [base_P, big]))}
        b = _run_child({"kind": "numpy", "act": act, "P": base_P})
        r = k[big]
        rows.append({"name": f"{act} MLP L={DEPTH} NNGP+NTK, P={big}, kernel_blocked (float64)",
                     "seconds": r["cpu"], "baseline_seconds": None, "ratio": None,
                     "target": "peak RSS < 8 GB" if not quick else "(full: P = 20,000, < 8 GB)",
                     "note": f"CPU {r['cpu']:.1f} s, wall {r['wall']:.1f} s, peak RSS {r['maxrss_gib']:.2f} GiB "
                             f"(output 2·P²·8 B = {16 * big * big / GiB:.2f} GiB); path {r['path']}; max rel. "
                             f"error on a random 300×300 off-diagonal block vs limits.kernels.kernel {r['err']:.1e}"})
        kb = k[base_P]
        rows.append({"name": f"{act} MLP L={DEPTH} NNGP+NTK, P={base_P}: kernel_blocked vs plain numpy",
                     "seconds": kb["cpu"], "baseline_seconds": b["cpu"], "ratio": b["cpu"] / kb["cpu"],
                     "target": "(ratio > 1)",
                     "note": f"blocked CPU {kb['cpu']:.1f} s (wall {kb['wall']:.1f}), peak RSS {kb['maxrss_gib']:.2f} GiB; "
                             f"numpy full-matrix recursion CPU {b['cpu']:.1f} s (wall {b['wall']:.1f}), peak RSS "
                             f"{b['maxrss_gib']:.2f} GiB, max rel. diff to the cross kernel {b['err']:.1e}"})
        ts = [k[P]["cpu"] for P in law_P]
        rss = ", ".join(f"{k[P]['maxrss_gib']:.2f}" for P in law_P)
        e, se = _fit(law_P, ts)
        rows.append({"name": f"{act} kernel_blocked cost law in P", "seconds": ts[-1], "baseline_seconds": None,
                     "ratio": None, "target": "exponent 2 (theory)",
                     "note": f"fitted CPU ∝ P^{_law(e, se)} over P = {law_P} (CPU {', '.join(f'{t:.2f}' for t in ts)} s); "
                             f"peak RSS {rss} GiB"})
    f = [_run_child({"kind": "float32", "act": act, "P": 2000}) for act in ("erf", "relu")]
    rows.append({"name": "float32 error (erf and relu, NNGP and NTK, L=10, P=2000)", "seconds": f[0]["cpu"] + f[1]["cpu"],
                 "baseline_seconds": None, "ratio": None, "target": "≤ 2⁻²⁴ = 5.96e-8 relative (one rounding)",
                 "note": f"max relative entry error vs float64: erf {f[0]['rel']:.3g}, relu {f[1]['rel']:.3g}; "
                         f"max abs error / max |K|: erf {f[0]['abs_over_max']:.3g}, relu {f[1]['abs_over_max']:.3g}"})
    # kernel regression: the NNGP posterior (cost law of the Cholesky) and the NTK flow limit with variance
    Pt = 1000
    reg_P = [500, 1000, 2000] if quick else [5000, 10000, 20000]
    g = {P: _run_child({"kind": "regression", "act": "erf", "P": P, "P_test": Pt, "kernel": "nngp", "noise": 1e-6})
         for P in reg_P}
    r = g[big]
    ch = [g[P]["stages"]["cholesky"] for P in reg_P]
    e, se = _fit(reg_P, ch)
    st = r["stages"]
    rows.append({"name": f"erf NNGP kernel regression, P={big}, {Pt} test points (mean + variance)",
                 "seconds": r["cpu"], "baseline_seconds": None, "ratio": None, "target": "peak RSS < 8 GB",
                 "note": f"CPU {r['cpu']:.1f} s, wall {r['wall']:.1f} s (kernel {st['kernel']:.1f} s, in-place Cholesky + "
                         f"solve {st['cholesky']:.1f} s, test kernels + prediction {st['predict']:.1f} s), peak RSS "
                         f"{r['maxrss_gib']:.2f} GiB (estimate {r['memory_estimate_gib']:.2f} GiB); noise 1e-6; "
                         f"Cholesky wall time ∝ P^{_law(e, se)} over P = {reg_P} ({', '.join(f'{t:.1f}' for t in ch)} s), "
                         f"theory 3"})
    n = _run_child({"kind": "regression", "act": "erf", "P": big, "P_test": Pt, "kernel": "ntk", "noise": 0.0})
    st = n["stages"]
    rows.append({"name": f"erf NTK gradient-flow limit (t → ∞), P={big}, {Pt} test points (mean + variance)",
                 "seconds": n["cpu"], "baseline_seconds": None, "ratio": None, "target": "peak RSS < 8 GB",
                 "note": f"CPU {n['cpu']:.1f} s, wall {n['wall']:.1f} s (NNGP+NTK kernels {st['kernel']:.1f} s, "
                         f"Cholesky of Θ {st['cholesky']:.1f} s, prediction {st['predict']:.1f} s), peak RSS "
                         f"{n['maxrss_gib']:.2f} GiB (estimate {n['memory_estimate_gib']:.2f} GiB: K_XX and Θ_XX); "
                         f"min variance {n['var_min']:.3g}"})
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(json.loads(sys.argv[2]))
    else:
        for row in run("--quick" in sys.argv):
            print(row)
