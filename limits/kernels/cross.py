"""Kernels between two input sets, ``kernel(model, X1, X2)`` (the ``kernel_fn(x1, x2)`` of kernel users).

The NNGP/NTK recursion of :mod:`limits.kernels.nngp` (seed 004 Eq. 29–30) is entrywise: the
(α, β) entry of layer l needs only K^{l−1}_αβ and the two variances q_α = K^{l−1}_αα,
q_β = K^{l−1}_ββ. So the P1×P2 block between X1 and X2 is propagated together with the two
variance vectors, never forming the (P1+P2)² joint Gram::

    q^0 = σ²_w,in |x|²/d + σ²_b,in,   K^0_12 = σ²_w,in X1 X2ᵀ/d + σ²_b,in
    C_12 = ρ²(σ_w² E[φ(u)φ(v)] + σ_b²),        (u, v) ~ N(0, [[q1, K_12], [K_12, q2]])
    K^l_12 = [K^{l−1}_12] + C_12,   q^l = [q^{l−1}] + ρ²(σ_w² E[φ(u)²] + σ_b²)
    Θ^l_12 = [Θ^{l−1}_12] + C_12 + ρ²σ_w² E[φ'(u)φ'(v)] Θ^{l−1}_12,    Θ^0 = K^0
    K_out = σ²_w,out E[φφ](K^L) + σ²_b,out,   Θ_out = K_out + σ²_w,out E[φ'φ'](K^L) Θ^L

([·] only for residual blocks.) Cost O(L·P1·P2) time and O(P1·P2) memory (every layer only with
``layers=True``). With ``X2=None`` the symmetric P1×P1 kernel comes from :func:`limits.kernels.nngp`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..checks import finite_array
from ..progress import layer_range
from ..results import Result, kernel_summary
from . import _fused
from . import diagnostics as _diag
from ._args import row_ids, snap_identical, snap_variances
from .modelview import kernel_arguments

GETS = ("nngp", "ntk")


@dataclass(frozen=True)
class KernelResult(Result):
    """Read-out kernels between X1 (P1 rows) and X2 (P2 rows): ``nngp`` and ``ntk`` (P1×P2, None when
    not requested), per-layer blocks ``K``/``Theta`` ((L+1)×P1×P2, only with ``layers=True``), the
    model (as a dict), and diagnostics (``nngp_exploded_at`` / ``ntk_exploded_at`` = first
    non-finite layer or −1, ``warnings``)."""

    nngp: np.ndarray | None
    ntk: np.ndarray | None
    K: np.ndarray | None
    Theta: np.ndarray | None
    model: dict
    diagnostics: dict
    symmetric: bool = False
    X1: np.ndarray | None = None
    X2: np.ndarray | None = None

    @property
    def shape(self):
        a = self.nngp if self.nngp is not None else self.ntk
        return a.shape

    def __str__(self):
        return kernel_summary(self)


def check_inputs(X, name, d_in):
    """Inputs ``X`` as a float64 P×d_in array (a single row accepted), or ``ValueError`` naming ``name``."""
    X = finite_array(X, name)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2 or X.shape[1] < 1 or X.shape[0] < 1:
        raise ValueError(f"{name} must be a P×d_in array with P ≥ 1, got shape {X.shape}")
    if X.shape[1] != d_in:
        raise ValueError(f"{name} has {X.shape[1]} columns but the model has d_in = {d_in}")
    return X


def parse_get(get):
    """The requested kernels (``"nngp"``, ``"ntk"``) as a non-empty tuple of :data:`GETS`."""
    if isinstance(get, str):
        get = (get,)
    get = tuple(get)
    bad = [g for g in get if g not in GETS]
    if bad or not get:
        raise ValueError(f"get must be a non-empty subset of {GETS}, got {get!r}")
    return get


def _memory_guard(n_slices, P1, P2, what):
    need = 8.0 * n_slices * P1 * P2
    if need > _diag_avail():
        raise ValueError(f"{what} needs {need / 2**30:.1f} GiB for the per-layer blocks; use layers=False "
                         "(read-out kernels only, O(P1·P2) memory) or fewer inputs/layers")


def _diag_avail() -> float:
    """Half of the physical memory (bytes), the ceiling for one result's arrays."""
    import os

    try:
        return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):       # pragma: no cover - non-POSIX
        return 8.0 * 2**30


