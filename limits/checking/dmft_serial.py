"""``limits.check`` of the DMFT of a composition (``limits.dmft.solve(X, y, model=limits.serial(...), ...)``, docs/theory
/dmft.rst §6) against finite compositions in the same mean-field parameterisation trained by the same GD
(:mod:`limits.finite.serial_meanfield`: the MF table's multipliers and learning rates, read-out / γ0, step dt on
½Σ(f − y)², outputs centred, ``len(t) − 1`` steps, all weights N(0, 1)).

Compared, per init (one row of samples), in four blocks each normalised by its RMS (so that they weigh alike in the
relative statistics): the outputs f(t_k, x_μ) at every step k ≥ 1 on the training inputs (and the test inputs when
the DMFT was solved with ``X_test``); the loss ½Σ_μ(f_μ − y_μ)² at every step; and per hidden stage the change of
its position-averaged feature kernel Φ̄(t) − Φ̄(0) (upper triangle over training inputs) at three times (a third,
two thirds and all of the run). The DMFT's Monte Carlo standard errors (over its R replicas) enter every comparison,
scaled by t_{R−1}/z at the entries' level (:func:`replica_factor`: 16 replicas ×1.4, 32 ×1.2 — many replicas of
fewer paths cost the same and keep the check's power).
Expected: one network's RMS deviation from the DMFT ∝ N^{-1/2}; the ensemble mean's bias O(1/N), extrapolated
(:func:`limits.checking.core.analyse`).
"""
from __future__ import annotations

import time

import numpy as np

from .core import analyse, register, spawn_seeds


def kernel_steps(n_steps):
    """The steps at which feature kernels are compared: a third, two thirds and all of the run (distinct, ≥ 1)."""
    return sorted({max(1, round(n_steps * q)) for q in (1 / 3, 2 / 3, 1.0)})


def _theory(r, ks, iu):
    """(blocks, names, labels): per block (theory, theory SE)."""
    blocks = [("f", r.f[1:].ravel(), r.f_se[1:].ravel(),
               [f"f(t={r.t[k]:.4g}, x{m})" for k in range(1, r.t.size) for m in range(r.P)])]
    if r.f_test is not None:
        blocks.append(("f_test", r.f_test[1:].ravel(), r.f_test_se[1:].ravel(),
                       [f"f(t={r.t[k]:.4g}, x*{m})" for k in range(1, r.t.size) for m in range(r.f_test.shape[1])]))
    blocks.append(("loss", r.loss[1:], r.loss_se[1:], [f"loss(t={r.t[k]:.4g})" for k in range(1, r.t.size)]))
    d = (r.Phi_pool[:, ks] - r.Phi_pool[:, :1])[..., iu[0], iu[1]]          # (stages, times, pairs)
    dse = r.Phi_change_se[:, ks][..., iu[0], iu[1]]
    labels = [f"ΔΦ̄{s}(t={r.t[k]:.4g})[{a},{b}]" for s in range(d.shape[0]) for k in ks for a, b in zip(*iu)]
    blocks.append(("dPhi", d.ravel(), dse.ravel(), labels))
    return blocks


def _samples(o, y, ks, iu):
    """Per init the observables of one width (the blocks of :func:`_theory`), concatenated."""
    f = np.transpose(o["f"][1:], (1, 0, 2))                                    # (S, steps, P)
    parts = [f.reshape(f.shape[0], -1)]
    if o["f_test"] is not None:
        ft = np.transpose(o["f_test"][1:], (1, 0, 2))
        parts.append(ft.reshape(ft.shape[0], -1))
    parts.append(0.5 * np.sum((f - y) ** 2, axis=2))
    Phi = o["Phi"]                                                              # (1 + len(ks), stages, S, P, P)
    d = (Phi[1:] - Phi[:1])[..., iu[0], iu[1]]                                  # (times, stages, S, pairs)
    parts.append(np.transpose(d, (2, 1, 0, 3)).reshape(d.shape[2], -1))
    return np.concatenate(parts, axis=1)


def finite_samples(result, widths, inits, seed, progress=None):
    """Per width the (inits × entries) samples of finite mean-field compositions for ``result`` (module docstring)."""
    from ..finite.serial_meanfield import train_meanfield
    from ..layers import Serial
    from ..progress import progress as _progress

    comp = Serial.from_dict(result.composition)
    X = np.asarray(result.inputs["X"], dtype=float)
    steps = int(result.t.size - 1)
    if steps < 1:
        raise ValueError("check: the DMFT trajectory has no steps to compare")
    ks, iu = kernel_steps(steps), np.triu_indices(result.P)
    bar = _progress(total=len(widths), desc="check dmft (composition)", disable=None if progress is None else not progress)
    samples = []
    for N, s in zip(widths, spawn_seeds(seed, len(widths))):
        o = train_meanfield(comp, int(N), X, result.y, steps, result.dt, result.gamma0, inits, seed=s,
                            X_test=result.X_test, kernel_steps=[0] + ks)
        if not np.all(np.isfinite(o["f"])):
            raise ValueError(f"check: finite compositions of width {N} diverged during training")
        samples.append(_samples(o, result.y, ks, iu))
        bar.update(1)
    bar.close()
    return samples


