"""``limits.check`` of a response-function prediction (seed 004 Eq. 45–48): finite differences of
finite networks built from the same Model.

Finite side: :func:`limits.finite.residual_response.fd_response` perturbs one entry of the read-in
kernel K⁰ by ±ε on the *same* weights (common random numbers) and differences the layer kernels,
giving per-initialisation η^l, χ^l (l = 1..depth) and χ_out for the covariance entry (0, 1) and the
variance entry (0, 0) of the first two inputs. Responses carry the factor η⁰ = N/d_in, so both
sides are compared normalised by it (η^l·d_in/N is width-independent at leading order). Expected
rate of one network's deviation: N^{-1/2}; the mean's O(1/N) bias is extrapolated away.
"""
from __future__ import annotations

import time

import numpy as np

from .core import analyse, recorded, register, spawn_seeds


@register(lambda r: type(r).__name__ == "ResponseResult")
def check_response(result, widths, inits, seed, *, model=None, X=None, alpha=0.01, progress=None, eps=1e-5):
    from ..finite.residual_response import fd_response
    from ..progress import progress as _progress

    m, X = recorded(result, model, X, "limits.kernels.response(X, model=m, width=N)")
    if X.shape[0] < 2:
        raise ValueError("check of a response needs at least two inputs (the covariance entry (0, 1))")
    if result.layers is not None:
        raise ValueError("check needs every layer of the response: compute it with keep='all'")
    from ..kernels.modelview import kernel_arguments

    kw = kernel_arguments(m, "limits.check (response)")
    kw.pop("d_in")
    kw.pop("depth_scaling")          # the model's ρ_eff is passed as rho
    L = m.depth
    norm_th = result.d_in / result.width
    entries = [(0, 1), (0, 0)]
    theory, labels = [], []
    for a, b in entries:
        theory += [result.eta[1:, a, b] * norm_th, result.chi[1:, a, b] * norm_th, [result.chi_out[a, b] * norm_th]]
        labels += [f"η^{l}[{a},{b}]" for l in range(1, L + 1)] + [f"χ^{l}[{a},{b}]" for l in range(1, L + 1)] \
            + [f"χ_out[{a},{b}]"]
    theory = np.concatenate(theory)
    t0 = time.perf_counter()
    seeds = spawn_seeds(seed, len(widths) * len(entries))
    samples = []
    bar = _progress(total=len(widths), desc="check response", disable=None if progress is None else not progress)
    for k, N in enumerate(widths):
        cols = []
        for e, entry in enumerate(entries):
            fd = fd_response(X[:2], width=int(N), n_inits=inits, entry=entry, eps=eps,
                             seed=seeds[k * len(entries) + e], **kw)
            nrm = X.shape[1] / int(N)
            cols += [fd.eta[:, 1:] * nrm, fd.chi[:, 1:] * nrm, fd.chi_out[:, None] * nrm]
        samples.append(np.concatenate(cols, axis=1))
        bar.update(1)
    bar.close()
    return analyse("response η, χ, χ_out (÷ N/d_in)", widths, theory, samples, labels=labels, model=m.to_dict(),
                   seed=seed, seconds=time.perf_counter() - t0, alpha=alpha,
                   details={"model_text": m.describe(), "observable": "central finite differences (ε = "
                            f"{eps:g}, common random numbers) of finite networks", "eps": eps})