def kernel(model, X1, X2=None, get=("nngp", "ntk"), *, layers=False, max_memory=None, max_seconds=None,
           n_jobs=None) -> KernelResult:
    """NNGP / NTK read-out kernels of ``model`` between ``X1`` (P1×d_in) and ``X2`` (P2×d_in).

    ``X2=None`` gives the symmetric P1×P1 kernel. ``get`` ⊆ {"nngp", "ntk"}; ``layers=True`` also
    returns every layer's block ``K[l]`` (and ``Theta[l]``), l = 0..depth. The model must be in the
    kernel regime (parameterisation "NTK"; "SP" for the NNGP only), with one-layer pre-activation
    blocks. Agrees with the corresponding block of ``nngp(vstack(X1, X2), model=model)`` to 1e-12.
    Overflow of one kernel (e.g. the NTK growing like χ₁^L in the chaotic phase) never touches the
    other: each has its own ``*_exploded_at`` in ``diagnostics``. A composition of ``limits.layers`` has its
    memory and time estimated first; ``max_memory`` (bytes, default half the available memory) and
    ``max_seconds`` (default one hour) bound them (:func:`limits.kernels.composed.check_cost`). ``n_jobs``: threads
    over row blocks / pairs of inputs (:mod:`limits.parallel`; None: ``$LIMITS_NUM_THREADS``, else every core);
    the numbers are the same for any value.
    """
    from .. import parallel

    with parallel.using(n_jobs):
        return _kernel(model, X1, X2, get, layers, max_memory, max_seconds)


