"""Validation cases for limits.pc (docs/theory/finite.rst §4): closed form vs block Cholesky vs iterative
inference (exact, 1e-10), and the width / depth laws of the equilibrated-energy rescaling
s(θ) − 1 ∝ 1/N (seed 000 Eq. 16) and ∝ L/N (seed 000 Eq. 19, 104) against exact initialisation
expectations, with Monte Carlo standard errors and fitted log–log slopes."""
from __future__ import annotations

import numpy as np

from ..stats import loglog_fit, mean_se
from . import Case, register_case

C = "pc"


def _net(rng, dims, scale=1.2):
    return [scale * rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i]) for i in range(len(dims) - 1)]


@register_case(C, "reference values (scalar chains, docs/theory/pc.rst §2)")
def _(rng, quick):
    from .. import pc

    e2 = pc.equilibrium([[[1.0]], [[2.0]]], [[1.0]], [[1.0]])
    e3 = pc.equilibrium([[[1.0]], [[2.0]], [[1.5]]], [[1.0]], [[1.0]])
    ref = [0.1, 12.25, 8 / 49, 25 / 49, 38 / 49]
    val = [e2.energy, e3.s, e3.energy, e3.z[0][0, 0], e3.z[1][0, 0]]
    return Case.exact(C, "reference values (scalar chains, docs/theory/pc.rst §2)", ref, val, tol=1e-12,
                      detail="L=2 w=(1,2): F*=0.1; L=3 w=(1,2,1.5): S=12.25, F*=0.1632653, z*=(0.5102041, 0.7755102)")


@register_case(C, "telescoped z* = block-Cholesky H_z⁻¹b (MLP, 1-skip, 2-skip, λ_l, nudged)")
def _(rng, quick):
    from .. import pc

    N, H, B = (24, 10, 8) if quick else (64, 32, 16)
    out = []
    for label, kw in [("MLP", {}), ("1-skip μPC", dict(skips="1-skip")), ("2-skip μPC", dict(skips=2)),
                      ("layer weights", dict(layer_weights=rng.uniform(0.3, 3.0, H + 1))),
                      ("nudged β=0.5", dict(nudge=0.5))]:
        W, a = pc.init_weights(N, H, "mupc" if "μPC" in label else "sp", d_in=5, d_out=3, rng=rng)
        X, Y = rng.standard_normal((B, 5)), rng.standard_normal((B, 3))
        e1 = pc.equilibrium(W, X, Y, a, **kw)
        e2 = pc.equilibrium(W, X, Y, a, method="block", **kw)
        z1 = np.concatenate([np.ravel(z) for z in e1.z] + [np.ravel(e1.energy)])
        z2 = np.concatenate([np.ravel(z) for z in e2.z] + [np.ravel(e2.energy)])
        out.append(Case.exact(C, f"telescoped vs block Cholesky: {label} (N={N}, H={H})", z2, z1, tol=1e-10,
                              detail=f"max over z* entries and F*; block residual converged={e2.converged}"))
    return out


@register_case(C, "GD inference converges to the closed-form z*")
def _(rng, quick):
    from .. import pc

    N, H = (8, 4) if quick else (16, 8)
    W, a = pc.init_weights(N, H, "sp", d_in=3, d_out=2, rng=rng)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    lm = pc.lambda_max(W, a)
    out = []
    for upd in ("simultaneous", "sequential"):
        r = pc.infer(W, X, Y, beta=1.5 / lm, steps=400_000, multipliers=a, update=upd, tol=1e-11, warn=False)
        e = pc.equilibrium(W, X, Y, a)
        out.append(Case.exact(C, f"GD inference ({upd}) → closed-form z* (N={N}, H={H})",
                              np.concatenate([np.ravel(z) for z in e.z]),
                              np.concatenate([np.ravel(z) for z in r.z]), tol=1e-9,
                              detail=f"{r.message}; β = 1.5/λ_max, bound 2/λ_max = {r.beta_bound:.4g}"))
    return out


