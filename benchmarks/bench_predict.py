"""Prediction benchmark: infinite-width NTK gradient-flow ensemble (mean + covariance) at 50 times.

Workload (full size): P_train = 2000, P_test = 500, d = 20, 10-activation MLP (``limits.mlp(d, 9)``:
read-in, 9 hidden N×N layers, read-out; σ²_w = 1.5 (erf) / 2 (relu), σ²_b = 0.05), MSE with mean
reduction, flow, 50 log-spaced times; mean (50×500×1) and covariance (50×500×500).

Rows per activation, all measured in the same run (wall and CPU seconds):

* ``limits.predict.gradient_descent`` — cross kernels, one eigendecomposition of Θ_XX for every t,
  covariance as Σ_NNGP + W_t W_tᵀ with a triangular multiply per t.
* baseline "plain numpy": the same formulas written straightforwardly — joint (P_train + P_test)²
  NNGP/NTK by the textbook recursion (closed-form arc-sine / arc-cosine kernels), and per t
  ``E_t = V e^{−ηΛt} Vᵀ``, ``A_t = Θ_*X solve(Θ_XX, I − E_t)``, Σ_t = K_** + A K Aᵀ − A K_X* − K_*X Aᵀ.
  Run with the same BLAS thread count as limits (``$LIMITS_BLAS_THREADS``, default 1).
* neural-tangents ``predict.gradient_descent_mse_ensemble(kernel_fn, ...)(t, x_test, get="ntk",
  compute_cov=True)`` in float64, cold (including its jit compile) and warm, run in a separate
  interpreter (``LIMITS_NT_PYTHON``, default /work/venv-nt/bin/python) — skipped cleanly when that
  interpreter or neural_tangents is unavailable. The maximum relative difference of the means is
  reported (same conventions: NT's loss is ½Σ(f − y)²/(P·d_out), our ``reduction="mean"``).

Digits workload (the one of issue 27): scikit-learn's 8×8 digits (``limits.gallery.predict.digits_task``,
P = 1200 train / 400 test, 64 pixels, 10 one-hot outputs), MLP depth 3 (relu σ²_w = 2, erf σ²_w = 1.5;
σ²_b = 0.05). Rows, CPU time (``time.process_time``) best of 3 with the calls of limits and plain numpy
interleaved, BLAS on one thread for both:

* ``nngp_posterior(noise=1e-3)`` (mean, covariance, log marginal likelihood) vs plain numpy (joint
  (P+P_test)² NNGP recursion, Cholesky, triangular solves) vs neural-tangents
  ``gradient_descent_mse_ensemble(..., diag_reg=1e-3, diag_reg_absolute_scale=True)(t=None, get="nngp",
  compute_cov=True)`` (warm = best of 3 compiled calls; cold = its first call incl. compile).
* ``gradient_descent`` flow, ``reduction="mean"``, 20 log-spaced times, mean + covariance vs plain numpy (one
  eigendecomposition, per t M = Θ_*X V diag(g_t), Σ_t = K_** + M D Mᵀ − M C − (M C)ᵀ) vs neural-tangents
  with η_NT = 10 η (its loss divides by P·10 outputs; the note reports the agreement of the means, which
  checks that normalisation).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.special import erf

NT_PYTHON = os.environ.get("LIMITS_NT_PYTHON", "/work/venv-nt/bin/python")

# the peer's network, shared by both peer scripts: read-in Dense, depth × [act, Dense], act, read-out Dense
_NT_NET = r"""
d = np.load(sys.argv[1], allow_pickle=False)
cfg = json.loads(sys.argv[2])
act = {"erf": stax.Erf, "relu": stax.Relu}[cfg["act"]]
sw, sb = cfg["sw"], cfg["sb"]
layers = [stax.Dense(1, W_std=sw, b_std=sb)]
for _ in range(cfg["depth"]):
    layers += [act(), stax.Dense(1, W_std=sw, b_std=sb)]