def _kernel(model, X1, X2, get, layers, max_memory, max_seconds):
    """:func:`kernel`'s body, in its thread context."""
    from ..model import ModelError, as_model

    if _is_serial(model):                 # compositions of layers: limits.layers rules
        from .composed import kernel as _composed

        if layers:
            raise ValueError("kernel(..., layers=True) is for limits.mlp/resnet models; a composition reports "
                             "its per-layer structure in diagnostics['structure']")
        from ..layers import as_serial

        return _composed(as_serial(model), X1, X2, get, max_memory=max_memory, max_seconds=max_seconds)
    m = as_model(model)
    get = parse_get(get)
    what = "limits.kernels.kernel"
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    if "ntk" in get and m.param_name == "SP":
        raise ModelError(f"{what}: the NTK of a standard-parameterised (SP) network grows ∝ N at a fixed "
                         "learning rate; use parameterisation='NTK' or get=('nngp',)")
    X1 = check_inputs(X1, "X1", m.d_in)
    want_ntk = "ntk" in get
    if X2 is None:
        return _symmetric(m, X1, get, layers, want_ntk)
    X2 = check_inputs(X2, "X2", m.d_in)
    kw = kernel_arguments(m, what)
    act, L = kw["activation"], m.depth
    r2 = kw["rho"] ** 2
    cw, cb = r2 * kw["sigma_w2"], r2 * kw["sigma_b2"]
    P1, P2 = X1.shape[0], X2.shape[0]
    if layers:
        _memory_guard((L + 1) * (1 + want_ntk), P1, P2, what)
    d = m.d_in
    q1 = kw["sigma_w2_in"] * np.einsum("ij,ij->i", X1, X1) / d + kw["sigma_b2_in"]
    q2 = kw["sigma_w2_in"] * np.einsum("ij,ij->i", X2, X2) / d + kw["sigma_b2_in"]
    K = kw["sigma_w2_in"] * (X1 @ X2.T) / d + kw["sigma_b2_in"]
    ids1, ids2 = row_ids(X1, X2)                      # identical inputs: correlation exactly 1
    snap_variances(q1, ids1)
    snap_variances(q2, ids2, q1, ids1)
    snap_identical(K, ids1, ids2, q1)
    K0 = K.copy() if _fused.kind(act) in ("relu", "erf", "gelu") else None     # for the delicate pairs
    fused = _fused_path(act, K, q1, q2, L, cw, cb, kw, want_ntk, layers, ids1, ids2)
    if fused is not None:
        K_out, T_out, Ks, Ts, watch = fused
        _edges(act, kw, L, X1, X2, K0, q1, q2, K_out, T_out, Ks, Ts, (ids1, ids2), watch)
        diag = {"nngp_exploded_at": -1, "ntk_exploded_at": -1, "warnings": []}
        return KernelResult(K_out if "nngp" in get else None, T_out, Ks, Ts, model_record(m), diag, False, X1, X2)
    T = K.copy() if want_ntk else None
    q1_0, q2_0 = q1.copy(), q2.copy()
    Ks = [K.copy()] if layers else None
    Ts = [T.copy()] if layers and want_ntk else None
    from .. import gaussian

    watch = None
    if K0 is not None:
        from .halfangle import Watch

        watch = Watch(_fused.kind(act), None, None)
    nngp_bad = ntk_bad = -1
    with np.errstate(over="ignore", invalid="ignore"):
        for l in layer_range(L, "cross-kernel layers"):
            if watch is not None:
                watch.Q1, watch.Q2 = {l - 1: q1}, {l - 1: q2}
                watch(l - 1, 0, K)
            a, b = q1[:, None], q2[None, :]
            E = _pair(gaussian.kernel, act, a, K, b)
            G = _pair(gaussian.dkernel, act, a, K, b) if (want_ntk and ntk_bad < 0) else None
            C = cw * E + cb
            e1 = cw * np.asarray(gaussian.kernel(act, q1, q1, q1, checked=True)) + cb
            e2 = cw * np.asarray(gaussian.kernel(act, q2, q2, q2, checked=True)) + cb
            if G is not None:
                T = (T + C + cw * G * T) if kw["residual"] else (C + cw * G * T)
                if not (np.all(np.isfinite(T)) and np.max(np.abs(T)) <= _diag.LARGE):
                    ntk_bad = l
            if kw["residual"]:
                K, q1, q2 = K + C, q1 + e1, q2 + e2
            else:
                K, q1, q2 = C, e1, e2
            if layers:
                Ks.append(K.copy())
                if want_ntk:
                    Ts.append(T.copy() if ntk_bad < 0 else np.full_like(T, np.inf))
            if not (np.all(np.isfinite(q1)) and np.all(np.isfinite(q2))
                    and max(q1.max(), q2.max()) <= _diag.LARGE):
                nngp_bad = l
                break
        if nngp_bad < 0:
            a, b = q1[:, None], q2[None, :]
            E = _pair(gaussian.kernel, act, a, K, b)
            K_out = kw["sigma_w2_out"] * E + kw["sigma_b2_out"]
            T_out = None
            if want_ntk and ntk_bad < 0:
                G = _pair(gaussian.dkernel, act, a, K, b)
                T_out = K_out + kw["sigma_w2_out"] * G * T
                if not np.all(np.isfinite(T_out)):
                    ntk_bad = L + 1
        else:
            K_out = np.full((P1, P2), np.inf)
            T_out = None
    if nngp_bad < 0 and ntk_bad < 0:
        if watch is not None:
            watch.Q1, watch.Q2 = {L: q1}, {L: q2}
            watch(L, 0, K)
        _edges(act, kw, L, X1, X2, K0, q1_0, q2_0, K_out, T_out, Ks, Ts, (ids1, ids2), watch)
    if want_ntk and ntk_bad >= 0:
        T_out = np.full((P1, P2), np.inf)
    diag = {"nngp_exploded_at": nngp_bad, "ntk_exploded_at": ntk_bad if want_ntk else -1, "warnings": []}
    flag_explosions(diag, want_ntk)
    if layers and nngp_bad >= 0:
        while len(Ks) < L + 1:
            Ks.append(np.full((P1, P2), np.inf))
        if want_ntk:
            while len(Ts) < L + 1:
                Ts.append(np.full((P1, P2), np.inf))
    return KernelResult(K_out if "nngp" in get else None, T_out, np.stack(Ks) if layers else None,
                        np.stack(Ts) if layers and want_ntk else None, model_record(m), diag, False, X1, X2)


FUSED = True       # closed-form activations at moderate variances: the fused row-block path (limits.kernels._fused)