def _mf_mlp(rng, N, L, D, gamma0):
    W = [rng.standard_normal((N, D))] + [rng.standard_normal((N, N)) for _ in range(L - 2)] + \
        [rng.standard_normal((1, N))]
    mult = [1 / np.sqrt(D)] + [N ** -0.5] * (L - 2) + [1 / (gamma0 * N)]
    return W, mult


@register_case(C, "s(θ) − 1 ∝ 1/N, mean-field linear MLP at init (seed 000 Eq. 16)")
def _(rng, quick):
    """Exact expectation at init: E[s − 1] = (L − 1)/(γ0² N) (each ‖G_l‖² has mean 1/(γ0² N))."""
    from .. import pc

    L, D, gamma0 = 5, 40, 1.0
    Ns = [16, 32, 64, 128] if quick else [16, 32, 64, 128, 256, 512]
    reps = 40 if quick else 500        # full: detectable bias < 2 % (100 reps: 4.3 %)
    means, ses, theo = [], [], []
    for N in Ns:
        vals = [pc.s_theta(*_mf_mlp(rng, N, L, D, gamma0)) - 1 for _ in range(reps)]
        m, s = mean_se(vals)
        means.append(m); ses.append(s); theo.append((L - 1) / (gamma0**2 * N))
    fit = loglog_fit(Ns, means, ses)
    return Case.statistical(C, "s(θ) − 1 ∝ 1/N, mean-field linear MLP at init (seed 000 Eq. 16)", theo, means, ses,
                            rate=fit, rate_expected=-1.0,
                            detail=f"L={L}, D={D}, γ0={gamma0}, {reps} inits per N ∈ {Ns}; theory (L−1)/(γ0²N); "
                                   f"slope {fit}")


@register_case(C, "s(θ) − 1 ∝ L/N, linear ResNet α = 1/2 (seed 000 Eq. 19, 104)")
def _(rng, quick):
    """Exact expectation at init: E[s − 1] = L((1 + 1/L)^{L−1} − 1)/(γ0² N) ≈ (e − 1) L/N."""
    from .. import pc

    D, gamma0, alpha = 10, 1.0, 0.5
    grid = [(64, 8), (64, 16), (64, 32), (128, 32), (256, 32)] if quick else \
        [(128, 8), (128, 16), (128, 32), (128, 64), (256, 64), (512, 64)]
    reps = 24 if quick else 480        # full: detectable bias < 2 % (60 inits: 4.8 %, 360: 2.2 %)
    means, ses, theo, x = [], [], [], []
    for N, L in grid:
        vals = []
        for _ in range(reps):
            W = [rng.standard_normal((N, D))] + [rng.standard_normal((N, N)) for _ in range(L - 2)] + \
                [rng.standard_normal((1, N))]
            vals.append(pc.s_seed000_eq104(W, N, alpha, gamma0) - 1)
        m, s = mean_se(vals)
        means.append(m); ses.append(s); x.append(L / N)
        theo.append(L * ((1 + 1 / L) ** (L - 1) - 1) / (gamma0**2 * N))
    fit = loglog_fit(x, means, ses)
    expected = loglog_fit(x, theo).slope
    return Case.statistical(C, "s(θ) − 1 ∝ L/N, linear ResNet α = 1/2 (seed 000 Eq. 19, 104)", theo, means, ses,
                            rate=fit, rate_expected=expected,
                            detail=f"(N, L) ∈ {grid}, {reps} inits each; theory L((1+1/L)^(L−1) − 1)/(γ0²N) → "
                                   f"(e−1)L/N; fitted slope vs L/N {fit}; expected slope {expected:.3f} is that of "
                                   f"the exact finite-L curve (→ 1 as L → ∞)")