layers += [act(), stax.Dense(1, W_std=sw, b_std=sb)]
_, _, kernel_fn = stax.serial(*layers)
"""

_NT_SCRIPT = r"""
import json, sys, time
import numpy as np
t_wall, t_cpu = time.perf_counter(), time.process_time()
import jax
jax.config.update("jax_enable_x64", True)
import neural_tangents as nt
from neural_tangents import stax
{net}t_import = time.perf_counter() - t_wall
def run():
    pred = nt.predict.gradient_descent_mse_ensemble(kernel_fn, d["X"], d["Y"], learning_rate=cfg["lr"])
    out = pred(t=d["t"], x_test=d["Xs"], get="ntk", compute_cov=True)
    return np.asarray(out.mean), np.asarray(out.covariance)
w0, c0 = time.perf_counter(), time.process_time()
mean, cov = run()
cold = (time.perf_counter() - w0, time.process_time() - c0)
w0, c0 = time.perf_counter(), time.process_time()
mean, cov = run()
warm = (time.perf_counter() - w0, time.process_time() - c0)
np.save(sys.argv[3], mean)
print(json.dumps({"cold_wall": cold[0], "cold_cpu": cold[1], "warm_wall": warm[0], "warm_cpu": warm[1],
                  "import_wall": t_import, "version": nt.__version__, "jax": jax.__version__,
                  "cov_diag_mean": float(np.mean(np.diagonal(cov, axis1=1, axis2=2)))}))