def _scale_var(result, theory, scales, columns, alpha):
    """The DMFT's own variance of the relative bias along the prediction, from its replicas (its errors are
    correlated across times and quantities: a replica that is high is high everywhere), scaled by t_{R−1}/z at the
    bias test's level; None when the result has no replica values."""
    from scipy.stats import norm, t

    from .core import verdict_levels

    rv = result.replica_values
    if not rv:
        return None
    ks, iu = kernel_steps(int(result.t.size - 1)), np.triu_indices(result.P)
    R = rv["f"].shape[0]
    T = np.stack([np.concatenate(_vectors(rv["f"][r], rv["f_test"][r] if "f_test" in rv else None, rv["loss"][r],
                                          rv["Phi_pool"][r], ks, iu)) for r in range(R)])
    if columns is not None:
        T = T[:, columns]
    tn = theory / scales
    d = ((T - theory) / scales) @ tn / float(tn @ tn)
    p = verdict_levels(alpha)["scale"]
    fac = t.isf(p / 2, R - 1) / norm.isf(p / 2)
    return float(np.var(d, ddof=1) / R * fac ** 2)


def _vectors(f, f_test, loss, Phi_pool, ks, iu):
    """The compared entries of one trajectory (blocks f, f_test, loss, ΔΦ̄), as a list of vectors."""
    out = [f[1:].ravel()]
    if f_test is not None:
        out.append(f_test[1:].ravel())
    out.append(np.asarray(loss[1:]).ravel())
    out.append((Phi_pool[:, ks] - Phi_pool[:, :1])[..., iu[0], iu[1]].ravel())
    return out


def theory_blocks(result):
    """[(name, theory, theory SE, labels)] of the compared blocks (module docstring)."""
    return _theory(result, kernel_steps(int(result.t.size - 1)), np.triu_indices(result.P))


def replica_factor(replicas, n_entries, alpha=0.01):
    """The DMFT's standard errors come from R replicas (R − 1 degrees of freedom): scaled by t_{R−1}/z at the
    per-entry level of the verdict (Bonferroni over the entries), so that an entry whose error is mostly the
    DMFT's keeps the nominal false-alarm rate (conservative elsewhere). ValueError for R < 2 (no error bar)."""
    from scipy.stats import norm, t

    from .core import verdict_levels

    if replicas < 2:
        raise ValueError("check: the DMFT was solved with one replica (no Monte Carlo error bar); solve it with "
                         "replicas >= 2 (default 16)")
    p = verdict_levels(alpha)["entries"] / max(n_entries, 1)
    return float(t.isf(p / 2, replicas - 1) / norm.isf(p / 2))


def analyse_samples(result, widths, samples, seed=0, alpha=0.01, seconds=0.0, columns=None):
    """The check's statistics of ``samples`` (:func:`finite_samples`) against ``result``; ``columns``: a subset of
    the entries (one row of the validation table)."""
    from ..layers import Serial

    comp = Serial.from_dict(result.composition)
    blocks = theory_blocks(result)
    theory = np.concatenate([b[1] for b in blocks])
    tse = np.concatenate([b[2] for b in blocks])
    scales = np.concatenate([np.full(b[1].size, np.sqrt(np.mean(b[1] ** 2)) or 1.0) for b in blocks])
    labels = [lab for b in blocks for lab in b[3]]
    if columns is not None:
        columns = np.asarray(columns)
        theory, tse, scales = theory[columns], tse[columns], scales[columns]
        labels = [labels[i] for i in columns]
        samples = [S[:, columns] for S in samples]
    tse = tse * replica_factor(result.replicas, theory.size, alpha)
    scale_var = _scale_var(result, theory, scales, columns, alpha)
    return analyse("dmft of a composition: f(t), loss, ΔΦ̄(t)", widths, theory, samples, labels=labels,
                   model=comp.to_dict(), seed=seed, seconds=seconds, alpha=alpha, theory_se=tse, scales=scales,
                   theory_scale_var=scale_var,
                   details={"model_text": comp.describe(), "gamma0": result.gamma0, "dt": result.dt,
                            "steps": int(result.t.size - 1), "kernel_steps": kernel_steps(int(result.t.size - 1)),
                            "block_sizes": {b[0]: int(b[1].size) for b in blocks},
                            "observable": "centred outputs, loss and position-averaged feature-kernel changes of "
                                          "GD-trained mean-field compositions (MF table, read-out/γ0, lr dt·γ0²·N)"})


@register(lambda r: type(r).__name__ == "SerialDMFTResult")
def check_dmft_serial(result, widths, inits, seed, *, model=None, X=None, alpha=0.01, progress=None):
    if model is not None or X is not None:
        raise ValueError("check: a composition's DMFT result records its composition and inputs; do not pass "
                         "model= or X=")
    t0 = time.perf_counter()
    samples = finite_samples(result, widths, inits, seed, progress)
    return analyse_samples(result, widths, samples, seed, alpha, time.perf_counter() - t0)
