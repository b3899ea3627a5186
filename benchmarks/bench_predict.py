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
  compute_cov=True)`` in float64, its first call (including its jit compile) and its steady state, run in a
  separate interpreter kept alive between calls (``LIMITS_NT_PYTHON``, default /work/venv-nt/bin/python;
  ``_timing.Peer``) — skipped cleanly when that interpreter or neural_tangents is unavailable.

All three sides are timed alike (``_timing.interleaved``): a warm-up call each, then 5 rounds of limits, numpy and
neural-tangents interleaved, each call timed by the CPU clock of the process that runs it; best of 5. The maximum relative difference of the means is
  reported (same conventions: NT's loss is ½Σ(f − y)²/(P·d_out), our ``reduction="mean"``).

Digits workload (the one of issue 27): scikit-learn's 8×8 digits (``limits.gallery.predict.digits_task``,
P = 1200 train / 400 test, 64 pixels, 10 one-hot outputs), MLP depth 3 (relu σ²_w = 2, erf σ²_w = 1.5;
σ²_b = 0.05). Rows, CPU time (``time.process_time``) best of 5 with the calls of limits, plain numpy and
neural-tangents interleaved (as above), BLAS on one thread for both:

* ``nngp_posterior(noise=1e-3)`` (mean, covariance, log marginal likelihood) vs plain numpy (joint
  (P+P_test)² NNGP recursion, Cholesky, triangular solves) vs neural-tangents
  ``gradient_descent_mse_ensemble(..., diag_reg=1e-3, diag_reg_absolute_scale=True)(t=None, get="nngp",
  compute_cov=True)`` (steady = best of 5 compiled calls; first = its first call incl. compile).
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
from pathlib import Path

import numpy as np
from scipy.special import erf

NT_PYTHON = os.environ.get("LIMITS_NT_PYTHON", "/work/venv-nt/bin/python")

NT_SETUP = r"""
import jax
jax.config.update("jax_enable_x64", True)
import neural_tangents as nt
from neural_tangents import stax
INFO = {"version": nt.__version__, "jax": jax.__version__}
def make(c):
    # read-in Dense, depth × [act, Dense], act, read-out Dense; the prediction c["what"] on the data file's arrays
    with np.load(c["data"], allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    act = {"erf": stax.Erf, "relu": stax.Relu}[c["act"]]
    sw, sb = c["sw"], c["sb"]
    layers = [stax.Dense(1, W_std=sw, b_std=sb)]
    for _ in range(c["depth"]):
        layers += [act(), stax.Dense(1, W_std=sw, b_std=sb)]
    layers += [act(), stax.Dense(1, W_std=sw, b_std=sb)]
    _, _, kernel_fn = stax.serial(*layers)
    def call():
        if c["what"] == "post":
            f = nt.predict.gradient_descent_mse_ensemble(kernel_fn, d["X"], d["Y"], diag_reg=c["noise"],
                                                         diag_reg_absolute_scale=True)
            o = f(t=None, x_test=d["Xs"], get="nngp", compute_cov=True)
        else:
            f = nt.predict.gradient_descent_mse_ensemble(kernel_fn, d["X"], d["Y"], learning_rate=c["lr"])
            o = f(t=d["t"], x_test=d["Xs"], get="ntk", compute_cov=True)
        return np.asarray(o.mean), np.asarray(o.covariance)
    return call
"""


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


# ---------------------------------------------------------------------------------------------- timing
def _three(ours, plain, peer, key, spec):
    """limits, plain numpy and (when ``peer`` runs) neural-tangents timed alike (``_timing.interleaved``: a warm-up
    call each — NT's jit compilation —, then 5 rounds interleaved, each call timed by the CPU clock of its own
    process, best of 5). Returns {side: (stats, result)}; NT's result is its (mean, covariance)."""
    from _timing import Local, interleaved

    sides = {"ours": Local(ours), "numpy": Local(plain)}
    if peer is not None:
        peer.prepare(key, spec)
        sides["nt"] = peer.side(key)
    with __import__("limits").blas.blas_threads():   # the same BLAS thread count for limits and numpy
        res = interleaved(sides)
    if peer is not None:
        res["nt"] = (res["nt"][0], peer.result(key))
    return res


