"""Observable of :func:`limits.check` for kernels at initialisation: the read-out NNGP E[f fᵀ | h^L] (a
Rao–Blackwellised estimate: σ²_out φ(h^L)φ(h^L)ᵀ/N + σ²_b,out), the hidden layers' h^l h^lᵀ/N with
``layers=True``, and the empirical NTK of the NTK parameterisation (weight-free conditional sampler), for
:func:`limits.kernels.kernel` and :func:`limits.kernels.nngp` results computed with ``model=``."""
from __future__ import annotations

import time

import numpy as np

from ..kernels.cross import KernelResult
from ..kernels.nngp import NNGPResult
from .core import combine, register, spawn_seeds


def _tri(P1, P2, symmetric):
    if symmetric:
        return np.triu_indices(P1)
    ii, jj = np.meshgrid(np.arange(P1), np.arange(P2), indexing="ij")
    return ii.ravel(), P1 + jj.ravel()


def _nngp_samples(m, net, X, idx, S, seed, layers):
    """Per init: [hidden layers' h hᵀ/N at ``layers``…, read-out E[f fᵀ|h^L]] at the index pairs."""
    from ..finite import empirical_kernels

    v = m.variances()
    ek = empirical_kernels(net, X, S, seed=seed, keep_samples=True, phi_kernels=True)
    i, j = idx
    parts = [ek.K[:, l, i, j] for l in layers]
    parts.append(v["sigma_w2_out"] * ek.K_phi[:, -1, i, j] + v["sigma_b2_out"])
    return np.concatenate(parts, axis=1)


def _ntk_samples(net, X, idx, S, seed, chunk=None):
    """Per init: the empirical NTK at the index pairs, drawn by the weight-free conditional sampler
    (:func:`limits.finite.ntk.conditional_ntk`, exact in distribution)."""
    from ..finite.ntk import conditional_ntk
    from ..finite.weights import init_streams

    i, j = idx
    N, P = net.width, X.shape[0]
    per = 8.0 * 8 * (net.n_blocks + 2) * P * (N + P)
    chunk = chunk or max(1, min(S, int(256 * 2**20 // per)))
    streams = init_streams(S, seed=seed)
    out = []
    for st in range(0, S, chunk):
        Th = conditional_ntk(net, X, streams=streams[st:st + chunk])
        out.append(Th[:, i, j])
    return np.concatenate(out, axis=0)


def _kernel_check(m, X1, X2, theory_nngp, theory_ntk, widths, inits, seed, layer_theory=None, progress=None,
                  alpha=0.01):
    from ..progress import progress as _progress

    symmetric = X2 is None
    X = X1 if symmetric else np.vstack([X1, X2])
    P1 = X1.shape[0]
    P2 = P1 if symmetric else X2.shape[0]
    idx = _tri(P1, P2, symmetric)
    results = {}
    t0 = time.perf_counter()
    seeds = spawn_seeds(seed, 2 * len(widths))
    pairs = list(zip(idx[0].tolist(), (idx[1] - (0 if symmetric else P1)).tolist()))
    kinds = [k for k, th in (("nngp", theory_nngp), ("ntk", theory_ntk)) if th is not None]
    bar = _progress(total=len(kinds) * len(widths), desc="check", disable=None if progress is None else not progress)
    for kind in kinds:
        samples = []
        if kind == "nngp":
            layers = sorted(layer_theory) if layer_theory else []
            th = np.concatenate([*(layer_theory[l][idx[0], idx[1] - (0 if symmetric else P1)]
                                   for l in layers), theory_nngp[idx[0], idx[1] - (0 if symmetric else P1)]])
            labels = [f"K^{l}[{a},{b}]" for l in layers for a, b in pairs] + [f"K_out[{a},{b}]" for a, b in pairs]
        else:
            th = theory_ntk[idx[0], idx[1] - (0 if symmetric else P1)]
            labels = [f"Θ_out[{a},{b}]" for a, b in pairs]
        for k, N in enumerate(widths):
            net = m.finite(int(N))
            s = seeds[k + (0 if kind == "nngp" else len(widths))]
            if kind == "nngp":
                samples.append(_nngp_samples(m, net, X, idx, inits, s, layers))
            else:
                samples.append(_ntk_samples(net, X, idx, inits, s))
            bar.update(1)
        results[kind] = (th, samples, labels)
    bar.close()
    return results, time.perf_counter() - t0


def _model_and_inputs(result, model, X):
    from ..model import as_model

    mdict = None
    params = getattr(result, "params", None)
    if model is None:
        mdict = getattr(result, "model", None)
        if not mdict and isinstance(params, dict):
            mdict = params.get("model")
        if not mdict:
            raise ValueError("check: this result does not record its model; pass model= (a limits.Model) "
                             "or compute the result with model=")
        model = mdict
    m = as_model(model)
    return m


def _layer_theory(result, layers):
    if not layers:
        return None
    if result.K is None:
        raise ValueError("check(..., layers=True) needs the per-layer blocks: compute the kernel with layers=True")
    return {l: result.K[l] for l in range(result.K.shape[0])}


@register(lambda r: isinstance(r, (KernelResult, NNGPResult)), layers=True)
def check_kernels(result, widths, inits, seed, *, model=None, X=None, alpha=0.01, progress=None, layers=False):
    """Read-out NNGP and NTK (and with ``layers=True`` every layer's K^l) against finite networks."""
    if isinstance(result, KernelResult):
        m = _model_and_inputs(result, model, X)
        X1 = result.X1 if X is None else np.asarray(X, dtype=float)
        if X1 is None:
            raise ValueError("check: pass X= (the inputs of this kernel)")
        X2 = None if result.symmetric else result.X2
        parts, secs = _kernel_check(m, X1, X2, result.nngp, result.ntk, widths, inits, seed,
                                    layer_theory=_layer_theory(result, layers), progress=progress)
        return combine(parts, widths, m, seed, secs, alpha,
                        {"model_text": m.describe(), "observable": "read-out kernels of finite networks",
                         "P1": X1.shape[0], "P2": None if X2 is None else X2.shape[0]})
    if isinstance(result, NNGPResult):
        m = _model_and_inputs(result, model, X)
        Xr = result.params.get("X") if X is None else np.asarray(X, dtype=float)
        if Xr is None:
            raise ValueError("check: pass X= (the inputs of this NNGP result)")
        Xr = np.asarray(Xr, dtype=float)
        lt = None
        if layers:
            if result.layers is not None:
                lt = {int(l): result.K[i] for i, l in enumerate(result.layers)}
            else:
                lt = {l: result.K[l] for l in range(result.K.shape[0])}
        parts, secs = _kernel_check(m, Xr, None, result.K_out, result.Theta_out, widths, inits, seed,
                                    layer_theory=lt, progress=progress)
        return combine(parts, widths, m, seed, secs, alpha,
                        {"model_text": m.describe(), "observable": "empirical kernels of finite networks"})