@register_case(C, "1 − cos(∇F*, ∇MSE) ∝ 1/N², mean-field linear MLP at init (seed 000 Cor. 3.2)")
def _(rng, quick):
    """PC → BP: S = 1 + O(1/N) rescales the gradient (no angle), and the equilibrium shift
    z* − h = O(1/N) relative adds a perpendicular part O(1/N), so 1 − cos = O(1/N²). The fitted
    slope must contain −2 (a failing case here would mean the predicted rate is wrong)."""
    from .. import pc

    D, L, P = 40, 5, 20
    Ns = [64, 128, 256, 512] if quick else [64, 128, 256, 512, 1024]
    reps = 12 if quick else 30
    means, ses = [], []
    for N in Ns:
        vals = []
        for _ in range(reps):
            X = rng.standard_normal((P, D))
            y = np.sign(rng.standard_normal((P, 1)))
            W, mult = _mf_mlp(rng, N, L, D, 1.0)
            vals.append(1 - pc.total_cosine(pc.pc_gradients(W, X, y, mult), pc.bp_gradients(W, X, y, mult)))
        m, s = mean_se(vals)
        means.append(m); ses.append(s)
    fit = loglog_fit(Ns, means, ses)
    # statistical part: extrapolated value at N = ∞ is 0; compare the largest-N mean with the fitted
    # power law (a consistency check of the fit itself) and require the rate −2 in the CI
    pred = fit.predict(Ns)
    return Case.statistical(C, "1 − cos(∇F*, ∇MSE) ∝ 1/N², mean-field linear MLP at init (seed 000 Cor. 3.2)",
                            pred, means, ses, rate=fit, rate_expected=-2.0,
                            detail=f"L={L}, P={P}, D={D}, γ0=1, {reps} inits per N ∈ {Ns}; 1−cos means "
                                   f"{np.array2string(np.array(means), precision=4)}; slope {fit}")


def _finite_linear(net, w):
    """Weights and multipliers of a limits.finite linear MLP in pc's layout (output scale folded in)."""
    names = net.layer_names()
    layers = [net.readin] + [blk.layers[0] for blk in net.blocks] + [net.readout]
    mult = [float(l.mult) for l in layers]
    mult[-1] *= float(net.out_scale)
    return [w.W[n][0] for n in names], mult, names


@register_case(C, "pc BP gradients and forward = limits.finite backward (linear MLPs, SP and mean-field)")
def _(rng, quick):
    """Cross-component identity: the residual r = y − f and the BP gradients that PC is compared
    with (pc.bp_gradients) equal limits.finite's forward/backward on the same weights."""
    import limits.finite as F

    from .. import params, pc

    out = []
    nets = [("SP MLP N=16", F.mlp(6, 16, 3, 2, activation="linear"))]
    try:
        nets.append(("mean-field MLP L=5 N=32 (seed 000)",
                     F.concretise(params.named("MF", convention="variance", algorithm="bp"), N=32, L=5, d_in=40,
                                  eta0=0.025, activation="linear")))
    except Exception as exc:  # params/concretise unavailable: report, do not hide
        out.append(Case(C, "mean-field concretise", float("nan"), float("nan"), float("nan"), float("nan"),
                        "error", detail=f"{type(exc).__name__}: {exc}"))
    for label, net in nets:
        w = F.init_weights(net, 1, seed=int(rng.integers(1 << 30)))
        d_in = net.readin.fan_in
        d_out = net.readout.fan_out
        X, Y = rng.standard_normal((7, d_in)), rng.standard_normal((7, d_out))
        loss, g, fwd = F.loss_and_grads(net, w, X, Y)
        W, mult, names = _finite_linear(net, w)
        gb = pc.bp_gradients(W, X, Y, mult)
        e = pc.equilibrium(W, X, Y, mult)
        ref = np.concatenate([np.ravel(fwd.f[0]), np.ravel(loss)] + [np.ravel(g.dW[n][0]) for n in names])
        val = np.concatenate([np.ravel(e.forward[-1]), [e.mse]] + [np.ravel(x) for x in gb])
        out.append(Case.exact(C, f"pc forward/MSE/BP gradients = finite backward: {label}", ref, val, tol=1e-10,
                              detail="finite loss reduction 'mean' = (1/2P)Σ‖r‖² = pc MSE convention"))
    return out