def _case(act, P, Pt, d, depth, n_t, quick, peer, why, tmp):
    import limits
    from _timing import machine

    sw2 = 1.5 if act == "erf" else 2.0
    sb2 = 0.05
    rng = np.random.default_rng(0)
    X = rng.standard_normal((P, d))
    Xs = rng.standard_normal((Pt, d))
    Y = np.sin(X @ rng.standard_normal(d) / np.sqrt(d))[:, None]
    ts = np.logspace(-1, 3, n_t)
    m = limits.mlp(d, depth, activation=act, sigma_w2=sw2, sigma_b2=sb2, lr=1.0)
    data = Path(tmp) / f"ens_{act}.npz"
    np.savez(data, X=X, Y=Y, Xs=Xs, t=ts)
    load = machine()
    res = _three(lambda: limits.predict.gradient_descent(m, X, Y, Xs, t=ts, reduction="mean"),
                 lambda: plain_predict(X, Y, Xs, ts, act, depth, sw2, sb2, 1.0 / P), peer, f"ens_{act}",
                 {"data": str(data), "act": act, "depth": depth, "sw": float(np.sqrt(sw2)), "sb": float(np.sqrt(sb2)),
                  "what": "gd", "lr": 1.0})
    (t, g), (tb, (bm, bcov)) = res["ours"], res["numpy"]
    load["load_after"] = machine()["load"]
    scale = np.max(np.abs(g.mean))
    agree = max(float(np.max(np.abs(bm - g.mean)) / scale),
                float(np.max(np.abs(bcov - g.cov)) / np.max(np.abs(g.cov))))
    name = f"{act} MLP depth {depth}, P={P}, P_test={Pt}, {n_t} times, mean+cov"
    common = {"seconds": t["wall"], "cpu_seconds": t["cpu"], "cpu_median": t["cpu_median"], "repeat": t["repeat"],
              "machine": load, "timing": TIMING}
    rows = [{"name": f"{name}: limits vs plain numpy", **common, "baseline_seconds": tb["wall"],
             "baseline_cpu_seconds": tb["cpu"], "ratio": tb["wall"] / t["wall"], "target": ">= 1x",
             "note": f"CPU {t['cpu']:.2f} s vs {tb['cpu']:.2f} s (best of {t['repeat']}); max relative difference of "
                     f"mean/cov {agree:.1e}"}]
    if "nt" not in res:
        rows.append({"name": f"{name}: limits vs neural-tangents", **common, "baseline_seconds": None, "ratio": None,
                     "target": ">= 2x (steady state)", "note": why})
    else:
        n, (nm, _) = res["nt"]
        diff = float(np.max(np.abs(nm.reshape(g.mean.shape) - g.mean)) / scale)
        rows.append({"name": f"{name}: limits vs neural-tangents (steady state)", **common,
                     "baseline_seconds": n["wall"], "baseline_cpu_seconds": n["cpu"], "nt_median": n["cpu_median"],
                     "nt_first_cpu": n["first_cpu"], "ratio": n["wall"] / t["wall"], "target": ">= 2x",
                     "note": (f"NT {peer.info['version']} / jax {peer.info['jax']} float64; CPU {t['cpu']:.2f} s vs "
                              f"{n['cpu']:.2f} s (best of {n['repeat']} after its first call, which took "
                              f"{n['first_cpu']:.2f} s CPU incl. compile); max relative difference of the means "
                              f"{diff:.1e}")})
    return rows


TIMING = ("CPU = time.process_time of the process running each side (one BLAS/XLA thread each); one warm-up call "
          "per side (neural-tangents: its jit compilation), then 5 rounds of limits, plain numpy, neural-tangents "
          "interleaved; best of the 5")


# ---------------------------------------------------------------------------------------------- digits (issue 27)
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


