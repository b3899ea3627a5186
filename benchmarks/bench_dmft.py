"""DMFT benchmarks (docs/performance.rst): deep linear L = 5, P = 20, 100 steps (< 30 s) and nonlinear
two-layer P = 10, 50 steps, M = 2000 (< 2 min), each with a naive baseline measured in the same run.

Baselines: for the deep linear solver, the textbook global fixed-point iteration of the same
(H, G, A, B) equations with dense inverses of I − CD and I − DC (``picard(..., solver="dense")``),
timed on a smaller grid (the dense route is O(iters · L · (TP)³) and would take far too long at
the full size) and compared with the causal march on that same grid; for the nonlinear solver's
inner loop (the single-site equations of M sampled paths), the whole-path fixed-point iteration
with dense products that ignores causality (:func:`_whole_path_iteration`).
"""
from __future__ import annotations

import time

import numpy as np


def _toy(P, D, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, D)), rng.choice(np.array([-1.0, 1.0]), size=P)


def _whole_path_iteration(act, u, r, C, D, tol=1e-13, max_iter=10_000):
    """Naive reference: solve the single-site equations h = u + C g, z = r + D φ(h), g = φ'(h) z
    for whole paths at once by fixed-point iteration with dense (unstructured) products,
    ignoring causality; converges (the operators are nilpotent) after up to ~n_t sweeps."""
    h, z = u.copy(), r.copy()
    for it in range(max_iter):
        ph = act.phi(h)
        g = act.dphi(h) * z
        hn = u + g @ C.T
        zn = r + ph @ D.T
        err = max(np.max(np.abs(hn - h)), np.max(np.abs(zn - z)))
        h, z = hn, zn
        if err < tol:
            break
    return act.phi(h), it + 1


def run(quick: bool) -> list[dict]:
    import limits
    import limits.dmft as dm
    from limits.dmft.linear import march, picard
    from limits.dmft.nonlinear import _march_paths

    out = []
    # ---- deep linear: L = 5 hidden layers, P = 20, 100 GD steps (the target workload)
    P, steps = (20, 100) if not quick else (20, 40)
    X, y = _toy(P, 40, 0)
    t0 = time.perf_counter()
    d = dm.solve(X, y, depth=5, gamma0=1.0, dt=0.0025, steps=steps)
    full = time.perf_counter() - t0
    # same-run baseline vs march on a smaller grid (dense global iteration)
    Pb, sb = (10, 8) if quick else (10, 10)
    Xb, yb = _toy(Pb, 20, 1)
    Kx = Xb @ Xb.T / 20
    t0 = time.perf_counter()
    st = march(Kx, yb, 5, 0.5, 0.0025, sb)
    t_march = time.perf_counter() - t0
    t0 = time.perf_counter()
    stp, iters, res, conv, _ = picard(Kx, yb, 5, 0.5, 0.0025, sb, tol=1e-12, solver="dense")
    t_dense = time.perf_counter() - t0
    agree = float(np.max(np.abs(st.f - stp.f)))
    out.append(dict(name=f"dmft deep linear L=5 P={P} {steps} steps (causal march)", seconds=full,
                    baseline_seconds=None, ratio=None, target="< 30 s",
                    note=f"final loss {d.loss[-1]:.4g}; O(L P^3 n_t^3) flops"))
    out.append(dict(name=f"dmft deep linear march vs dense global iteration (L=5, P={Pb}, {sb} steps)",
                    seconds=t_march, baseline_seconds=t_dense, ratio=t_dense / t_march, target="ratio > 1",
                    note=f"dense Picard: {iters} sweeps, converged={conv}; max |Δf| = {agree:.1e}"))
    # ---- nonlinear two-layer: P = 10, 50 steps, M = 2000
    P, steps, M = (10, 50, 2000) if not quick else (10, 20, 1000)
    X, y = _toy(P, 20, 2)
    t0 = time.perf_counter()
    d = dm.solve(X, y, depth=1, activation="tanh", gamma0=1.0, dt=0.05, steps=steps, M=M, seed=0)
    t_nl = time.perf_counter() - t0
    out.append(dict(name=f"dmft nonlinear two-layer tanh P={P} {steps} steps M={M}", seconds=t_nl,
                    baseline_seconds=None, ratio=None, target="< 120 s",
                    note=f"{d.iterations} sweeps, residual {d.residual:.1e}, max SE(f) {np.max(d.f_se):.1e}"))
    # path-batched march vs per-path loop, one sweep's worth of paths (subset for the naive loop)
    act = limits.activation("tanh")
    n_t = steps + 1
    n = n_t * P
    rng = np.random.default_rng(3)
    Mb = 200
    u = rng.standard_normal((Mb, n))
    r = rng.standard_normal((Mb, n))
    strict = np.kron(np.tril(np.ones((n_t, n_t)), -1), np.ones((P, P)))
    C = 0.3 / n * rng.standard_normal((n, n)) * strict
    Dm = 0.3 / n * rng.standard_normal((n, n)) * strict
    t0 = time.perf_counter()
    ph_b, _, _ = _march_paths(act, u, r, C, Dm, P, n_t)
    tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    ph_n, sweeps = _whole_path_iteration(act, u, r, C, Dm)
    tn = time.perf_counter() - t0
    out.append(dict(name=f"dmft MC single-site causal march vs whole-path dense iteration ({Mb} paths)",
                    seconds=tb, baseline_seconds=tn, ratio=tn / tb, target="ratio > 1",
                    note=f"{sweeps} dense sweeps; max |Δφ| = {np.max(np.abs(ph_b - ph_n)):.1e}"))
    return out


if __name__ == "__main__":
    for row in run(quick=False):
        print(row)