def _telescoped_longdouble(net, X, Y):
    """Reference z* of the telescoped formula in extended precision (np.longdouble, no BLAS)."""
    ld = np.longdouble
    W = [w.astype(ld) for w in net.W]
    a = net.a.astype(ld)
    L = net.L
    hs = [X.astype(ld)]
    for l in range(1, L + 1):
        h = a[l - 1] * (hs[l - 1] @ W[l - 1].T)
        if net.tau[l - 1]:
            h = h + ld(net.tau[l - 1]) * hs[net.src[l - 1]]
        hs.append(h)
    G = [None] * (L + 1)
    G[L] = np.eye(net.d_out, dtype=ld)
    for l in range(L - 1, -1, -1):
        g = a[l] * (G[l + 1] @ W[l])
        for m in range(l + 1, L + 1):
            if net.tau[m - 1] and net.src[m - 1] == l:
                g = g + ld(net.tau[m - 1]) * G[m]
        G[l] = g
    S = sum(G[l] @ G[l].T / ld(net.lam[l - 1]) for l in range(1, L + 1))
    Sinv = np.linalg.inv(S.astype(np.float64)).astype(ld)
    for _ in range(6):                                           # Newton–Schulz refinement in long double
        Sinv = Sinv @ (2 * np.eye(net.d_out, dtype=ld) - S @ Sinv)
    U = (Y.astype(ld) - hs[L]) @ Sinv
    M = [np.zeros((net.d_in, net.d_out), dtype=ld)]
    for l in range(1, L + 1):
        m = a[l - 1] * (W[l - 1] @ M[l - 1]) + G[l].T / ld(net.lam[l - 1])
        if net.tau[l - 1]:
            m = m + ld(net.tau[l - 1]) * M[net.src[l - 1]]
        M.append(m)
    return np.concatenate([(hs[l] + U @ M[l].T).astype(np.float64).T for l in range(1, L)])


@register_case(C, "ill-conditioned SP ResNet: telescoped form accurate, H_z solve limited by κ(H_z) (seed 000 §A.2)")
def _(rng, quick):
    """SP ResNets (a_l = 1, W ~ N(0, 1/N), skips) have κ(H_z) ~ 1e9–1e12: any solve of H_z z = b loses
    ~κ·ε_mach, while the telescoped form only solves with S (κ(S) = O(10)). Checked against an
    extended-precision evaluation of the telescoped formula."""
    from .. import pc

    N, H, B = (64, 32, 8) if quick else (96, 48, 8)
    W, a = pc.init_weights(N, H, "sp", d_in=5, d_out=3, rng=rng)
    X, Y = rng.standard_normal((B, 5)), rng.standard_normal((B, 3))
    out = []
    for sk in (2, "1-skip"):
        net = pc.make_net(W, a, sk)
        zref = _telescoped_longdouble(net, X, Y)
        e1 = pc.equilibrium(W, X, Y, a, sk)
        e2 = pc.equilibrium(W, X, Y, a, sk, method="block")
        z1 = np.concatenate([z.T for z in e1.z])
        z2 = np.concatenate([z.T for z in e2.z])
        scale = np.abs(zref).max()
        kappa = pc.extreme_eigenvalues(W, a, sk, method="lanczos").kappa
        err_block = np.abs(z2 - zref).max() / scale
        out.append(Case.exact(C, f"telescoped z* vs long-double reference, SP {sk} ResNet N={N} H={H}",
                              zref / scale, z1 / scale, tol=1e-10,
                              detail=f"κ(H_z) = {kappa:.3g}, κ(S) = {e1.cond_S:.3g}; block-Cholesky H_z solve "
                                     f"relative error {err_block:.2e} (bound κ·ε_mach = {kappa * 2.2e-16:.1e})"))
        out.append(Case.exact(C, f"block H_z solve error within κ(H_z)·ε_mach, SP {sk} ResNet N={N} H={H}",
                              0.0, max(0.0, err_block / (kappa * 2.2e-16) - 1.0), tol=1e-10,
                              detail=f"relative error {err_block:.2e} ≤ κ·ε_mach = {kappa * 2.2e-16:.1e}"))
    return out