""".replace("{net}", _NT_NET.lstrip("\n"))


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


# ---------------------------------------------------------------------------------------------- plain numpy
def _expect(act, q1, q2, k):
    """E[φ(u)φ(v)] and E[φ'(u)φ'(v)] for (u, v) ~ N(0, [[q1, k], [k, q2]]) (closed forms)."""
    if act == "erf":
        a, b = 1 + 2 * q1, 1 + 2 * q2
        s = np.sqrt(a * b)
        E = 2 / np.pi * np.arcsin(np.clip(2 * k / s, -1, 1))
        G = 4 / np.pi / np.sqrt(a * b - 4 * k * k)
        return E, G
    s = np.sqrt(q1 * q2)
    c = np.clip(k / s, -1, 1)
    th = np.arccos(c)
    E = s / (2 * np.pi) * (np.sin(th) + (np.pi - th) * c)
    G = (np.pi - th) / (2 * np.pi)
    return E, G


def plain_kernels(Z, act, depth, sw2, sb2):
    """Textbook NNGP/NTK recursion on the joint Gram of Z (NTK parameterisation)."""
    K = sw2 * Z @ Z.T / Z.shape[1] + sb2
    T = K.copy()
    for _ in range(depth + 1):
        q = np.diag(K).copy()
        E, G = _expect(act, q[:, None], q[None, :], K)
        K_new = sw2 * E + sb2
        T = K_new + sw2 * G * T
        K = K_new
    return K, T


def plain_predict(X, Y, Xs, ts, act, depth, sw2, sb2, eta):
    P = X.shape[0]
    K, T = plain_kernels(np.vstack([X, Xs]), act, depth, sw2, sb2)
    Kxx, Ksx, Kss = K[:P, :P], K[P:, :P], K[P:, P:]
    Txx, Tsx = T[:P, :P], T[P:, :P]
    lam, V = np.linalg.eigh(Txx)
    I = np.eye(P)
    means, covs = [], []
    for t in ts:
        E = V @ (np.exp(-eta * lam * t)[:, None] * V.T)
        A = Tsx @ np.linalg.solve(Txx, I - E)
        AK = A @ Ksx.T
        covs.append(Kss + A @ Kxx @ A.T - AK - AK.T)
        means.append(A @ Y)
    return np.array(means), np.array(covs)


# ---------------------------------------------------------------------------------------------- NT
def _nt(X, Y, Xs, ts, act, depth, sw2, sb2, lr):
    if str(Path(__file__).resolve().parent) not in sys.path:     # benchmarks/_timing.py, also when imported alone
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _timing import run_peer

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        np.savez(data, X=X, Y=Y, Xs=Xs, t=ts)
        out = Path(tmp) / "mean.npy"
        cfg = json.dumps({"act": act, "depth": depth, "sw": float(np.sqrt(sw2)), "sb": float(np.sqrt(sb2)),
                          "lr": lr})
        info, why = run_peer(_NT_SCRIPT, str(data), cfg, str(out), python=NT_PYTHON)
        if info is None:
            return None, why.replace("peer skipped", "neural-tangents skipped")
        info["mean"] = np.load(out, allow_pickle=False)
        return info, ""


def _case(act, P, Pt, d, depth, n_t, quick):
    import limits

    sw2 = 1.5 if act == "erf" else 2.0
    sb2 = 0.05
    rng = np.random.default_rng(0)
    X = rng.standard_normal((P, d))
    Xs = rng.standard_normal((Pt, d))
    Y = np.sin(X @ rng.standard_normal(d) / np.sqrt(d))[:, None]
    ts = np.logspace(-1, 3, n_t)
    m = limits.mlp(d, depth, activation=act, sigma_w2=sw2, sigma_b2=sb2, lr=1.0)
    w, c, g = _timed(lambda: limits.predict.gradient_descent(m, X, Y, Xs, t=ts, reduction="mean"))
    with limits.blas.blas_threads():          # the same BLAS thread count as limits (fair on a shared box)
        bw, bc, (bm, bcov) = _timed(lambda: plain_predict(X, Y, Xs, ts, act, depth, sw2, sb2, 1.0 / P))
    scale = np.max(np.abs(g.mean))
    agree = max(float(np.max(np.abs(bm - g.mean)) / scale),
                float(np.max(np.abs(bcov - g.cov)) / np.max(np.abs(g.cov))))
    name = f"{act} MLP depth {depth}, P={P}, P_test={Pt}, {n_t} times, mean+cov"
    rows = [{"name": f"{name}: limits vs plain numpy", "seconds": w, "cpu_seconds": c, "baseline_seconds": bw,
             "baseline_cpu_seconds": bc, "ratio": bw / w, "target": ">= 1x",
             "note": f"CPU {c:.2f} s vs {bc:.2f} s; max relative difference of mean/cov {agree:.1e}"}]
    info, why = _nt(X, Y, Xs, ts, act, depth, sw2, sb2, 1.0)
    if info is None:
        rows.append({"name": f"{name}: limits vs neural-tangents", "seconds": w, "cpu_seconds": c,
                     "baseline_seconds": None, "ratio": None, "target": ">= 2x (incl. NT compile)", "note": why})
    else:
        diff = float(np.max(np.abs(info["mean"].reshape(g.mean.shape) - g.mean)) / scale)
        rows.append({"name": f"{name}: limits vs neural-tangents (cold, incl. compile)", "seconds": w,
                     "cpu_seconds": c, "baseline_seconds": info["cold_wall"], "baseline_cpu_seconds": info["cold_cpu"],
                     "ratio": info["cold_wall"] / w, "target": ">= 2x",
                     "note": (f"NT {info['version']} / jax {info['jax']} float64; CPU {c:.2f} s vs {info['cold_cpu']:.2f} s; "
                              f"NT warm (compiled) {info['warm_wall']:.2f} s wall / {info['warm_cpu']:.2f} s CPU; "
                              f"max relative difference of the means {diff:.1e}")})
    return rows


# ---------------------------------------------------------------------------------------------- digits (issue 27)
_NT_DIGITS = r"""
import json, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import neural_tangents as nt
from neural_tangents import stax
{net}def post():
    f = nt.predict.gradient_descent_mse_ensemble(kernel_fn, d["X"], d["Y"], diag_reg=cfg["noise"],
                                                 diag_reg_absolute_scale=True)
    o = f(t=None, x_test=d["Xs"], get="nngp", compute_cov=True)
    return np.asarray(o.mean), np.asarray(o.covariance)
def gd():
    f = nt.predict.gradient_descent_mse_ensemble(kernel_fn, d["X"], d["Y"], learning_rate=cfg["lr"])
    o = f(t=d["t"], x_test=d["Xs"], get="ntk", compute_cov=True)
    return np.asarray(o.mean), np.asarray(o.covariance)
out = {"version": nt.__version__, "jax": jax.__version__}
for name, fn in (("post", post), ("gd", gd)):
    c0 = time.process_time(); m, c = fn(); out[name + "_cold"] = time.process_time() - c0
    best = float("inf")
    for _ in range(3):
        c0 = time.process_time(); m, c = fn(); best = min(best, time.process_time() - c0)
    out[name + "_warm"] = best
    np.save(sys.argv[3] + name + "_mean.npy", m)
    np.save(sys.argv[3] + name + "_cov.npy", c)