def _fused_path(act, K, q1, q2, L, cw, cb, kw, want_ntk, layers, ids1, ids2):
    """(K_out, Θ_out, K stack, Θ stack) by :func:`limits.kernels._fused.cross` — erf, relu, gelu, linear with
    every variance moderate and no overflow possible (else None: the general path below, which reports
    overflows layer by layer). No per-layer validation: the read-in block is a Gram of checked inputs, and
    the closed forms clip |K_αβ| ≤ √(q_α q_β) themselves."""
    kind_ = _fused.kind(act) if FUSED else None
    if kind_ is None:
        return None
    res, wo, bo = kw["residual"], kw["sigma_w2_out"], kw["sigma_b2_out"]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        v1 = _fused.variance_path(kind_, q1, L, cw, cb, res, wo, bo, want_ntk, _diag.LARGE)
        v2 = _fused.variance_path(kind_, q2, L, cw, cb, res, wo, bo, want_ntk, _diag.LARGE) if v1 else None
    if v1 is None or v2 is None:
        return None
    P1, P2 = K.shape
    Ks = np.empty((L + 1, P1, P2)) if layers else None
    Ts = np.empty((L + 1, P1, P2)) if layers and want_ntk else None
    same = None
    if ids1.size and ids2.size and ids1.max() >= 0 and ids2.max() >= 0:   # identical inputs (row_ids)
        i, j = np.nonzero((ids1[:, None] == ids2[None, :]) & (ids1[:, None] >= 0))
        same = (i, j, v1)
    watch = None
    if kind_ in ("relu", "erf", "gelu"):                  # delicate entries at any layer (halfangle)
        from .halfangle import Watch

        watch = Watch(kind_, v1["Q"], v2["Q"])
    with np.errstate(divide="ignore", invalid="ignore"):     # delicate entries are recomputed (halfangle)
        K_out, T_out = _fused.cross(kind_, K, v1["pres"], v2["pres"], L, cw, cb, res, wo, bo, want_ntk, Ks, Ts,
                                    same=same, watch=watch)
    return K_out, T_out, Ks, Ts, watch


def _edges(act, kw, L, X1, X2, K0, q1, q2, K_out, T_out, Ks, Ts, ids, watch=None):
    """Recompute the delicate entries (nearly collinear inputs, large norms) from the rows
    (:func:`limits.kernels.halfangle.patch_block`); closed-form activations only. ``watch``: the entries found
    delicate at any layer (else those of the read-in block K0)."""
    if K0 is None:
        return
    from . import halfangle

    halfangle.patch_block(_fused.kind(act), halfangle.arch_of(kw, L), X1, X2, K0, q1, q2, K_out, T_out, Ks, Ts,
                          ids, pairs=None if watch is None else watch.pairs())


def _is_serial(model):
    from ..layers import as_serial

    return as_serial(model) is not None


def _pair(fn, act, a, K, b):
    """One P1×P2 block of E[φφ] / E[φ'φ'] by the same rule the joint Gram uses (closed form, else the
    Mehler series with certified tail and trapezoid fallback — ``limits.gaussian.gram``), so the cross
    block equals the joint kernel's block to rounding."""
    smooth = getattr(act, "kernel", None) is None and getattr(act, "strip", 0) > 0
    return fn(act, a, K, b, method="mehler", checked=True) if smooth else fn(act, a, K, b, checked=True)


def flag_explosions(diag, want_ntk):
    """Warn (and record in ``diag["warnings"]``) where the NNGP or NTK overflowed."""
    for k, name in (("nngp_exploded_at", "NNGP kernel"), ("ntk_exploded_at", "NTK")):
        at = diag[k]
        if at >= 0:
            msg = (f"{name} overflowed (beyond {_diag.LARGE:g}) at layer {at}; entries from there on are +inf"
                   + ("; the NNGP is unaffected" if k == "ntk_exploded_at" and diag["nngp_exploded_at"] < 0 else ""))
            diag["warnings"].append(msg)
            warnings.warn(msg, _diag.KernelWarning, stacklevel=3)


def _symmetric(m, X, get, layers, want_ntk):
    from .nngp import nngp as _nngp

    kw = kernel_arguments(m, "limits.kernels.kernel")
    if layers:
        _memory_guard((m.depth + 1) * (2 + want_ntk), X.shape[0], X.shape[0], "limits.kernels.kernel")
    r = _nngp(X, ntk=want_ntk, keep="all" if layers else "last", on_explode="ignore", **kw)
    d = r.diagnostics              # only its eager entries: the lazy spectra would cost two O(P³) factorisations
    diag = {"nngp_exploded_at": int(d.get("exploded_at", -1)),
            "ntk_exploded_at": int(d.get("ntk_exploded_at", -1)) if want_ntk else -1,
            "warnings": [], "source": "limits.kernels.nngp"}
    flag_explosions(diag, want_ntk)
    return KernelResult(r.K_out if "nngp" in get else None, r.Theta_out if want_ntk else None,
                        r.K if layers else None, r.Theta if layers and want_ntk else None,
                        model_record(m), diag, True, X, None)


def model_record(m):
    """What a result records about its model: the model dict, or the activation name for a user callable."""
    return m.to_dict() if isinstance(m.activation, str) else {"activation": m.activation_name}
