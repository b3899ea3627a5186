"""Dynamical mean field theory of feature learning (Bordelon & Pehlevan 2022; docs/theory/dmft.rst).

Mean-field network with ``depth`` = L hidden layers (seed 000's "L" counts weight layers: use
``depth = L_seed − 1``)::

    h¹ = W⁰x/√D,  h^{l+1} = W^l φ(h^l)/√N,  f = w·φ(h^L)/(γ0 N),   all weights N(0, 1)
    loss ½ Σ_μ (f_μ − y_μ)²,  dθ/dt = −γ0² N ∂loss/∂θ  (1/P is NOT pinned; see gd_time_step)

    d = limits.dmft.solve(X, y, depth=L, activation="linear", gamma0=1.0, T=..., dt=...)
    d.t, d.f (len(t)×P), d.loss, d.ntk, d.Phi, d.G, d.iterations, d.residual, d.converged

``method="gd"`` (default) is exact N → ∞ gradient descent with step ``dt`` (see
:mod:`limits.dmft.grid` for why); ``method="flow"`` is gradient flow, first order in dt, or second
order with ``richardson=True``. Linear networks use the exact causal solver
(:mod:`limits.dmft.linear`), nonlinear ones the alternating Monte Carlo scheme
(:mod:`limits.dmft.nonlinear`). ``lazy`` is the γ0 → 0 (kernel regression) limit; ``beta0=``
solves the residual network of docs/theory/dmft.rst §5 (:mod:`limits.dmft.residual`);
``model=limits.serial(...)`` a composition (CNNs; docs/theory/dmft.rst §6, :mod:`limits.dmft.serial`).

Cost. Linear: O(L P³ n_t³) time, ≈ 32 (L−1) (n_t P)² bytes (P = 20, L = 5, 100 steps: ~6 s on one idle
core, ~50 s on the loaded 2-core box).
Nonlinear: O(sweeps · L · M · (n_t P)²) plus, for L ≥ 2, Jacobian responses O(M (n_t P)³).
Seed 000 Fig. 2 (L = 5 weight layers, P = 20, η0 = 0.025, mean loss): exact GD is
``seed000(X, y, steps)`` (≤ ~200 steps is practical); for ~1000 steps solve on a coarse grid
``dt = 8·s`` with ``gd_step = s = η0/P`` (grids 8s and 4s, linear extrapolation in the step; relative
loss error ~1e-3 in tests at 4s/2s).
"""
from __future__ import annotations

import time

import numpy as np

from ..checks import finite_array, generator, positive_float, positive_int
from .grid import DMFTParams, TimeGrid, from_abcd, gd_time_step, make_grid
from .linear import StepTooLarge, check_stable, march, march_lowrank, ntk_equal_time, picard
from .nonlinear import DMFTNotConverged, lazy_kernels, solve_mc
from .result import DMFTResult, SerialDMFTResult
from ._threads import blas_limited
from ..registry import sweep_computation

__all__ = ["solve", "lazy", "DMFTResult", "SerialDMFTResult", "from_abcd", "gd_time_step", "make_grid", "TimeGrid",
           "DMFTParams", "StepTooLarge", "DMFTNotConverged", "toy_task", "lazy_ntk", "seed000"]

MEMORY_LIMIT_BYTES = 6e9


def _activation(activation):
    import limits

    if isinstance(activation, str) and activation == "linear":
        try:
            return limits.activation("linear"), "linear"
        except (ImportError, ModuleNotFoundError):
            class _Lin:
                name = "linear"
                phi = staticmethod(lambda x: x)
                dphi = staticmethod(lambda x: np.ones_like(x))
                d2phi = staticmethod(lambda x: np.zeros_like(x))
            return _Lin(), "linear"
    try:
        act = limits.activation(activation)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"activation: unknown activation {activation!r} ({exc})") from None
    name = activation if isinstance(activation, str) else getattr(act, "name", "callable")
    return act, name