print(json.dumps(out))
""".replace("{net}", _NT_NET.lstrip("\n"))


def _plain_E(act, K):
    """E[φ(u)φ(v)] on a full Gram (the NNGP-only recursion, no derivative kernel)."""
    if act == "erf":
        a = 1.0 + 2.0 * np.diag(K)
        return 2.0 / np.pi * np.arcsin(np.clip(2.0 * K / np.sqrt(np.outer(a, a)), -1.0, 1.0))
    q = np.diag(K)
    g = np.sqrt(np.outer(q, q))
    c = np.clip(K / g, -1.0, 1.0)
    return g / (2.0 * np.pi) * (np.sqrt(1.0 - c * c) + (np.pi - np.arccos(c)) * c)


def plain_posterior(X, Y, Xs, act, depth, sw2, sb2, noise):
    """NNGP posterior the careful plain way: joint recursion on the stacked inputs, one Cholesky."""
    from scipy.linalg import cho_factor, cho_solve, solve_triangular

    P = X.shape[0]
    Z = np.vstack([X, Xs])
    K = sw2 * (Z @ Z.T) / Z.shape[1] + sb2
    for _ in range(depth + 1):
        K = sw2 * _plain_E(act, K) + sb2
    c = cho_factor(K[:P, :P] + noise * np.eye(P), lower=True, check_finite=False)
    alpha = cho_solve(c, Y, check_finite=False)
    mean = K[P:, :P] @ alpha
    V = solve_triangular(c[0], K[:P, P:], lower=True, check_finite=False)
    cov = K[P:, P:] - V.T @ V
    lml = -0.5 * np.sum(Y * alpha) - Y.shape[1] * np.sum(np.log(np.diag(c[0]))) - 0.5 * Y.size * np.log(2 * np.pi)
    return mean, cov, lml


def plain_gd(X, Y, Xs, ts, act, depth, sw2, sb2, eta):
    """Gradient-flow ensemble the careful plain way: joint NNGP/NTK (benchmarks/_plain_kernels.py), one
    eigendecomposition, mean for all t by one einsum, covariance per t by three matrix products."""
    from _plain_kernels import plain_nngp

    P = X.shape[0]
    Z = np.vstack([X, Xs])
    K0 = sw2 * (Z @ Z.T) / Z.shape[1] + sb2
    _, _, K, T = plain_nngp(K0, depth, act, sw2, sb2)
    Kxx, Ksx, Kss, Txx, Tsx = K[:P, :P], K[P:, :P], K[P:, P:], T[:P, :P], T[P:, :P]
    lam, V = np.linalg.eigh(Txx)
    lam = np.maximum(lam, 1e-300)
    G = -np.expm1(-eta * lam[None, :] * np.asarray(ts)[:, None]) / lam[None, :]
    B, C, D = Tsx @ V, V.T @ Ksx.T, V.T @ Kxx @ V
    mean = np.einsum("ip,tp,pd->tid", B, G, V.T @ Y, optimize=True)
    cov = np.empty((len(ts), Xs.shape[0], Xs.shape[0]))
    for i in range(len(ts)):
        M = B * G[i]
        MC = M @ C
        cov[i] = Kss + (M @ D) @ M.T - MC - MC.T
    return mean, cov


def _digits_case(act, quick):
    import limits
    from limits.gallery.predict import digits_task

    from _timing import cpu_wall_pair, run_peer

    P, Pt = (300, 100) if quick else (1200, 400)
    X, Y, Xs, _ = digits_task(P, Pt, 0)
    depth, sb2, noise, k = 3, 0.05, 1e-3, Y.shape[1]
    sw2 = 2.0 if act == "relu" else 1.5
    ts = np.logspace(0, 4, 20)
    m = limits.mlp(X.shape[1], depth, activation=act, sigma_w2=sw2, sigma_b2=sb2, lr=1.0)     # d_out 1: any k works
    name = f"digits P={P}/{Pt}, {act} MLP depth {depth}, {k} outputs"
    with limits.blas.blas_threads():
        (ra, post), (rb, (bm, bc, blml)) = cpu_wall_pair(
            lambda: limits.predict.nngp_posterior(m, X, Y, Xs, noise=noise),
            lambda: plain_posterior(X, Y, Xs, act, depth, sw2, sb2, noise), repeat=3)
        (ga, gd), (gb, (gm, gc)) = cpu_wall_pair(
            lambda: limits.predict.gradient_descent(m, X, Y, Xs, t=ts, reduction="mean", learning_rate=0.1),
            lambda: plain_gd(X, Y, Xs, ts, act, depth, sw2, sb2, 0.1 / P), repeat=3)
    d_post = max(float(np.max(np.abs(bm - post.mean)) / np.max(np.abs(post.mean))),
                 float(np.max(np.abs(bc - post.cov)) / np.max(np.abs(post.cov))),
                 abs(blml - post.log_marginal_likelihood) / abs(blml))
    d_gd = max(float(np.max(np.abs(gm - gd.mean)) / np.max(np.abs(gd.mean))),
               float(np.max(np.abs(gc - gd.cov)) / np.max(np.abs(gd.cov))))
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        np.savez(data, X=X, Y=Y, Xs=Xs, t=ts)
        cfg = json.dumps({"act": act, "depth": depth, "sw": float(np.sqrt(sw2)), "sb": float(np.sqrt(sb2)),
                          "noise": noise, "lr": 0.1 * k})          # NT divides by P·k: η_NT = k·η (reduction mean)
        info, why = run_peer(_NT_DIGITS, str(data), cfg, str(Path(tmp) / "nt_"), python=NT_PYTHON)
        if info is not None:
            for w in ("post", "gd"):
                info[w] = {q: np.load(Path(tmp) / f"nt_{w}_{q}.npy", allow_pickle=False) for q in ("mean", "cov")}
    rows = []
    for what, ours, base, agree, res in (("nngp_posterior (mean, cov, log-likelihood), noise 1e-3", ra, rb, d_post, post),
                                         (f"gradient_descent flow, {ts.size} times, mean + cov", ga, gb, d_gd, gd)):
        key = "post" if what.startswith("nngp") else "gd"
        row = {"name": f"{name}: {what}", "seconds": ours["cpu"], "cpu_seconds": ours["cpu"],
               "baseline_seconds": base["cpu"], "baseline_cpu_seconds": base["cpu"], "ratio": base["cpu"] / ours["cpu"],
               "target": ">= 2x plain numpy, >= 2x NT",
               "note": f"CPU best of 3 interleaved: limits {ours['cpu']:.3f} s, plain numpy {base['cpu']:.3f} s "
                       f"({base['cpu'] / ours['cpu']:.2f}x); max relative difference {agree:.1e}"}
        if info is None:
            row["note"] += f"; {why}"
            row["nt_ratio"] = None
        else:
            nm = info[key]["mean"].reshape(res.mean.shape)
            ncov = info[key]["cov"].reshape(res.cov.shape)
            dn = max(float(np.max(np.abs(nm - res.mean)) / np.max(np.abs(res.mean))),
                     float(np.max(np.abs(ncov - res.cov)) / np.max(np.abs(res.cov))))
            row.update(nt_cpu_seconds=info[key + "_warm"], nt_first_cpu=info[key + "_cold"],
                       nt_ratio=info[key + "_warm"] / ours["cpu"])
            row["note"] += (f"; neural-tangents {info['version']} / jax {info['jax']} float64 warm {info[key + '_warm']:.3f} s "
                            f"({info[key + '_warm'] / ours['cpu']:.2f}x), first call incl. compile {info[key + '_cold']:.3f} s "
                            f"({info[key + '_cold'] / ours['cpu']:.2f}x); max relative difference to NT {dn:.1e}")
        rows.append(row)
    return rows


def run(quick: bool = False):
    if quick:
        P, Pt, d, depth, n_t = 400, 100, 20, 9, 50
    else:
        P, Pt, d, depth, n_t = 2000, 500, 20, 9, 50
    rows = []
    if str(Path(__file__).resolve().parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    for act in ("relu", "erf"):
        rows += _digits_case(act, quick)
    if os.environ.get("LIMITS_BENCH_PREDICT") == "digits":       # the issue-27 rows only
        return rows
    for act in ("erf", "relu"):
        rows += _case(act, P, Pt, d, depth, n_t, quick)
    return rows


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    for r in run(quick):
        print(json.dumps(r, default=str))