def _digits_case(act, quick, peer, why, tmp):
    import limits
    from limits.gallery.predict import digits_task

    from _timing import machine

    P, Pt = (300, 100) if quick else (1200, 400)
    X, Y, Xs, _ = digits_task(P, Pt, 0)
    depth, sb2, noise, k = 3, 0.05, 1e-3, Y.shape[1]
    sw2 = 2.0 if act == "relu" else 1.5
    ts = np.logspace(0, 4, 20)
    m = limits.mlp(X.shape[1], depth, activation=act, sigma_w2=sw2, sigma_b2=sb2, lr=1.0)     # d_out 1: any k works
    name = f"digits P={P}/{Pt}, {act} MLP depth {depth}, {k} outputs"
    data = Path(tmp) / f"digits_{act}.npz"
    np.savez(data, X=X, Y=Y, Xs=Xs, t=ts)
    spec = {"data": str(data), "act": act, "depth": depth, "sw": float(np.sqrt(sw2)), "sb": float(np.sqrt(sb2)),
            "noise": noise, "lr": 0.1 * k}          # NT divides by P·k: η_NT = k·η (reduction mean)
    load = machine()
    post_res = _three(lambda: limits.predict.nngp_posterior(m, X, Y, Xs, noise=noise),
                      lambda: plain_posterior(X, Y, Xs, act, depth, sw2, sb2, noise), peer, f"post_{act}",
                      {**spec, "what": "post"})
    gd_res = _three(lambda: limits.predict.gradient_descent(m, X, Y, Xs, t=ts, reduction="mean", learning_rate=0.1),
                    lambda: plain_gd(X, Y, Xs, ts, act, depth, sw2, sb2, 0.1 / P), peer, f"gd_{act}",
                    {**spec, "what": "gd"})
    load["load_after"] = machine()["load"]
    (ra, post), (rb, (bm, bc, blml)) = post_res["ours"], post_res["numpy"]
    (ga, gd), (gb, (gm, gc)) = gd_res["ours"], gd_res["numpy"]
    d_post = max(float(np.max(np.abs(bm - post.mean)) / np.max(np.abs(post.mean))),
                 float(np.max(np.abs(bc - post.cov)) / np.max(np.abs(post.cov))),
                 abs(blml - post.log_marginal_likelihood) / abs(blml))
    d_gd = max(float(np.max(np.abs(gm - gd.mean)) / np.max(np.abs(gd.mean))),
               float(np.max(np.abs(gc - gd.cov)) / np.max(np.abs(gd.cov))))
    rows = []
    for what, all_, agree, res in (("nngp_posterior (mean, cov, log-likelihood), noise 1e-3", post_res, d_post, post),
                                   (f"gradient_descent flow, {ts.size} times, mean + cov", gd_res, d_gd, gd)):
        ours, base = all_["ours"][0], all_["numpy"][0]
        row = {"name": f"{name}: {what}", "seconds": ours["cpu"], "cpu_seconds": ours["cpu"],
               "cpu_median": ours["cpu_median"], "repeat": ours["repeat"],
               "baseline_seconds": base["cpu"], "baseline_cpu_seconds": base["cpu"], "ratio": base["cpu"] / ours["cpu"],
               "target": ">= 2x plain numpy, >= 2x NT", "machine": load, "timing": TIMING,
               "note": f"CPU best of {ours['repeat']} interleaved: limits {ours['cpu']:.3f} s, plain numpy "
                       f"{base['cpu']:.3f} s ({base['cpu'] / ours['cpu']:.2f}x); max relative difference {agree:.1e}"}
        if "nt" not in all_:
            row["note"] += f"; {why}"
            row["nt_ratio"] = None
        else:
            n, (nm, ncov) = all_["nt"]
            nm, ncov = nm.reshape(res.mean.shape), ncov.reshape(res.cov.shape)
            dn = max(float(np.max(np.abs(nm - res.mean)) / np.max(np.abs(res.mean))),
                     float(np.max(np.abs(ncov - res.cov)) / np.max(np.abs(res.cov))))
            row.update(nt_cpu_seconds=n["cpu"], nt_first_cpu=n["first_cpu"], nt_median=n["cpu_median"],
                       nt_ratio=n["cpu"] / ours["cpu"])
            row["note"] += (f"; neural-tangents {peer.info['version']} / jax {peer.info['jax']} float64 steady "
                            f"{n['cpu']:.3f} s ({n['cpu'] / ours['cpu']:.2f}x), first call incl. compile "
                            f"{n['first_cpu']:.3f} s ({n['first_cpu'] / ours['cpu']:.2f}x); max relative difference "
                            f"to NT {dn:.1e}")
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
    from _timing import Peer

    peer, why = Peer.start(NT_SETUP, python=NT_PYTHON)
    why = why.replace("peer skipped", "neural-tangents skipped")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for act in ("relu", "erf"):
                rows += _digits_case(act, quick, peer, why, tmp)
            if os.environ.get("LIMITS_BENCH_PREDICT") != "digits":       # else the issue-27 rows only
                for act in ("erf", "relu"):
                    rows += _case(act, P, Pt, d, depth, n_t, quick, peer, why, tmp)
    finally:
        if peer is not None:
            peer.close()
    return rows


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    for r in run(quick):
        print(json.dumps(r, default=str))
