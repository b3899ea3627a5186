"""Finite-network self-checks (docs/theory/finite.rst §1, §4): the simulators against exact Gaussian
expectations, with standard errors, z-scores and fitted finite-width rates."""
from __future__ import annotations

import numpy as np

from . import Case, register_case

COMPONENT = "finite"


def _inputs(rng, P=3, d=4):
    X = rng.standard_normal((P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(d) * np.array([0.8, 1.0, 1.3])[:P, None]


def _one_layer_theory(X, act, sw2, sb2):
    from .. import gaussian

    K0 = sw2 * X @ X.T / X.shape[1] + sb2
    return K0, sw2 * gaussian.gram(act, K0) + sb2


def _one_layer_mean_case(act):
    def case(rng, quick):
        from .. import finite as F

        sw2, sb2 = 1.5, 0.1
        X = _inputs(rng)
        K0, K1 = _one_layer_theory(X, act, sw2, sb2)
        N, S = (128, 400) if quick else (256, 2000)
        net = F.mlp(X.shape[1], N, 1, activation=act, sigma_w2=sw2, sigma_b2=sb2)
        ek = F.empirical_kernels(net, X, S, rng=rng, keep_samples=False)
        iu = np.triu_indices(X.shape[0])
        theory = np.concatenate([K0[iu], K1[iu]])
        est = np.concatenate([ek.mean[0][iu], ek.mean[1][iu]])
        se = np.concatenate([ek.se[0][iu], ek.se[1][iu]])
        return Case.statistical(COMPONENT, f"one hidden layer {act}: mean empirical kernel = σ_w² E[φφ] + σ_b²",
                                theory, est, se,
                                detail=f"N={N}, {S} inits, P={X.shape[0]}, σ_w²={sw2}, σ_b²={sb2}; "
                                       "all upper-triangle entries of K⁰ and K¹ (worst |z| shown); "
                                       "the one-layer mean is unbiased at every N")
    return case


for _act in ("erf", "relu", "tanh"):
    register_case(COMPONENT, f"one-layer kernel mean ({_act})")(_one_layer_mean_case(_act))


@register_case(COMPONENT, "single-network kernel fluctuation ~ N^-1/2 (erf)")
def _rms_rate(rng, quick):
    from .. import finite as F
    from ..stats import loglog_fit

    act, sw2, sb2 = "erf", 1.5, 0.1
    X = _inputs(rng)
    _, K1 = _one_layer_theory(X, act, sw2, sb2)
    Ns = [16, 32, 64, 128, 256] if quick else [16, 32, 64, 128, 256, 512, 1024]
    S = 200 if quick else 600
    rms, se = [], []
    for N in Ns:
        net = F.mlp(X.shape[1], N, 1, activation=act, sigma_w2=sw2, sigma_b2=sb2)
        ek = F.empirical_kernels(net, X, S, rng=rng)
        msq = np.mean((ek.K[:, 1] - K1) ** 2, axis=(1, 2))           # per network
        m, s = msq.mean(), msq.std(ddof=1) / np.sqrt(S)
        rms.append(np.sqrt(m))
        se.append(s / (2 * np.sqrt(m)))                                # delta method
    fit = loglog_fit(Ns, rms, se)
    # statistical part: the N-scaled rms extrapolates to a constant; compare first/last via z
    return Case.statistical(COMPONENT, "single-network kernel fluctuation ~ N^-1/2 (erf)",
                            theory=-0.5, estimate=fit.slope, se=fit.slope_se, rate=fit, rate_expected=-0.5,
                            detail=f"rms over entries of K¹_s − K¹_theory for one network, averaged over {S} "
                                   f"inits per N ∈ {Ns}; fitted slope {fit}")


@register_case(COMPONENT, "two-layer mean-kernel bias ~ 1/N (tanh)")
def _bias_rate(rng, quick):
    from .. import finite as F
    from .. import gaussian
    from ..stats import loglog_fit

    act, sw2 = "tanh", 2.0
    X = np.array([[1.0, 0.3]])
    K0 = sw2 * X @ X.T / 2
    K1 = sw2 * gaussian.gram(act, K0)
    K2 = sw2 * gaussian.gram(act, K1)
    Ns = [4, 8, 16, 32, 64]
    base = 8000 if quick else 16000
    bias, se = [], []
    for N in Ns:
        net = F.mlp(2, N, 2, activation=act, sigma_w2=sw2)
        ek = F.empirical_kernels(net, X, base * N // 4, rng=rng, keep_samples=False)
        bias.append(float(K2[0, 0] - ek.mean[2][0, 0]))
        se.append(float(ek.se[2][0, 0]))
    bias, se = np.array(bias), np.array(se)
    if np.any(bias <= 0):
        return Case.statistical(COMPONENT, "two-layer mean-kernel bias ~ 1/N (tanh)", 0.0, float(bias.min()),
                                float(se[np.argmin(bias)]), z_crit=0.0,
                                detail=f"bias K²_theory − mean K² not positive at every N: {bias.tolist()} "
                                       f"± {se.tolist()} — cannot fit a rate")
    fit = loglog_fit(Ns, bias, se)
    case = Case.statistical(COMPONENT, "two-layer mean-kernel bias ~ 1/N (tanh)", theory=-1.0,
                            estimate=fit.slope, se=fit.slope_se, rate=fit, rate_expected=-1.0,
                            detail=f"K²_theory − E[K²] (diagonal, x=(1, 0.3), σ_w²={sw2}) at N ∈ {Ns}: "
                                   f"{np.array2string(bias, precision=5)} ± {np.array2string(se, precision=5)} "
                                   f"({base}·N/4 inits each); fitted slope {fit}. The O(1/N) bias is what "
                                   "the finite-size theory (docs/theory/kernels.rst §3) predicts; its sign is negative here")
    if fit.ci_high >= 0:   # the decay must be resolved, not merely consistent with anything
        import dataclasses

        case = dataclasses.replace(case, verdict="fail",
                                   detail=case.detail + " — FAIL: slope CI includes 0 (decay not resolved)")
    return case


@register_case(COMPONENT, "conditional sampler = dense weights in law")
def _samplers(rng, quick):
    from .. import finite as F

    net = F.resnet(3, 16, 3, activation="tanh", sigma_w2=1.4, sigma_b2=0.1, rho=0.6, block_layers=2)
    X = _inputs(rng, P=2, d=3)
    S = 800 if quick else 18000        # full: detectable bias < 2 % (4000 gave 3.9 %)
    a = F.empirical_kernels(net, X, S, rng=rng, method="conditional")
    b = F.empirical_kernels(net, X, S, rng=rng, method="dense")
    iu = np.triu_indices(2)
    ta = np.concatenate([a.mean[l][iu] for l in range(4)])
    tb = np.concatenate([b.mean[l][iu] for l in range(4)])
    se = np.sqrt(np.concatenate([a.se[l][iu] ** 2 + b.se[l][iu] ** 2 for l in range(4)]))
    return Case.statistical(COMPONENT, "conditional sampler = dense weights in law", tb, ta, se,
                            detail=f"two-layer-block ResNet N=16, 3 blocks, {S} inits each; all layers and "
                                   "entries; 'theory' column = dense-weight estimate, SE combines both")


@register_case(COMPONENT, "backward pass = central finite differences")
def _fd(rng, quick):
    from .. import finite as F

    worst = 0.0
    nets = [F.resnet(4, 6, 2, d_out=2, activation="erf", sigma_b2=0.2, rho=0.6, block_layers=2),
            F.resnet(4, 6, 2, d_out=1, activation="tanh", rho=0.5, post_activation=True),
            F.mlp(4, 6, 2, d_out=2, activation="gelu", sigma_b2=0.3)]
    for net in nets:
        X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, net.d_out))
        w = F.init_weights(net, 1, rng=rng)
        _, g, _ = F.loss_and_grads(net, w, X, Y)
        for name in net.layer_names():
            A, G = w.W[name], g.dW[name]
            scale = float(np.sqrt(np.mean(G**2)))
            for _ in range(4):
                idx = tuple(int(rng.integers(0, n)) for n in A.shape)
                old, eps = A[idx], 1e-5
                A[idx] = old + eps
                lp = F.loss_and_grads(net, w, X, Y)[0][0]
                A[idx] = old - eps
                lm = F.loss_and_grads(net, w, X, Y)[0][0]
                A[idx] = old
                fd = (lp - lm) / (2 * eps)
                worst = max(worst, abs(fd - G[idx]) / max(abs(G[idx]), 1e-3 * scale, 1e-12))
    return Case.exact(COMPONENT, "backward pass = central finite differences", 0.0, worst, tol=1e-6,
                      detail="max relative error over random weight entries (erf 2-layer-block ResNet, "
                             "post-act tanh ResNet, gelu MLP); central differences, h = 1e-5, float64")


def _two_layer_ntk_theory(X, act, sw2, sb2):
    """Θ_out = K_out + σ² E[φ'φ'] ∘ K⁰ for the NTK-parameterised two-layer net (docs/theory/kernels.rst §2)."""
    from .. import gaussian

    K0 = sw2 * X @ X.T / X.shape[1] + sb2
    return sw2 * gaussian.gram(act, K0) + sb2 + sw2 * gaussian.dgram(act, K0) * K0


@register_case(COMPONENT, "empirical NTK mean = Θ (two-layer, NTK param.)")
def _ntk_mean(rng, quick):
    from .. import finite as F

    X = _inputs(rng)
    sw2, sb2 = 1.3, 0.2
    th = _two_layer_ntk_theory(X, "erf", sw2, sb2)
    N, S = (128, 400) if quick else (512, 1000)
    net = F.mlp(X.shape[1], N, 0, activation="erf", sigma_w2=sw2, sigma_b2=sb2, parameterisation="ntk")
    T = F.empirical_ntk(net, F.init_weights(net, S, rng=rng), X)
    iu = np.triu_indices(X.shape[0])
    return Case.statistical(COMPONENT, "empirical NTK mean = Θ (two-layer, NTK param.)", th[iu],
                            T.mean(0)[iu], (T.std(0, ddof=1) / np.sqrt(S))[iu],
                            detail=f"erf, σ_w²={sw2}, σ_b²={sb2}, N={N}, {S} inits; one backward pass per "
                                   "net (limits.finite.empirical_ntk); unbiased at every N")


@register_case(COMPONENT, "lazy GD tracks kernel GD, gap ~ N^-1/2 (NTK param.)")
def _lazy(rng, quick):
    from .. import finite as F
    from ..stats import loglog_fit

    P, d, sw2, sb2, eta, T = 4, 4, 1.3, 0.2, 1.0, 10
    X = _inputs(rng, P=3, d=d)
    X = np.vstack([X, -0.5 * X[0]])
    Y = rng.standard_normal((X.shape[0], 1))
    P = X.shape[0]
    th = _two_layer_ntk_theory(X, "erf", sw2, sb2)
    M = np.eye(P) - eta / P * th
    f_lin = (np.eye(P) - np.linalg.matrix_power(M, T)) @ Y          # centred GD on the MSE (1/2P)Σ
    Ns = [64, 256, 1024, 4096] if quick else [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    S = 32 if quick else 100
    gaps, ses = [], []
    for N in Ns:
        net = F.mlp(d, N, 0, activation="erf", sigma_w2=sw2, sigma_b2=sb2, parameterisation="ntk", lr=eta)
        r = F.train(net, X, Y, T, n_inits=S, rng=rng, center=True, record_every=T, record_features=False,
                    keep_weights=False)
        e = np.mean((r.f[-1] - f_lin[None]) ** 2, axis=(1, 2))
        gaps.append(np.sqrt(e.mean()))
        ses.append(e.std(ddof=1) / np.sqrt(S) / (2 * gaps[-1]))
    fit = loglog_fit(Ns, gaps, ses)
    return Case.statistical(COMPONENT, "lazy GD tracks kernel GD, gap ~ N^-1/2 (NTK param.)", -0.5, fit.slope,
                            fit.slope_se, rate=fit, rate_expected=-0.5,
                            detail=f"two-layer erf net, NTK parameterisation, {T} GD steps (η={eta}, loss "
                                   f"(1/2P)Σ, centred f − f0) vs f_lin = (I − (I − ηΘ/P)^T) y with the "
                                   f"theoretical NTK; rms gap over {S} inits at N ∈ {Ns}: "
                                   f"{np.array2string(np.array(gaps), precision=5)}; slope {fit}")
