"""``limits.check`` of the O(1/N) kernel fluctuations (seed 004 App. C): variance across
initialisations of finite networks built from the same Model.

Finite side: per width N, ``empirical_kernels`` of ``model.finite(N)`` give per-init C^l =
s_l φ(h^{l−1})φ(h^{l−1})ᵀ/N + b_l (l = 1..depth+1; s_l = ρ²σ_w², b_l = ρ²σ_b², read-out σ²_w,out,
σ²_b,out) and stream Grams G^l = h^l h^lᵀ/N. Each init contributes v_s = N (x_s − x̄)² S/(S − 1), whose
mean is N·Var (unbiased); the prediction N·⟨δx δx⟩ = M⁻¹ΣM⁻ᵀ (width-free) is compared with it and
the O(1/N) correction is extrapolated away. One init's v_s has an O(1) relative spread at every
width (a squared Gaussian), so the expected rate of the single-network deviation is 0.
"""
from __future__ import annotations

import time

import numpy as np

from .core import analyse, recorded, register, spawn_seeds


@register(lambda r: type(r).__name__ == "KernelFluctuations")
def check_fluctuations(result, widths, inits, seed, *, model=None, X=None, alpha=0.01, progress=None):
    from ..finite import empirical_kernels
    from ..progress import progress as _progress

    m, X = recorded(result, model, X, "limits.kernels.kernel_fluctuations(X, model=m, width=N)")
    L, N0 = m.depth, int(result.width)
    v = m.variances()
    r2 = m.branch ** 2
    s = [r2 * v["sigma_w2"]] * L + [v["sigma_w2_out"]]
    b = [r2 * v["sigma_b2"]] * L + [v["sigma_b2_out"]]
    iu = np.triu_indices(X.shape[0])
    theory = [N0 * result.var_C[1:, iu[0], iu[1]].ravel()]
    labels = [f"N·Var C^{l}[{i},{j}]" for l in range(1, L + 2) for i, j in zip(*iu)]
    if result.var_gram is not None:
        theory.append(N0 * result.var_gram[:, iu[0], iu[1]].ravel())
        labels += [f"N·Var G^{l}[{i},{j}]" for l in range(L + 1) for i, j in zip(*iu)]
    theory = np.concatenate(theory)
    t0 = time.perf_counter()
    seeds = spawn_seeds(seed, len(widths))
    samples = []
    bar = _progress(total=len(widths), desc="check fluctuations", disable=None if progress is None else not progress)
    for k, N in enumerate(widths):
        ek = empirical_kernels(m.finite(int(N)), X, inits, seed=seeds[k], keep_samples=True, phi_kernels=True)
        C = np.stack([s[l] * ek.K_phi[:, l, iu[0], iu[1]] + b[l] for l in range(L + 1)], axis=1)   # (S, L+1, m)
        obs = [C.reshape(inits, -1)]
        if result.var_gram is not None:
            obs.append(ek.K[:, :, iu[0], iu[1]].reshape(inits, -1))
        Y = np.concatenate(obs, axis=1)
        D = Y - Y.mean(axis=0)
        samples.append(int(N) * D * D * inits / (inits - 1))
        bar.update(1)
    bar.close()
    return analyse("kernel fluctuations N·Var", widths, theory, samples, labels=labels, model=m.to_dict(),
                   seed=seed, seconds=time.perf_counter() - t0, alpha=alpha, rate_expected=0.0,
                   details={"model_text": m.describe(), "observable": "variance across initialisations × N"})