def _refuse_kinked_responses(act, name, depth, beta0):
    """The response functions of a deep (depth ≥ 2) or residual DMFT differentiate g = φ'(h) z along each path,
    which needs φ'' (docs/theory/dmft.rst §3). For a kinked activation (relu: φ'' = δ at 0) the pathwise
    Jacobian drops the δ(h)·z term, whose mean is not zero once z and h correlate, and the sweep map is
    discontinuous (measured: relu, depth 2, γ0 = 1 stalls at a residual of 1e-3 after 200 sweeps). Two-layer
    networks (depth 1) need no response and stay exact."""
    if getattr(act, "smooth", True) or (depth < 2 and beta0 is None):
        return
    raise ValueError(f"activation {name!r} is not smooth: a DMFT of depth >= 2 or a residual DMFT (beta0) needs "
                     "its response functions, i.e. phi'' along each path, which is a delta at the kink; use a "
                     "smooth activation (gelu, tanh, erf), or depth=1 (exact for any activation)")


def _inputs(X, y, depth, gamma0):
    X = finite_array(X, "X", ndim=2)
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be P×D with P, D >= 1, got shape {X.shape}")
    y = finite_array(y, "y")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape (P,) = ({X.shape[0]},) matching X's rows, got {y.shape}")
    depth = positive_int(depth, "depth")
    gamma0 = positive_float(gamma0, "gamma0")
    return X, y, _input_gram(X), depth, gamma0


