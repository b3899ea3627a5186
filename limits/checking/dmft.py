"""``limits.check`` of a DMFT prediction: finite mean-field networks of the same Model, trained by
the same gradient descent on the same data, against the infinite-width trajectory f(t).

Finite side (the conventions of ``limits.dmft``, docs/theory/dmft.rst §2): ``model.finite(N)`` with learning rate
η0 = the DMFT step ``dt`` (per raw weight η0 γ0² N), loss ½Σ_μ(f_μ − y_μ)², outputs centred
(f − f_0, as the DMFT starts from f = 0), ``len(t) − 1`` GD steps. Compared entries: f(t_k, x_μ)
for every recorded step k ≥ 1 and training input μ. Expected rate: one network's RMS deviation from
the DMFT ∝ N^{-1/2}; the ensemble mean's bias is O(1/N) (extrapolated like the kernel checks). The
Monte Carlo error of a nonlinear DMFT (``f_se``) enters every comparison.
"""
from __future__ import annotations

import time

import numpy as np

from .core import analyse, recorded, register, spawn_seeds


@register(lambda r: type(r).__name__ == "DMFTResult" and getattr(r, "f_test", None) is None)
def check_dmft(result, widths, inits, seed, *, model=None, X=None, alpha=0.01, progress=None):
    from ..model import ModelError
    from ..progress import progress as _progress

    m, X = recorded(result, model, X, "limits.dmft.solve(X, y, model=m, ...)")
    if result.method != "gd":
        raise ModelError("check: finite networks are trained by discrete GD; solve the DMFT with method='gd' "
                         "(exact infinite-width GD with step dt) to compare")
    if m.n_hidden_layers != result.depth or abs(m.gamma0 - result.gamma0) > 1e-15 * max(1, m.gamma0):
        raise ValueError(f"check: the model (hidden layers {m.n_hidden_layers}, γ0 {m.gamma0}) is not the one "
                         f"this DMFT was solved for (depth {result.depth}, γ0 {result.gamma0})")
    steps = int(result.t.size - 1)
    if steps < 1:
        raise ValueError("check: the DMFT trajectory has no steps to compare")
    y = np.asarray(result.y, dtype=float)
    theory = result.f[1:]
    tse = result.f_se[1:] if result.f_se is not None else None
    mm = m.with_(lr=float(result.dt))
    t0 = time.perf_counter()
    seeds = spawn_seeds(seed, len(widths))
    samples = []
    bar = _progress(total=len(widths), desc="check dmft", disable=None if progress is None else not progress)
    for k, N in enumerate(widths):
        samples.append(_trajectories(mm, X, y, steps, int(N), inits, seeds[k]))
        bar.update(1)
    bar.close()
    P = X.shape[0]
    labels = [f"f(t={result.t[i + 1]:.4g}, x{mu})" for i in range(steps) for mu in range(P)]
    return analyse("dmft f(t)", widths, theory.ravel(), samples, labels=labels, model=m.to_dict(), seed=seed,
                   seconds=time.perf_counter() - t0, alpha=alpha, theory_se=None if tse is None else tse.ravel(),
                   details={"model_text": mm.describe(), "observable": "centred outputs of GD-trained networks",
                            "steps": steps, "dt": float(result.dt), "solver": result.solver})


def _trajectories(m, X, y, steps, N, inits, seed):
    """(inits, steps·P) centred outputs f(t_k) − f(0), k = 1..steps."""
    f = trained_outputs(m, X, y, steps, N, inits, seed)[1:]          # (steps, inits, P)
    return np.transpose(f, (1, 0, 2)).reshape(inits, -1)


def trained_outputs(m, X, y, steps, N, inits, seed):
    """(steps+1, inits, P) centred outputs of ``m.finite(N)`` trained by GD on (X, y) with the sum loss
    ½Σ(f − y)² and the model's learning rate; inits in chunks so weights stay below ~1 GB."""
    from ..finite import train

    net = m.finite(N)
    per_init = 6 * 8 * (max(net.n_blocks, 0) * N * N + N * (X.shape[1] + 1))
    chunk = int(max(1, min(inits, 1e9 // per_init)))
    out = []
    for c, start in enumerate(range(0, inits, chunk)):
        k = min(chunk, inits - start)
        tr = train(net, X, y, steps, n_inits=k, seed=[seed, c], optimizer="gd", reduction="sum", center=True,
                   record_features=False, keep_weights=False)
        out.append(tr.f[:, :, :, 0])
    return np.concatenate(out, axis=1)
