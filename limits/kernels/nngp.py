"""NNGP and NTK recursions on P×P Gram matrices: feed-forward and residual (seed 004 Eq. 29–30).

Network (seed 004 Eq. 1; ``residual=False`` drops the skip connection)::

    h⁰ = W_in x + b_in,     W_in ~ N(0, σ²_w,in/d_in),  b_in ~ N(0, σ²_b,in)
    h^l = [h^{l-1}] + ρ (W^l φ(h^{l-1}) + b^l),  W^l ~ N(0, σ_w²/N),  b^l ~ N(0, σ_b²)
    y = W_out φ(h^L) + b_out,  W_out ~ N(0, σ²_w,out/N)

Kernels:  K⁰ = σ²_w,in XXᵀ/d_in + σ²_b,in;  C^l = ρ² σ_w² E_{N(0,K^{l-1})}[φφ] + ρ² σ_b²;
K^l = K^{l-1} + C^l (residual) or K^l = C^l (feed-forward);  K^{L+1} = σ²_w,out E_{N(0,K^L)}[φφ] + σ²_b,out.

NTK in the NTK parameterisation (every W = σ w/√fan_in with w ~ N(0,1) trainable, biases trainable):
Θ⁰ = K⁰;  Θ^l = [Θ^{l-1}] + C^l + ρ² σ_w² E[φ'φ'] ∘ Θ^{l-1};  Θ_out = K_out + σ²_w,out E[φ'φ'] ∘ Θ^L.
Cost O(L P²) (one Gram of E[φφ] and one of E[φ'φ'] per layer).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import positive_int
from ..progress import layer_range
from ..results import Result
from .. import parallel
from . import _fused
from . import diagnostics as _diag
from ._args import resolve
from .expectations import dgram, gram, moments
from ..registry import sweep_computation


@dataclass(frozen=True)
class NNGPResult(Result):
    """Layer kernels ``K[l]`` (l = 0..L, shape (L+1, P, P)), residual kernels ``C[l]`` (C[0] = K[0]),
    read-out kernel ``K_out`` (seed 004 K^{L+1}), NTK ``Theta[l]``/``Theta_out`` (None if ntk=False),
    the resolved parameters and diagnostics: ``exploded_at`` = first layer where the *NNGP* blew up
    (or −1), ``ntk_exploded_at`` = first layer where the *NTK* left float64 range (or −1; the NNGP is
    unaffected), ``status`` = {"nngp": "ok"|"exploded", "ntk": "ok"|"exploded"|"rescaled"|"off"},
    spectra (``min_eig_K_L``, ``cond_K_L``, ``min_eig_K_out``, ``cond_K_out``), warnings. For closed-form
    activations with P > 400 the spectra — two O(P³) factorisations, more than a shallow recursion — are
    computed, and warned about, on first access (:class:`limits.kernels.diagnostics.Diagnostics`).

    ``ntk_scale="log"``: ``Theta[l]`` holds Θ̃^l and ``Theta_log_scale[l]`` = s_l with Θ^l = exp(s_l)·Θ̃^l
    (likewise ``Theta_out``/``Theta_out_log_scale``); with the default ``"linear"`` the log scales are
    still stored (0 where no rescaling was needed) and ``Theta`` is the plain NTK (+inf after
    ``ntk_exploded_at``). :meth:`theta` returns either form.

    ``layers`` names the layer index l of each stored slice: None (the default, ``keep="all"``) means
    every layer 0..L; with ``keep="last"`` it is ``(0, L)`` and ``K``, ``C``, ``Theta`` have shape
    (2, P, P): ``K[0]`` = K⁰, ``K[1]`` = K^L (``K[-1]`` is the last layer either way)."""

    K: np.ndarray
    C: np.ndarray
    K_out: np.ndarray
    Theta: np.ndarray | None
    Theta_out: np.ndarray | None
    params: dict
    diagnostics: dict
    layers: tuple | None = None
    Theta_log_scale: np.ndarray | None = None
    Theta_out_log_scale: float | None = None

    def theta(self, layer: int | None = None, log: bool = False):
        """Θ at stored slice ``layer`` (default: the read-out Θ_out): the plain matrix, or with
        ``log=True`` the pair (Θ̃, s) with Θ = exp(s)·Θ̃ — representable however deep the chaotic NTK
        grows (needs ``ntk_scale="log"`` for values beyond float64; see :func:`nngp`)."""
        if self.Theta is None:
            raise ValueError("the NTK was not computed (ntk=False)")
        T = self.Theta_out if layer is None else self.Theta[layer]
        s = (self.Theta_out_log_scale if layer is None else
             (None if self.Theta_log_scale is None else float(self.Theta_log_scale[layer])))
        s = 0.0 if s is None else float(s)
        if log:
            return T, s
        if s == 0.0:
            return T
        with np.errstate(over="ignore"):
            return T * np.exp(s)

    @property
    def depth(self) -> int:
        return self.K.shape[0] - 1 if self.layers is None else int(self.layers[-1])

    def correlations(self, layer: int | None = None):
        """c^l_αβ = K_αβ / √(K_αα K_ββ) at layer l = ``layer`` (default: the last; with
        ``keep="last"`` only l ∈ ``layers`` is available)."""
        if layer is None:
            K = self.K[-1]
        elif self.layers is None:
            K = self.K[layer]
        else:
            idx = {int(v): i for i, v in enumerate(self.layers)}
            lay = layer + self.depth + 1 if layer < 0 else layer
            if lay not in idx:
                raise ValueError(f"layer {layer} was not stored (keep='last' keeps layers {tuple(self.layers)})")
            K = self.K[idx[lay]]
        d = np.sqrt(np.diag(K))
        return K / np.outer(d, d)


@sweep_computation
def nngp(X=None, depth=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False, rho=1.0,
         sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, *, K0=None,
         depth_scaling="none", d_in=None, ntk=True, on_explode="warn", keep="auto", ntk_scale="linear",
         max_memory=None, checkpoint_every=None, n_jobs=None) -> NNGPResult:
    """NNGP (and NTK) kernels of a feed-forward or residual network, seed 004 Eq. 29–30.

    ``X`` is P×d_in (rows are samples) or pass ``K0`` (P×P read-in kernel) instead. Read-in/read-out
    variances default to the hidden ones (``sigma_w2``, ``sigma_b2``). ``depth_scaling`` ∈
    {"none", "sqrt", "linear"} uses ρ_eff = rho, rho/√L, rho/L. ``on_explode`` ∈ {"warn", "raise",
    "ignore"} controls how a blow-up is reported (always recorded in ``diagnostics``).

    ``keep`` ∈ {"auto", "all", "checkpoint", "last"}: "all" returns every layer, K/C/Theta of shape
    (L+1, P, P) arrays and ``layers=None``; "checkpoint" returns the same indexable (L+1, P, P) stacks
    (``r.K[l]``, ``r.K[:, a, b]``, ``np.asarray(r.K)``) but keeps only every ``checkpoint_every``-th layer
    (default ⌈√L⌉) and recomputes the others on demand, bit-identically (:mod:`limits.kernels._layers`;
    memory ≈ 6√L P² instead of 3(L+1)P²); "last" stores only K⁰ and the last layer — K/C/Theta of shape
    (2, P, P) with ``layers=(0, L)`` (``(0,)`` at depth 0) — so memory is O(P²); the kept layers are
    bit-identical. "auto" (the default): for the closed-form activations (erf, relu, gelu, linear) every layer
    is kept as the packed upper triangle the recursion computed it in (no P×P copy per layer; C shares K's
    storage for a feed-forward net) and ``r.K``/``r.C``/``r.Theta`` are read-only (L+1, P, P) array-likes that
    unpack a layer when it is read, bit-identical to "all"; otherwise "all" while every layer fits in
    ``AUTO_ALL_BYTES`` (512 MiB) and "checkpoint" beyond (it refuses, like "all", what would not fit in
    ``max_memory`` with every layer stored). ``depth=0`` is the two-layer net: the read-out acts on K⁰.

    The NTK is propagated with a running log-normaliser, Θ^l = exp(s_l)·Θ̃^l (Θ̃ rescaled to max diag 1
    whenever it exceeds 1e50), so an NTK growing like χ₁^L in the chaotic phase never overflows and never
    stops the NNGP. ``ntk_scale`` ∈ {"linear", "log"}: "linear" (default) returns the plain Θ and reports
    ``diagnostics["ntk_exploded_at"]`` where it exceeds 1e100 (later layers +inf, the NNGP goes on);
    "log" returns Θ̃ and the log scales (``Theta_log_scale``, ``Theta_out_log_scale``).

    Memory is estimated before anything is allocated; more than ``max_memory`` bytes (default: half the
    available physical memory) raises ``ValueError`` suggesting ``keep="last"`` or smaller sizes.

    ``n_jobs``: threads over the row blocks of each layer (:mod:`limits.parallel`; None: ``$LIMITS_NUM_THREADS``,
    else every core); the numbers are the same for any value.
    """
    from .. import parallel

    with parallel.using(n_jobs):
        return _nngp(X, depth, activation, sigma_w2, sigma_b2, residual, rho, sigma_w2_in, sigma_b2_in, sigma_w2_out,
                     sigma_b2_out, K0, depth_scaling, d_in, ntk, on_explode, keep, ntk_scale, max_memory,
                     checkpoint_every)


def _nngp(X, depth, activation, sigma_w2, sigma_b2, residual, rho, sigma_w2_in, sigma_b2_in, sigma_w2_out,
          sigma_b2_out, K0, depth_scaling, d_in, ntk, on_explode, keep, ntk_scale, max_memory, checkpoint_every):
    """:func:`nngp`'s body, in its thread context."""
    if keep not in ("auto", "checkpoint"):
        keep = check_keep(keep)
    if ntk_scale not in ("linear", "log"):
        raise ValueError(f"ntk_scale must be 'linear' or 'log', got {ntk_scale!r}")
    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=rho, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                        depth_scaling=depth_scaling, d_in=d_in, min_depth=0)
    _diag.check_on_explode(on_explode)
    L, P, per = arch.depth, K0m.shape[0], 2 + bool(ntk)
    packed_n = 0.0
    if keep == "auto" and L > 0 and P > 1:           # closed forms: every layer as its packed triangles, lazily
        fk = _fused.kind(arch.activation) if FUSED else None     # unpacked (no P×P copy per layer)
        if fk is not None and _fused.usable(fk, np.diag(K0m)):
            packed_n = (1 + bool(arch.residual) + bool(ntk)) * L * _fused.packed(P).n / float(P * P)
            if 8.0 * packed_n * P * P <= AUTO_ALL_BYTES:
                keep = "packed"
    if keep == "auto":            # never runs what keep="all" would refuse: same error (and hint) then
        if 8.0 * per * (L + 1) * P * P <= AUTO_ALL_BYTES:
            keep = "all"
        else:
            check_memory(per * (L + 1) + 2 + 2 * bool(ntk), P, max_memory, what="nngp", keep="all")
            keep = "checkpoint"
    every = None
    if keep == "checkpoint":
        from ._layers import default_every

        every = default_every(L) if checkpoint_every is None else positive_int(checkpoint_every,
                                                                               "checkpoint_every")
        n = 3 + (L // every + 2) + min(every, L) + 1           # slots, checkpoints, one cached stretch
    elif keep == "packed":
        n = 3 + packed_n / per
    else:
        n, _ = layer_slots(L, keep)
    check_memory(per * n + 2 + 2 * bool(ntk), P, max_memory, what="nngp",
                 keep="last" if keep in ("checkpoint", "packed") else keep)
    rows = None
    if X is not None:
        rows = np.asarray(X, dtype=np.float64)
        rows = rows[None, :] if rows.ndim == 1 else rows
    return run_recursion(K0m, arch, ntk=ntk, on_explode=on_explode, keep=keep, ntk_scale=ntk_scale, every=every,
                         rows=rows)


AUTO_ALL_BYTES = 512 * 2**20    # keep="auto": every layer as arrays up to this size, checkpointed beyond


from ..memory import available_memory  # noqa: E402,F401  (lives in the foundation; re-exported here as before)


def check_memory(n_matrices, P, max_memory=None, what="nngp", keep="all"):
    """Refuse (``ValueError``) before allocating ``n_matrices`` P×P float64 arrays when they need more than
    ``max_memory`` bytes (default: half of :func:`available_memory`; no check if unknown)."""
    need = 8.0 * float(n_matrices) * float(P) * float(P)
    if max_memory is None:
        avail = available_memory()
        if avail is None:
            return need
        limit, src = 0.5 * avail, f"half the available memory ({avail / 2**30:.3g} GiB)"
    else:
        from ..checks import positive_float

        limit, src = positive_float(max_memory, "max_memory"), f"max_memory={max_memory:.6g} bytes"
    if need > limit:
        hint = {"all": 'pass keep="last" (O(P²) memory) or use fewer layers/inputs',
                "last": "use fewer inputs P"}.get(keep, "use fewer layers or inputs")
        raise ValueError(f"{what}: this needs about {need / 2**30:.3g} GiB ({int(n_matrices)} P×P float64 "
                         f"arrays, P={P}), more than {src}; {hint}, or raise max_memory")
    return need


def check_keep(keep) -> str:
    if not isinstance(keep, str) or keep not in ("all", "last"):
        raise ValueError(f"keep must be 'all' or 'last', got {keep!r}")
    return keep


def layer_slots(L: int, keep: str):
    """(number of P×P slots, slot of layer l). keep="last": layer 0 in slot 0, layers l ≥ 1 alternate
    between slots 1 and 2 so that layer L lands in slot 1 (the stored result is ``array[:2]``)."""
    if keep == "all":
        return L + 1, (lambda l: l)
    return min(L + 1, 3), (lambda l: 0 if l == 0 else 1 + (L - l) % 2)


FUSED = True             # closed-form activations take the upper-triangle strip kernels (limits.kernels._fused)
_RESCALE = 1e50          # Θ̃ is renormalised to max diag 1 when its diagonal exceeds this


def run_recursion(K0m, arch, ntk=True, on_explode="warn", keep="all", ntk_scale="linear", *, C0=None, T0=None, s0=0.0,
         segment=False, every=None, rows=None, edge=None):
    """The recursion. ``keep="checkpoint"``: slots as "last", plus (K, C, Θ̃) every ``every`` layers for the
    lazily recomputed :class:`~limits.kernels._layers.LayerStack`. ``segment=True`` (used by that store):
    start from layer state (K0m, C0, T0 = Θ̃, s0) and return the raw (K, C, Θ̃, log scales) of every layer,
    no read-out, no diagnostics. ``rows``: the inputs X (K⁰'s rows), from which the delicate pairs'
    half-angles are computed (:mod:`limits.kernels.halfangle`; without them, from K⁰'s entries); ``edge``: the
    delicate pairs' state at the segment's first layer (checkpoints)."""
    act, L, P = arch.activation, arch.depth, K0m.shape[0]
    r2 = arch.rho ** 2
    ckpt = keep == "checkpoint"
    lazy = keep == "packed"                           # every layer kept as the packed triangles it was computed in
    last = keep in ("last", "checkpoint", "packed")
    n, ix = layer_slots(L, "last" if (ckpt or lazy) else keep)
    checkpoints = {}
    store = [None] * (L + 1) if lazy else None        # layer l: (packed?, K, C, Θ̃)
    all_logs = np.zeros(L + 1) if ntk else None
    if ntk:
        all_logs[0] = s0
    Ks = np.empty((n, P, P))
    Cs = np.empty((n, P, P))
    Th = np.empty((n, P, P)) if ntk else None
    logs = np.zeros(n) if ntk else None               # Θ^l = exp(logs[slot]) · Th[slot]
    if last:                                          # max |K⁰| (no temporary)
        hi0, lo0 = parallel.extremes(K0m)
        max_abs = max(hi0, -lo0)
    else:
        max_abs = None
    if lazy:                                          # layer 0 is K⁰ itself (handed out read-only); the packed
        store[0] = (False, K0m, K0m if C0 is None else C0, (K0m if T0 is None else T0) if ntk else None)
    else:                                             # path never reads slot 0 in this mode
        parallel.copyto(Ks[0], K0m)
        parallel.copyto(Cs[0], K0m if C0 is None else C0)
    if ntk:
        if not lazy:
            parallel.copyto(Th[0], K0m if T0 is None else T0)
        logs[0] = s0
    exploded = -1
    ntk_exploded = -1
    log_large = float(np.log(_diag.LARGE))
    # closed-form activations: packed upper triangles (limits.kernels._fused), layers unpacked only when kept
    fk = _fused.kind(act) if FUSED else None
    pk = sc = Kv = Tv = None
    if fk is not None and P > 1 and _fused.usable(fk, np.diag(K0m)):
        pk = _fused.packed(P)
        sc = _fused.Scratch(pk)
        Kv = pk.pack(K0m)
        Tv = (Kv.copy() if T0 is None else pk.pack(T0)) if ntk else None
        spare = [np.empty(pk.n) for _ in range(2 + 2 * bool(ntk))]   # double buffers for K̃, Θ̃; C
        Cv = np.empty(pk.n)
    Gb = Wb = None                                    # scratch of the general path, allocated on first use
    c_w, c_b = r2 * arch.sigma_w2, r2 * arch.sigma_b2
    edge = _edge_patch(act, arch, K0m, rows, ntk, edge)  # nearly collinear inputs, large norms (halfangle)
    edge_states = {0: edge.snapshot()} if (ckpt and edge is not None) else {}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for l in layer_range(L, "NNGP/NTK layers"):
            i, ip = ix(l), ix(l - 1)
            s = logs[ip] if ntk else 0.0
            if Kv is not None and not _fused.usable(fk, pk.diag(Kv)):
                pk.unpack(Kv, Ks[ip])                  # leave the packed path: layer l−1 in full
                if ntk:
                    pk.unpack(Tv, Th[ip])
                Kv = Tv = None
            if Kv is not None:
                if lazy:                               # fresh buffers: they are the kept layer (no copy)
                    Kn = np.empty(pk.n)
                    Tn = np.empty(pk.n) if ntk else None
                    Cv = np.empty(pk.n) if arch.residual else Kn     # feed-forward: C^l is K^l
                else:
                    Kn = spare.pop()
                    Tn = spare.pop() if ntk else None
                tsum = _fused.layer(fk, pk, Kv, Tv, Kn, Cv, Tn, c_w, c_b, arch.residual, sc,
                                    t_scale=None if s == 0.0 else np.exp(-s))
                if edge is not None:
                    edge.layer(Kn, Cv, pk)
                    if ntk:
                        edge.ntk_layer(Tn, Tv, None if s == 0.0 else np.exp(-s), pk, pk)
                if not lazy:
                    spare.append(Kv)
                    if ntk:
                        spare.append(Tv)
                Kv = Kn
                if ntk:
                    Tv = T = Tn
                    t_finite = bool(np.isfinite(tsum)) or bool(np.isfinite(Tv).all())
                dK = pk.diag(Kv)
                if not (dK.size == 0 or (np.isfinite(dK.max()) and np.isfinite(dK.min())
                                         and max(abs(dK.max()), abs(dK.min())) <= _diag.LARGE)):
                    exploded = l                       # (as diagnostics.layer_ok(psd=True))
                    break
                hi, lo = float(dK.max()), float(dK.min())   # K^l is PSD: its extremes sit on the diagonal
            else:
                Kp = Ks[ip]
                if Gb is None:
                    Gb = np.empty((P, P)) if ntk else None  # no per-layer temporaries: each would be
                    Wb = np.empty((P, P))                   # freshly faulted in
                E, G = moments(act, Kp, derivative=ntk, out=Cs[i], gout=Gb, work=Wb)
                C = Cs[i]                                  # C = ρ²(σ_w² E + σ_b²), in place
                C *= c_w
                C += c_b
                if arch.residual:
                    np.add(Kp, C, out=Ks[i])
                else:
                    Ks[i] = C
                if edge is not None:
                    edge.layer(Ks[i], C)
                if not _diag.layer_ok(Ks[i], psd=True):
                    exploded = l
                    break
                if ntk:
                    T = Th[i]                              # Θ̃^l = [Θ̃^{l-1}] + e^{−s} C + ρ²σ_w² G ∘ Θ̃^{l-1}
                    np.multiply(G, Th[ip], out=T)
                    T *= c_w
                    if s == 0.0:
                        T += C
                    else:
                        T += C * np.exp(-s)
                    if arch.residual:
                        T += Th[ip]
                    if edge is not None:
                        edge.ntk_layer(T, Th[ip], None if s == 0.0 else np.exp(-s))
                    t_finite = bool(np.all(np.isfinite(T)))
                if last:
                    hi, lo = float(Ks[i].max()), float(Ks[i].min())
            if ntk:
                logs[i] = s
                d = pk.diag(T) if Kv is not None else np.diag(T)
                top = float(np.max(np.abs(d))) if d.size else 0.0
                if not (np.isfinite(top) and t_finite) and ntk_exploded < 0:
                    ntk_exploded = l                   # non-finite NTK (not an overflow: NaN input etc.)
                elif top > _RESCALE:
                    T /= top
                    logs[i] = s + np.log(top)
                    d = pk.diag(T) if Kv is not None else np.diag(T)
                if ntk_exploded < 0 and logs[i] + np.log(max(float(np.max(np.abs(d))), 1e-300)) > log_large:
                    ntk_exploded = l
            if edge is not None:                       # pairs that became delicate at this layer
                edge.extend(Kv if Kv is not None else Ks[i], pk if Kv is not None else None)
            if last:                                   # running max |K^l| (no P² temporary)
                max_abs = max(max_abs, hi, -lo)
            if Kv is not None and not lazy and (not last or l == L):  # hand out the kept layers in full
                pk.unpack(Kv, Ks[i])                   # (the packed store hands out its own)
                pk.unpack(Cv, Cs[i])
                if ntk:
                    pk.unpack(Tv, Th[i])
            if ntk:
                all_logs[l] = logs[i]
            if lazy:
                store[l] = ((True, Kv, Cv, Tv) if Kv is not None else
                            (False, Ks[i].copy(), Cs[i].copy(), Th[i].copy() if ntk else None))
            if ckpt and (l % every == 0 or l == L):      # checkpoint: full K, C and Θ̃ of layer l
                if Kv is not None and l < L:
                    checkpoints[l] = (pk.unpack(Kv), pk.unpack(Cv), pk.unpack(Tv) if ntk else None)
                else:
                    checkpoints[l] = (Ks[i].copy(), Cs[i].copy(), Th[i].copy() if ntk else None)
                if edge is not None:
                    edge_states[l] = edge.snapshot()
        if segment:
            return Ks, Cs, Th, all_logs, exploded
        K_out, T_out, log_out, ntk_exploded = _read_out(act, arch, Ks, Cs, Th, logs, ix, L, exploded, ntk_exploded,
                                                        last, ntk, (fk, pk, sc, Kv, Tv), log_large, edge)
    rescaled = ntk and ntk_scale == "log" and (np.any((all_logs if lazy else logs) != 0.0) or (log_out or 0.0) != 0.0)
    if ntk and ntk_scale == "linear":                 # plain Θ: exp(s)·Θ̃, +inf from the overflow on
        T_out, log_out = _undo_log_scale(Th, logs, T_out, log_out, ntk_exploded, last, L)
    diag = _diagnostics(Ks, ix, L, K_out, exploded, ntk_exploded, ntk, ntk_scale, rescaled, last, max_abs)
    return _package(Ks, Cs, K_out, Th, T_out, arch, diag, on_explode, ntk, ntk_scale, logs, all_logs, log_out,
                    exploded, L, ix, last, (lazy, store, pk, Kv), (ckpt, checkpoints, every, edge_states))


def _edge_patch(act, arch, K0m, rows, ntk, state):
    """The delicate pairs' recursion (:class:`limits.kernels.halfangle.SymmetricPatch`) for the closed-form
    activations, or None (linear: exact as it is; other activations). ``state``: resume a checkpoint."""
    from . import halfangle

    kind = _fused.kind(act)
    if kind not in ("relu", "erf", "gelu") or K0m.shape[0] < 1:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return halfangle.SymmetricPatch(kind, arch, K0m, rows, ntk, state)


def _read_out(act, arch, Ks, Cs, Th, logs, ix, L, exploded, ntk_exploded, last, ntk, packed, log_large, edge=None):
    """(K_out, Θ̃_out, its log scale, NTK explosion layer): the read-out after the layer loop (inf from an
    exploded layer on; on the packed triangle when the fused path was still in use)."""
    fk, pk, sc, Kv, Tv = packed
    P = Ks.shape[-1]
    if exploded >= 0:
        first = 1 if last else exploded            # keep="last": only layer L (slot 1) is after it
        Ks[first:] = np.inf
        Cs[first:] = np.inf
        if ntk:
            Th[first:] = np.inf
            logs[first:] = 0.0
        return np.full((P, P), np.inf), (np.full((P, P), np.inf) if ntk else None), (0.0 if ntk else None), ntk_exploded
    KL = Ks[ix(L)]
    T_out, log_out = None, None
    sL = float(logs[ix(L)]) if ntk else 0.0
    if Kv is not None:                         # read-out on the packed triangle, unpacked once
        Ev, Gv = _fused.moments_packed(fk, pk, Kv, sc, derivative=ntk, e_scale=arch.sigma_w2_out,
                                       g_scale=arch.sigma_w2_out)
        Ev += arch.sigma_b2_out
        K_out = pk.unpack(Ev)
        if ntk:
            Gv *= Tv
            Gv += Ev if sL == 0.0 else Ev * np.exp(-sL)
            T_out = pk.unpack(Gv)
        if edge is not None:
            edge.readout(K_out, T_out, Tv, None if sL == 0.0 else np.exp(-sL), pk)
    else:
        E, G = moments(act, KL, derivative=ntk)
        K_out = arch.sigma_w2_out * E + arch.sigma_b2_out
        if ntk:
            T_out = (K_out if sL == 0.0 else K_out * np.exp(-sL)) + arch.sigma_w2_out * G * Th[ix(L)]
        if edge is not None:
            edge.readout(K_out, T_out, Th[ix(L)] if ntk else None, None if sL == 0.0 else np.exp(-sL))
    if ntk:
        log_out = sL
        top = float(np.max(np.abs(np.diag(T_out)))) if P else 0.0
        if np.isfinite(top) and top > _RESCALE:
            T_out = T_out / top
            log_out = sL + float(np.log(top))
        if ntk_exploded < 0 and log_out + np.log(max(top, 1e-300)) > log_large:
            ntk_exploded = L + 1
    return K_out, T_out, log_out, ntk_exploded


def _undo_log_scale(Th, logs, T_out, log_out, ntk_exploded, last, L):
    """ntk_scale="linear": Θ = exp(s)·Θ̃ in place (``logs`` set to 0), +inf from the NTK's overflow layer on;
    returns (Θ_out, 0)."""
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(Th.shape[0]):
            if logs[j] != 0.0:
                Th[j] *= np.exp(logs[j])
        if ntk_exploded >= 0:
            lay = (lambda j: j) if not last else (lambda j: (0, L)[j] if j < 2 else L)
            for j in range(Th.shape[0]):
                if lay(j) >= ntk_exploded:
                    Th[j] = np.inf
        if log_out:
            T_out = T_out * np.exp(log_out)
        if ntk_exploded >= 0:
            T_out = np.full(T_out.shape, np.inf)
    logs[:] = 0.0
    return T_out, 0.0


def _diagnostics(Ks, ix, L, K_out, exploded, ntk_exploded, ntk, ntk_scale, rescaled, last, max_abs):
    """The diagnostics dict of a run (before :func:`diagnostics.finish`)."""
    status = {"nngp": "exploded" if exploded >= 0 else "ok",
              "ntk": ("off" if not ntk else "exploded" if ntk_exploded >= 0 and ntk_scale == "linear"
                      else "rescaled" if rescaled else "ok")}
    if last:
        diag = {"exploded_at": exploded, "max_abs_K": max_abs, "warnings": []}
    else:
        diag = {"exploded_at": exploded,
                "max_abs_K": float(np.max(np.abs(Ks[: exploded if exploded > 0 else L + 1]))), "warnings": []}
    diag["ntk_exploded_at"] = ntk_exploded if (ntk and ntk_scale == "linear") else -1
    diag["ntk_overflow_at"] = ntk_exploded if ntk else -1
    diag["status"] = status
    diag["ntk_scale"] = ntk_scale
    if ntk and ntk_scale == "linear" and ntk_exploded >= 0:
        diag["warnings"].append(
            f"NTK exploded at layer {ntk_exploded} (|Θ| > {_diag.LARGE:g}: it grows like χ₁^L); the NNGP "
            "is unaffected and finite; pass ntk_scale='log' for Θ = exp(s)·Θ̃ in representable form")
    return diag


def _package(Ks, Cs, K_out, Th, T_out, arch, diag, on_explode, ntk, ntk_scale, logs, all_logs, log_out, exploded, L,
             ix, last, lazy_parts, ckpt_parts):
    """The :class:`NNGPResult` of a run: every layer as arrays, the last layer only, lazily recomputed from
    checkpoints, or the packed layers (``keep`` modes)."""
    lazy, store, pk, Kv = lazy_parts
    ckpt, checkpoints, every, edge_states = ckpt_parts
    log_scale = lambda v: (v if ntk_scale == "log" else np.zeros(L + 1)) if ntk else None    # noqa: E731
    if lazy:
        from ._layers import LayerStack, PackedLayers

        st = PackedLayers(pk, store, all_logs, exploded, diag["ntk_exploded_at"] if ntk_scale == "linear" else -1,
                          ntk_scale)
        if Kv is not None and exploded < 0:          # K^L unpacked only if its spectrum is asked for
            diag = _diag.finish(diag, lambda: st.layer("K", L), K_out, on_explode, what="NNGP kernel", lazy=True,
                                last_finite=bool(np.isfinite(Kv).all()))
        else:
            diag = _diag.finish(diag, Ks[ix(L)], K_out, on_explode, what="NNGP kernel", lazy=Kv is not None)
        return NNGPResult(LayerStack(st, "K"), LayerStack(st, "C"), K_out, LayerStack(st, "Theta") if ntk else None,
                          T_out, arch.as_dict(), diag, Theta_log_scale=log_scale(all_logs),
                          Theta_out_log_scale=log_out)
    diag = _diag.finish(diag, Ks[ix(L)], K_out, on_explode, what="NNGP kernel", lazy=Kv is not None)
    if ckpt:
        from ._layers import Checkpoints, LayerStack

        checkpoints[0] = (Ks[0].copy(), Cs[0].copy(), Th[0].copy() if ntk else None)
        store = Checkpoints(arch, ntk, every, checkpoints, all_logs, exploded,
                            diag["ntk_exploded_at"] if ntk_scale == "linear" else -1, ntk_scale, run_recursion,
                            edge_states)
        return NNGPResult(LayerStack(store, "K"), LayerStack(store, "C"), K_out,
                          LayerStack(store, "Theta") if ntk else None, T_out, arch.as_dict(), diag,
                          Theta_log_scale=log_scale(all_logs), Theta_out_log_scale=log_out)
    if last:
        return NNGPResult(Ks[:2], Cs[:2], K_out, Th[:2] if ntk else None, T_out, arch.as_dict(), diag,
                          layers=(0, L) if L else (0,), Theta_log_scale=logs[:2] if ntk else None,
                          Theta_out_log_scale=log_out)
    return NNGPResult(Ks, Cs, K_out, Th, T_out, arch.as_dict(), diag, Theta_log_scale=logs if ntk else None,
                      Theta_out_log_scale=log_out)