def _input_gram(X):
    """``K^x = X Xᵀ / D`` of validated non-empty inputs; ValueError if it overflows float64."""
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be P×D with P, D >= 1, got shape {X.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        Kx = X @ X.T / X.shape[1]
    if not np.all(np.isfinite(Kx)):
        raise ValueError("X is too large in magnitude: the input Gram X Xᵀ/D overflows float64")
    return Kx


@sweep_computation
def lazy_ntk(X, depth, activation="linear"):
    """γ0 → 0 NTK ``K = Σ_{l=0}^{L} G^{l+1}_0 ∘ Φ^l_0`` (P×P) of the mean-field net at initialisation.

    Two-layer relu gives the arc-cosine form ``K = k1(K^x) + k0(K^x) ∘ K^x`` (docs/theory/dmft.rst §4).
    """
    X = finite_array(X, "X", ndim=2)
    depth = positive_int(depth, "depth")
    Kx = _input_gram(X)
    act, name = _activation(activation)
    if name == "linear":
        return (depth + 1) * Kx
    Phi, G = lazy_kernels(act, Kx, depth)
    K = G[0] * Kx
    for l in range(depth):
        K = K + (G[l + 1] if l + 1 < depth else 1.0) * Phi[l]
    return K


@sweep_computation
def lazy(X, y, depth, activation="linear", T=None, dt=None, steps=None, method="gd"):
    """Kernel-regression (γ0 → 0) trajectory: Δ_k = (I − dt K)^k y (gd) or Δ(t) = e^{−Kt} y (flow)."""
    X, y, Kx, depth, _ = _inputs(X, y, depth, 1.0)
    grid = make_grid(T, dt, steps)
    K = lazy_ntk(X, depth, activation)
    lam, V = np.linalg.eigh(0.5 * (K + K.T))
    c = V.T @ y
    t = grid.t
    if method == "gd":
        if grid.dt * lam[-1] >= 2.0:
            raise StepTooLarge(f"dt too large: dt*lambda_max(K) = {grid.dt * lam[-1]:.3g} >= 2")
        fac = (1.0 - grid.dt * lam)[None, :] ** np.arange(grid.n_t)[:, None]
    elif method == "flow":
        fac = np.exp(-t[:, None] * lam[None, :])
    else:
        raise ValueError(f"method must be 'gd' or 'flow', got {method!r}")
    Delta = (fac * c[None, :]) @ V.T
    return t, y[None, :] - Delta, K


def seed000(X, y, steps, L=5, eta0=0.025, gamma0=1.0, loss="mean", **kw) -> DMFTResult:
    """N = ∞ curve of a seed-000 mean-field BP run (Fig. 2 / A.3): L weight layers, GD with
    η = η0 γ² N^{-c} on the loss (1/2P)Σ(f−y)² (``loss="mean"``, Eq. 1) for ``steps`` steps.

    Maps via :func:`from_abcd` (depth = L − 1, one step = dt = η0/P) and solves exact GD; compare
    ``result.loss_mean`` with the finite nets' Eq. 1 loss at step k = ``result.t / result.dt``.
    Cost O(L P³ steps³), memory ≈ 32 (L−1) (steps·P)² bytes (P = 20: 100 steps ≈ 6 s, 200 ≈ 1 min).
    """
    from fractions import Fraction

    half = Fraction(1, 2)
    X = finite_array(X, "X", ndim=2)
    m = from_abcd([0] + [half] * (L - 1), [0] * L, 0, half, gamma0=gamma0, eta0=eta0, P=X.shape[0], loss=loss)
    return solve(X, y, depth=m.depth, activation=kw.pop("activation", "linear"), gamma0=m.gamma0, dt=m.dt,
                 steps=steps, **kw)


def _solve_residual(X, y, Kx, depth, gamma0, beta0, act, name, grid, method, M, rng, seed, tol, max_iter,
                    damping, strict, t_start):
    from .residual import solve_residual_mc

    if depth < 2:
        raise ValueError("depth must be >= 2 for a residual network (beta0 given)")
    if method != "gd":
        raise ValueError("the residual solver supports method='gd' only")
    n = grid.n_t * Kx.shape[0]
    if n > 120:
        raise ValueError(f"dt: the residual solver (Jacobian responses) is limited to n_t·P <= 120, got {n}")
    rng = generator(rng, seed)
    M = positive_int(M, "M", minimum=2)
    o = solve_residual_mc(act, Kx, y, depth, gamma0, beta0, grid.dt, grid.n_steps, M=M, rng=rng,
                          tol=1e-8 if tol is None else positive_float(tol, "tol"), max_iter=max_iter,
                          damping=0.7 if damping is None else damping, strict=strict)
    P = Kx.shape[0]
    eq = lambda mats: np.stack([np.stack([m[k * P:(k + 1) * P, k * P:(k + 1) * P] for k in range(grid.n_t)])  # noqa: E731
                                for m in mats])
    Heq, Geq = eq(o["Phi"]), eq(o["G"])
    # NTK of the residual net: input layer G¹∘K^x, branches β² G^{l+1}∘Φ^l, readout Φ^L
    ntk = Geq[0] * Kx[None] + Heq[depth - 1] + o["beta"] ** 2 * sum(Geq[l + 1] * Heq[l] for l in range(depth - 1))
    f = o["f"]
    loss = 0.5 * np.sum(o["Delta"] ** 2, axis=1)
    return DMFTResult(
        t=grid.t, f=f, loss=loss, loss_mean=loss / y.size, Delta=o["Delta"], y=y, ntk=ntk, Phi=Heq, G=Geq,
        f_se=o["f_se"], depth=depth, activation=str(name), gamma0=gamma0, dt=grid.dt, method=method,
        solver="mc-residual", iterations=o["iterations"], residual=o["residual"], converged=o["converged"],
        message=(f"residual net, beta0 = {beta0:g} (branch {o['beta']:.4g}); "
                 + ("converged" if o["converged"] else "NOT converged") + f" after {o['iterations']} sweeps, M = {M}"),
        mc_samples=M, wall_time_s=time.perf_counter() - t_start)


@sweep_computation
def toy_task(P=20, D=40, rng=None, seed=None):
    """Seed 000 toy task (App. A.8): x ~ N(0, I_D), labels y ∈ {−1, 1} drawn uniformly at random."""
    rng = generator(rng, seed)
    P = positive_int(P, "P")
    D = positive_int(D, "D")
    X = rng.standard_normal((P, D))
    y = rng.choice(np.array([-1.0, 1.0]), size=P)
    return X, y


def _solve_grid(act, name, Kx, y, depth, gamma0, grid, M, rng, tol, max_iter, damping, strict,
                solver, bar, keep_two_time, mask=None):
    P = Kx.shape[0]
    n = grid.n_t * P
    t0 = time.perf_counter()
    f_se = np.zeros((grid.n_t, P))
    message = ""
    Heq = Geq = None
    if name == "linear" and solver in ("auto", "march", "march-dense", "picard"):
        mult = {"picard": 10 * depth + 6, "march-dense": 6 * depth + 2}.get(solver, max(4 * (depth - 1), 1))
        need = mult * n * n * 8
        if need > MEMORY_LIMIT_BYTES:
            raise ValueError(f"dt: grid too fine ({grid.n_t} times × {P} samples needs ~{need / 1e9:.1f} GB); "
                             f"use a larger dt (or gd_step extrapolation)")
        if solver == "picard":
            st, iters, res, conv, _ = picard(Kx, y, depth, gamma0, grid.dt, grid.n_steps, tol=tol,
                                             max_iter=max_iter, damping=damping, mask=mask)
            label = "linear-picard"
            if not conv:
                message = f"Picard iteration stopped at residual {res:.3e} > tol {tol:g}"
                if strict:
                    raise DMFTNotConverged(message)
            Phi2, G2, Delta = st.H, st.G, st.Delta
        elif solver == "march-dense":
            st = march(Kx, y, depth, gamma0, grid.dt, grid.n_steps, progress=bar, mask=mask)
            iters, conv, label, res = 1, True, "linear-march-dense", 0.0
            message = "exact causal block forward substitution (dense rows)"
            Phi2, G2, Delta = st.H, st.G, st.Delta
        else:
            o = march_lowrank(Kx, y, depth, gamma0, grid.dt, grid.n_steps, progress=bar,
                              keep_two_time=keep_two_time, mask=mask)
            iters, conv, label = 1, True, "linear-march"
            Delta, Heq, Geq = o["Delta"], o["Heq"], o["Geq"]
            Phi2, G2 = o.get("H2"), o.get("G2")
            message = (f"exact causal block forward substitution with low-rank source factors "
                       f"(ranks H: {o['ranks'][0]}, G: {o['ranks'][1]})")
            if n <= 400:
                # residual: the dense-row march, then one global (triangular-solve) sweep of the map
                st = march(Kx, y, depth, gamma0, grid.dt, grid.n_steps, check_step=False, mask=mask)
                _, _, res_p, _, _ = picard(Kx, y, depth, gamma0, grid.dt, grid.n_steps, tol=0.0, max_iter=1,
                                           init=st, mask=mask)
                res = max(res_p, float(np.max(np.abs(st.Delta - Delta))))
                message += "; residual = one Picard sweep + |low-rank − dense march|"
            else:
                res = 0.0
                message += f"; residual check skipped for n = {n} > 400"
    else:
        need = (8 * depth + 4) * n * n * 8 + 6 * M * n * 8
        if need > MEMORY_LIMIT_BYTES:
            raise ValueError(f"dt: grid too fine for the MC solver (~{need / 1e9:.1f} GB); use a larger dt or smaller M")
        st = solve_mc(act, Kx, y, depth, gamma0, grid.dt, grid.n_steps, M=M, rng=rng, tol=tol,
                      max_iter=max_iter, damping=damping, strict=strict, progress=bar,
                      linear=(name == "linear"), mask=mask)
        Phi2, G2, Delta, f_se = st.Phi, st.G, st.Delta, st.f_se
        iters, res, conv, label = st.iterations, st.residual, st.converged, "mc-alternating"
        message = ("converged" if conv else "NOT converged") + f" after {iters} sweeps, M = {M}"
        tr = np.arange(P) if mask is None else np.flatnonzero(mask)
        check_stable(ntk_equal_time(Kx, Phi2, G2, P, grid.n_t)[-1][np.ix_(tr, tr)], grid.dt, grid.n_t - 1)
    eq = lambda mats: np.stack([np.stack([m[k * P:(k + 1) * P, k * P:(k + 1) * P] for k in range(grid.n_t)])  # noqa: E731
                                for m in mats])
    if Heq is None:
        Heq, Geq = eq(Phi2), eq(G2)
    ntk = np.einsum("tab,ab->tab", Geq[0], Kx)
    for l in range(depth):
        ntk = ntk + (Geq[l + 1] if l + 1 < depth else 1.0) * Heq[l]
    f = y[None, :] - Delta
    if not np.all(np.isfinite(f)):
        raise DMFTNotConverged("DMFT produced non-finite predictions (dt or gamma0 too large: the run diverged)")
    return dict(t=grid.t, f=f, Delta=Delta, ntk=ntk, Phi=Heq, G=Geq, f_se=f_se, iterations=int(iters),
                residual=float(res), converged=bool(conv), message=message, solver=label,
                wall=time.perf_counter() - t0,
                Phi2=np.stack(Phi2) if keep_two_time and Phi2 is not None else None,
                G2=np.stack(G2) if keep_two_time and G2 is not None else None)


@sweep_computation
@blas_limited
def solve(X, y, depth, activation="linear", gamma0=1.0, T=None, dt=None, steps=None, method="gd",
          richardson=False, gd_step=None, M=2000, rng=None, seed=0, tol=None, max_iter=200,
          damping=None, strict=True, solver="auto", progress=False, keep_two_time=False,
          beta0=None, X_test=None) -> DMFTResult:
    """Solve the DMFT of a depth-L mean-field network trained on (X, y) (docs/theory/dmft.rst §2–3).

    Time grid: ``T`` (final time) and ``dt``, or ``dt`` and ``steps``. ``method="gd"``: exact
    infinite-width GD with learning-rate step ``dt`` (seed 000 runs: ``dt = gd_time_step(η0, P)``).
    ``gd_step=s < dt``: approximate GD with the small step ``s`` by solving on grids ``dt`` and
    ``dt/2`` and extrapolating linearly in the step to ``s`` (error O(dt²); for long runs whose
    exact grid would be too large). ``method="flow"``: gradient flow, first order in dt;
    ``richardson=True`` extrapolates dt, dt/2 to dt → 0 (second order).
    Nonlinear activations use M Monte Carlo paths per layer (``rng`` or ``seed``), ``tol``
    (default 1e-8), ``damping`` β (default 0.7), ``max_iter`` sweeps; ``strict`` raises
    :class:`DMFTNotConverged` instead of returning ``converged=False``. ``solver``: "auto",
    "march" (exact linear), "picard" (global linear iteration), "mc" (force the MC scheme).
    ``beta0``: residual network ``h^{l+1} = h^l + (β0/√(L−1)) W^l φ(h^l)/√N`` (docs/theory/dmft.rst §5; Monte
    Carlo with Jacobian responses, :mod:`limits.dmft.residual`; small grids only).
    ``X_test`` (P_test×D): also predict on these inputs — they are carried through the same DMFT as
    samples whose error does not drive the dynamics (the gradient sums over training samples only),
    giving ``f_test`` (n_t×P_test, Monte Carlo error ``f_test_se``), the test–train NTK ``ntk_test``
    and kernels ``Phi_test``/``G_test`` over time. For a test point this is the exact
    ``f*(t+dt) = f*(t) + dt Σ_μ K(x*, x_μ; t) Δ_μ(t)`` (GD) resp. ``df*/dt = Σ_μ K(x*, x_μ; t) Δ_μ``
    (flow) with the evolving test–train NTK; as γ0 → 0 it is the NTK prediction
    (``limits.predict.gradient_descent`` of the lazy NTK). Not available for residual nets (``beta0``).
    Raises ``ValueError`` naming the argument on bad input and :class:`StepTooLarge` (a
    ``ValueError``) when dt·λ_max(K(t)) ≥ 2.

    ``model=limits.serial(...)`` (a composition of Dense, Conv, AvgPool, GlobalAvgPool, Flatten, Activation,
    LayerNorm after a Dense/Conv): the
    DMFT of the composition in the mean-field parameterisation (docs/theory/dmft.rst §6, :mod:`limits.dmft.serial`)
    with options ``gamma0``, ``dt`` with ``T`` or ``steps`` (exact GD), ``X_test``, ``M`` paths × ``replicas``
    (error bars), ``seed``, ``progress``, ``keep_spatial``, ``max_memory``, ``max_seconds``; returns a
    :class:`SerialDMFTResult`. Layers it does not treat are refused by name with the reason.
    """
    t_start = time.perf_counter()
    X, y, Kx, depth, gamma0 = _inputs(X, y, depth, gamma0)
    act, name = _activation(activation)
    _refuse_kinked_responses(act, name, depth, beta0)
    grid = make_grid(T, dt, steps)
    P_train = X.shape[0]
    yy, mask = y, None
    if X_test is not None:
        if beta0 is not None:
            raise ValueError("X_test: test predictions are not available for the residual solver (beta0)")
        Xs = finite_array(X_test, "X_test", ndim=2)
        if Xs.shape[0] < 1 or Xs.shape[1] != X.shape[1]:
            raise ValueError(f"X_test must be P_test×{X.shape[1]} (the columns of X), got shape {Xs.shape}")
        Xa = np.vstack([X, Xs])
        Kx = Xa @ Xa.T / X.shape[1]
        yy = np.concatenate([y, np.zeros(Xs.shape[0])])
        mask = np.concatenate([np.ones(P_train), np.zeros(Xs.shape[0])])
    if beta0 is not None:
        return _solve_residual(X, y, Kx, depth, gamma0, positive_float(beta0, "beta0"), act, name, grid, method,
                               M, rng, seed, tol, max_iter, damping, strict, t_start)
    if method not in ("gd", "flow"):
        raise ValueError(f"method must be 'gd' or 'flow', got {method!r}")
    if solver not in ("auto", "march", "march-dense", "picard", "mc"):
        raise ValueError(f"solver must be 'auto', 'march', 'march-dense', 'picard' or 'mc', got {solver!r}")
    if solver in ("march", "march-dense", "picard") and name != "linear":
        raise ValueError(f"solver={solver!r} needs activation='linear'")
    M = positive_int(M, "M", minimum=2)
    max_iter = positive_int(max_iter, "max_iter")
    if tol is None:
        tol = 1e-10 if solver == "picard" else 1e-8
    tol = positive_float(tol, "tol")
    if damping is None:
        damping = 1.0 if solver == "picard" else 0.7
    damping = positive_float(damping, "damping")
    if damping > 1:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    K0 = lazy_ntk(X, depth, act)
    lam0 = float(np.linalg.eigvalsh(K0)[-1])
    if grid.dt * lam0 >= 2.0:
        raise StepTooLarge(f"dt too large for the explicit scheme: dt*lambda_max(K(0)) = {grid.dt * lam0:.3g} >= 2")
    if gd_step is not None:
        if method != "gd":
            raise ValueError("gd_step is only meaningful with method='gd'")
        gd_step = positive_float(gd_step, "gd_step")
        if gd_step >= grid.dt:
            raise ValueError(f"gd_step must be < dt for extrapolation (or use dt=gd_step), got {gd_step}")
    rng = generator(rng, seed) if name != "linear" or solver == "mc" else None
    bar = None
    if progress:
        from ..progress import progress as _pb
        bar = _pb
    if solver == "auto":
        solver_eff = "march" if name == "linear" else "mc"
    else:
        solver_eff = solver
    args = (act, name, Kx, yy, depth, gamma0)
    kw = dict(M=M, tol=tol, max_iter=max_iter, damping=damping, strict=strict, solver=solver_eff, bar=bar,
              mask=mask)
    extrap = (method == "flow" and richardson) or gd_step is not None
    if not extrap:
        out = _solve_grid(*args, grid, rng=rng, keep_two_time=keep_two_time, **kw)
        target_msg = "exact GD, step dt" if method == "gd" else "gradient flow, first order in dt"
    else:
        coarse = _solve_grid(*args, grid, rng=rng, keep_two_time=False, **kw)
        fine_grid = TimeGrid(grid.dt / 2, grid.n_steps * 2)
        rng2 = None if rng is None else np.random.default_rng(rng.integers(2**63))
        fine = _solve_grid(*args, fine_grid, rng=rng2, keep_two_time=keep_two_time, **kw)
        s = 0.0 if method == "flow" else gd_step
        h = grid.dt
        w = (h - 2 * s) / h          # f(s) ≈ f(h/2) + w (f(h/2) − f(h))
        out = dict(fine)
        sub = slice(None, None, 2)
        for key in ("f", "ntk", "Phi", "G"):
            fv = fine[key][sub] if key in ("f", "ntk") else fine[key][:, sub]
            out[key] = fv + w * (fv - coarse[key])
        out["t"] = grid.t
        out["Delta"] = yy[None, :] - out["f"]
        out["f_se"] = np.sqrt(fine["f_se"][sub] ** 2 * (1 + w) ** 2 + coarse["f_se"] ** 2 * w ** 2)
        out["iterations"] = coarse["iterations"] + fine["iterations"]
        out["residual"] = max(coarse["residual"], fine["residual"])
        out["converged"] = coarse["converged"] and fine["converged"]
        out["Phi2"] = out["G2"] = None
        target_msg = (f"step extrapolation from dt={h:g}, dt/2 to step {s:g} (error O(dt^2)); "
                      + ("gradient flow" if method == "flow" else "GD"))
    test = {}
    if mask is not None:
        out = _split_test(out, P_train, keep_two_time)
        test = {k: out.pop(k) for k in ("f_test", "f_test_se", "ntk_test", "Phi_test", "G_test")}
        test["X_test"] = Xs
    f = out["f"]
    Delta = out["Delta"]
    loss = 0.5 * np.sum(Delta ** 2, axis=1)
    return DMFTResult(
        t=out["t"], f=f, loss=loss, loss_mean=loss / y.size, Delta=Delta, y=y, ntk=out["ntk"],
        Phi=out["Phi"], G=out["G"], f_se=out["f_se"], depth=depth, activation=str(name), gamma0=gamma0,
        dt=grid.dt, method=method, solver=out["solver"],
        iterations=out["iterations"], residual=out["residual"], converged=out["converged"],
        message=f"{target_msg}; {out['message']}", mc_samples=M if out["solver"] == "mc-alternating" else 0,
        wall_time_s=time.perf_counter() - t_start, Phi2=out["Phi2"], G2=out["G2"], **test)


def _split_test(out, P, keep_two_time):
    """Split the joint (train + test) solution into the training result and the test predictions."""
    o = dict(out)
    o["f_test"], o["f"] = out["f"][:, P:], out["f"][:, :P]
    o["f_test_se"], o["f_se"] = out["f_se"][:, P:], out["f_se"][:, :P]
    o["Delta"] = out["Delta"][:, :P]
    o["ntk_test"], o["ntk"] = out["ntk"][:, P:, :P], out["ntk"][:, :P, :P]
    o["Phi_test"], o["Phi"] = out["Phi"][:, :, P:, :P], out["Phi"][:, :, :P, :P]
    o["G_test"], o["G"] = out["G"][:, :, P:, :P], out["G"][:, :, :P, :P]
    if keep_two_time and out.get("Phi2") is not None:
        Pa = out["f"].shape[1]
        n_t = out["f"].shape[0]
        idx = (np.arange(n_t)[:, None] * Pa + np.arange(P)[None, :]).ravel()
        o["Phi2"] = out["Phi2"][:, idx][:, :, idx]
        o["G2"] = out["G2"][:, idx][:, :, idx]
    return o


SERIAL_OPTIONS = ("gamma0", "T", "dt", "steps", "method", "X_test", "M", "replicas", "seed", "rng", "progress",
                  "keep_spatial", "max_memory", "max_seconds")


def _composition(model):
    """The composition ``model`` describes (a ``limits.serial``, a layer, its dict or file), or None (a Model)."""
    if model is None:
        return None
    from ..layers import as_serial

    return as_serial(model)


def _with_compositions(fn):
    """``solve(X, y, model=limits.serial(...), ...)``: the DMFT of a composition (:mod:`limits.dmft.serial`,
    docs/theory/dmft.rst §6); every other call goes to ``fn`` (MLPs, ResNets, the keyword signature)."""
    import functools

    @functools.wraps(fn)
    def solve(*args, model=None, **kw):
        comp = _composition(model)
        if comp is None:
            return fn(*args, model=model, **kw) if model is not None else fn(*args, **kw)
        from .serial import solve_serial

        if len(args) > 2:
            raise ValueError("limits.dmft.solve(X, y, model=composition, ...): pass the options by keyword")
        extra = sorted(set(kw) - set(SERIAL_OPTIONS))
        if extra:
            raise ValueError(f"limits.dmft.solve: {extra} do not apply to a composition (it fixes depth and "
                             f"activations); options: {', '.join(SERIAL_OPTIONS)}")
        rng = kw.pop("rng", None)
        if rng is not None:
            kw["seed"] = int(generator(rng).integers(2**63))
        names = ("X", "y")
        kw.update({names[i]: a for i, a in enumerate(args)})
        return solve_serial(comp=comp, **kw)

    return solve


def _model_entry_points():
    from ..model import dmft_view, with_model

    return _with_compositions(with_model(solve, dmft_view, "limits.dmft.solve"))


solve = _model_entry_points()