def _seed003_ml1_draw(rng, M, d_in=16):
    """Linear 3-layer μP network of seed 003 Fig. 2 (W_1 ~ N(0,1/d), W_2 ~ N(0,1/M), W_3 ~ N(0,1/M²)), M_L = 1."""
    W = [rng.standard_normal((M, d_in)) / np.sqrt(d_in), rng.standard_normal((M, M)) / np.sqrt(M),
         rng.standard_normal((1, M)) / M]
    return W, rng.standard_normal((1, d_in)), rng.standard_normal((1, 1))


SEED003_ML1_EXACT = "seed 003, M_L = 1, γ̄_L = −1: PC errors e*_l ∥ BP signals δ_l exactly (Thm 4.2)"
SEED003_ML1_STAT = ("seed 003, M_L = 1, γ̄_L = −1: layer-3 1 − cos(∂F*/∂W, ∇_W MSE) does NOT decay with M "
                    "(disagrees with the seed's 'PC = GD when M_L = 1')")


@register_case(C, SEED003_ML1_EXACT)
def seed003_ml1_errors_case(rng, quick):
    """e*_l = (γ_L/γ_l) W_{L:l+1}ᵀ (1 + C_γ)⁻¹ (y − f) (seed 003 Eq. 15, proof's sign) is a positive
    multiple of BP's backward signal δ_l = W_{L:l+1}ᵀ (y − f) when M_L = 1, so every cosine is 1; the
    same holds for e*_l h_{l−1}ᵀ with the *forward* presynaptic activity (the FPA rule S.6)."""
    from .. import pc

    Ms = [16, 64] if quick else [16, 64, 256]
    vals = []
    for M in Ms:
        for _ in range(3):
            W, X, Y = _seed003_ml1_draw(rng, M)
            gam = [1.0, 1.0, float(M)]                           # γ_L = M^{−γ̄_L}, γ̄_L = −1
            fp = pc.seed003_fixed_point(W, X[0], Y[0], gam)
            eq = pc.equilibrium(W, X, Y, layer_weights=gam)
            r = Y[0] - W[2] @ W[1] @ W[0] @ X[0]
            delta = [(W[2] @ W[1]).T @ r, W[2].T @ r, r]
            hs = [X[0], W[0] @ X[0], W[1] @ W[0] @ X[0]]
            bp = pc.bp_gradients(W, X, Y)
            for l in range(3):
                vals.append(pc.cosine(fp.e[l][:, 0], delta[l]))
                vals.append(pc.cosine(eq.errors[l][0], delta[l]))
                vals.append(pc.cosine(-gam[l] * np.outer(fp.e[l][:, 0], hs[l]), bp[l]))   # −γ_l e*_l h_(l−1)ᵀ
    vals = np.array(vals)
    return Case.exact(C, SEED003_ML1_EXACT, np.ones_like(vals), vals, tol=1e-10,
                      detail=f"{len(vals)} cosines (layers 1–3, M ∈ {Ms}, 3 draws each; seed003_fixed_point and "
                             f"equilibrium errors vs δ_l, and e*_l h_(l−1)ᵀ with forward h vs bp_gradients); "
                             f"min cos = {vals.min():.15f}. The seed's M_L = 1 statement holds for the errors and for "
                             f"the forward-presynaptic (FPA, Eq. S.6) update — not for ∂F*/∂W (next case).")


@register_case(C, SEED003_ML1_STAT)
def seed003_ml1_gradients_case(rng, quick):
    """∂F*/∂W_l = −γ_l e*_l v*_{l−1}ᵀ (seed 003 Eq. 4 at the fixed point) uses the *equilibrated*
    activity v*_{l−1}; with γ_L = M (γ̄_L = −1) and W_3 ~ N(0, 1/M²) the shift v*_2 − h_2 ∝ γ_L W_3ᵀ u
    is Θ(‖h_2‖), so cos(∂F*/∂W_3, ∇BP_3) = cos(v*_2, h_2) stays Θ(1) below 1 at every width.
    Statement tested: 1 − cos at the largest M is consistent with that at the smallest M, and the
    fitted log–log slope of 1 − cos vs M contains 0 (no decay)."""
    from .. import pc

    Ms = [16, 32, 64, 128]
    reps = 150 if quick else 400
    per = []                                                     # (len(Ms), reps, 3)
    for M in Ms:
        c = []
        for _ in range(reps):
            W, X, Y = _seed003_ml1_draw(rng, M)
            gp = pc.pc_gradients(W, X, Y, layer_weights=[1.0, 1.0, float(M)])
            c.append(pc.layer_cosines(gp, pc.bp_gradients(W, X, Y)))
        per.append(c)
    one_minus = 1.0 - np.array(per)
    stats = [[mean_se(one_minus[i, :, l]) for l in range(3)] for i in range(len(Ms))]
    m = np.array([[s[0] for s in row] for row in stats])
    se = np.array([[s[1] for s in row] for row in stats])
    fit = loglog_fit(Ms, m[:, 2], se[:, 2])
    fit2 = loglog_fit(Ms, m[:, 1], se[:, 1])
    z_seed = m[-1, 2] / se[-1, 2]
    # weighted fit 1 − cos ≈ a + b/M: the M → ∞ intercept a with its SE (the seed's claim is a = 0)
    A = np.column_stack([np.ones(len(Ms)), 1.0 / np.asarray(Ms, float)]) / se[:, 2:3]
    coef, *_ = np.linalg.lstsq(A, m[:, 2] / se[:, 2], rcond=None)
    a_inf, a_se = coef[0], np.sqrt(np.linalg.inv(A.T @ A)[0, 0])
    return Case.statistical(
        C, SEED003_ML1_STAT, m[-2, 2], m[-1, 2], np.hypot(se[-2, 2], se[-1, 2]), rate=fit, rate_expected=0.0,
        detail=(f"Linear L=3 μP net, d=16, M_L=1, one sample, γ=(1, 1, M), {reps} draws per M ∈ {Ms}; "
                f"pc.pc_gradients vs pc.bp_gradients. Mean ± SE of 1 − cos per layer (rows M): "
                f"layer 1 {np.array2string(m[:, 0], precision=3)} (exact 0); "
                f"layer 2 {np.array2string(m[:, 1], precision=3)} ± {np.array2string(se[:, 1], precision=3)}; "
                f"layer 3 {np.array2string(m[:, 2], precision=3)} ± {np.array2string(se[:, 2], precision=3)}. "
                f"Theory = layer-3 value at M={Ms[-2]}, estimate = at M={Ms[-1]}; fitted slope of layer-3 "
                f"1 − cos vs M {fit} (expected 0 = no decay; a 1/M decay, slope −1, "
                f"{'is excluded' if not fit.contains(-1.0) else 'is NOT excluded'}); layer 2 slope {fit2}. DISAGREES with seed 003 §4 "
                f"('for M_L = 1 the gradient direction always corresponds to GD'): at M={Ms[-1]} layer-3 "
                f"1 − cos is {z_seed:.1f} SE above 0; a + b/M fit gives the M → ∞ value a = {a_inf:.3f} ± {a_se:.3f} "
                f"({a_inf / a_se:.1f} SE above 0). The e*_l are exactly ∥ BP (previous case); the gap comes "
                f"from the equilibrated presynaptic activities v*."))
