"""The ONE place where a width/depth parameterisation becomes concrete per-layer numbers.

``concretise(p, N, L, **hyper)`` → :class:`limits.finite.network.Network`.

``p`` is a parameterisation from :mod:`limits.params` (``p.convention`` ∈ {"variance", "std"},
``p.exponent(layer, symbol)`` with layer ∈ {"input", "hidden", "output"}, symbol ∈ {"a","b","c","d"})
or a plain dict ``{"convention": ..., "input": {"a":..,"b":..,"c":..}, "hidden": {...},
"output": {...}, "d": ..., "alpha": ...}`` (missing exponents are 0).

Variance convention (seed 000 §2–3, App. A.3):
    h_1 = N^{-a_1} W_1 x/√D,  h_l = N^{-a_l} W_l h_{l−1},  W ~ N(0, σ² N^{-b_l}),
    f = h_L/γ,  γ = γ0 N^d,   η_l = η0 γ² N^{-c_l}.
Std convention (Tensor Programs IV, seed 003):
    W^l = N^{-a_l} w^l,  w ~ N(0, σ² N^{-2b_l}),  η_l = η0 N^{-c_l},  f = h_L/γ with γ = γ0 N^d
    (d = 0 unless the parameterisation has one).
Both: the input layer also gets 1/√d_in (``input_scale``), learning rates act on the raw weights
(W resp. w), residual branches get ``L^{-α}`` (or ``branch=`` given explicitly, e.g. √(T/L)), and
depth-dependent learning rates ``η_l · L^{-lr_depth[layer]}`` may be added. By default, for
residual nets, hidden-layer rates get ``L^{p.depth_lr_exponent}`` (Tensor Programs VI: SGD ∝ L^{α−γ},
Adam ∝ L^{-γ}); read-in/read-out are not depth-scaled. Variance convention with
``p.optimizer == "adam"``: η_l = η0 N^{-c_l} (no γ², seed 000 §A.6).

Here L is the number of weight layers, not the Model's depth (hidden blocks, docs/workflow.rst):
hidden blocks = L − 2 unless ``blocks=`` is given.
"""
from __future__ import annotations

import math

from ..checks import positive_int
from .network import Block, Dense, Network

_LAYERS = ("input", "hidden", "output")


def _num(v, what, subs):
    """sympy/number → float, substituting ``subs`` for free symbols; ValueError if symbols remain."""
    if v is None:
        return 0.0
    if hasattr(v, "free_symbols"):
        if v.free_symbols:
            v = v.subs({s: subs[str(s)] for s in v.free_symbols if str(s) in subs})
            if getattr(v, "free_symbols", None):
                raise ValueError(f"{what}: exponent has free symbols {sorted(map(str, v.free_symbols))}; "
                                 f"pass numbers via subs={{name: value}}")
    try:
        out = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: cannot convert exponent {v!r} to a number") from None
    if not math.isfinite(out):
        raise ValueError(f"{what}: exponent is not finite ({out})")
    return out


class _DictParam:
    def __init__(self, d):
        self.convention = d.get("convention", "variance")
        self._d = d

    def exponent(self, layer, symbol):
        if symbol in ("d", "alpha") and symbol in self._d:
            return self._d[symbol]
        return self._d.get(layer, {}).get(symbol, 0)


def _exponent(p, layer, symbol, subs):
    try:
        v = p.exponent(layer, symbol)
    except (KeyError, ValueError, AttributeError, LookupError):
        v = None
    return _num(v, f"p.exponent({layer!r}, {symbol!r})", subs)


def _depth_exponent(p, subs):
    for attr in ("depth_alpha", "alpha", "depth_exponent"):
        v = getattr(p, attr, None)
        if v is not None and not callable(v):
            return _num(v, f"p.{attr}", subs)
    if isinstance(p, _DictParam) and "alpha" in p._d:
        return _num(p._d["alpha"], "alpha", subs)
    return None


def _depth_lr(p, subs):
    v = getattr(p, "depth_lr_exponent", None)
    if callable(v):
        v = v()
    if v is None and isinstance(p, _DictParam):
        v = p._d.get("depth_lr_exponent")
    return None if v is None else _num(v, "p.depth_lr_exponent", subs)


def concretise(p, N, L, *, d_in=None, d_out=1, activation="linear", eta0=1.0, gamma0=1.0, sigma=1.0,
               sigma_in=None, sigma_out=None, residual=False, alpha=None, branch=None, blocks=None,
               block_layers=1, bias=False, sigma_b=0.0, input_scale=True, lr_depth=None, subs=None,
               post_activation=False) -> Network:
    """Concrete network for parameterisation ``p`` at width N, depth L (weight layers).

    ``d_in`` defaults to N. ``sigma`` multiplies every init std (``sigma_in``/``sigma_out`` per end).
    ``alpha``: residual branch L^{-α} (default: ``p.depth_alpha``, else 1/2);
    ``branch`` overrides the branch multiplier outright. ``lr_depth``: dict layer → exponent e, the
    learning rate of that layer class is multiplied by L^{-e}. ``subs``: values for free symbols
    (e.g. ``{"gamma_bar_L": 0}``). The returned Network's ``meta`` records all exponents used.
    """
    N = positive_int(N, "N")
    L = positive_int(L, "L")
    subs = dict(subs or {})
    if isinstance(p, dict):
        p = _DictParam(p)
    conv = getattr(p, "convention", None)
    if conv not in ("variance", "std"):
        raise ValueError(f"p.convention must be 'variance' or 'std', got {conv!r}")
    d_in = N if d_in is None else positive_int(d_in, "d_in")
    d_out = positive_int(d_out, "d_out")
    nb = L - 2 if blocks is None else positive_int(blocks, "blocks", minimum=0)
    if nb < 0:
        raise ValueError(f"L must be >= 2 weight layers (read-in and read-out), got {L}; or pass blocks=")
    ex = {lay: {s: _exponent(p, lay, s, subs) for s in "abc"} for lay in _LAYERS}
    d = _exponent(p, "output", "d", subs)
    gamma = float(gamma0) * N**d
    if gamma == 0:
        raise ValueError("gamma0 must be nonzero")
    if alpha is None:
        alpha = _depth_exponent(p, subs)
        alpha = 0.5 if alpha is None else alpha
    alpha = float(alpha)
    br = float(branch) if branch is not None else (L ** (-alpha) if residual else 1.0)
    if lr_depth is None:
        e = _depth_lr(p, subs) if residual else None
        lr_depth = {} if e is None else {"hidden": -e}
    lr_depth = dict(lr_depth)
    optimizer = getattr(p, "optimizer", None) or (p._d.get("optimizer", "sgd") if isinstance(p, _DictParam)
                                                  else "sgd")
    sig = {"input": float(sigma if sigma_in is None else sigma_in), "hidden": float(sigma),
           "output": float(sigma if sigma_out is None else sigma_out)}
    fan = {"input": d_in, "hidden": N, "output": N}
    fout = {"input": N, "hidden": N, "output": d_out}

    def dense(lay):
        a, b, c = ex[lay]["a"], ex[lay]["b"], ex[lay]["c"]
        mult = N ** (-a)
        if lay == "input" and input_scale:
            mult /= math.sqrt(d_in)
        if conv == "variance":
            std = sig[lay] * N ** (-b / 2)
            # seed 000: SGD η = η0 γ² N^{-c}; Adam (§A.6) η = η0 N^{-c}
            lr = float(eta0) * (gamma**2 if optimizer != "adam" else 1.0) * N ** (-c)
        else:
            std = sig[lay] * N ** (-b)
            lr = float(eta0) * N ** (-c)
        lr *= L ** (-float(lr_depth.get(lay, 0.0)))
        return Dense(fan[lay], fout[lay], mult=mult, std=std, lr=lr, bias=bool(bias),
                     bias_std=float(sigma_b))

    hidden = tuple(Block(tuple(dense("hidden") for _ in range(block_layers)), residual=residual,
                         branch=br if residual else 1.0) for _ in range(nb))
    meta = {"convention": conv, "exponents": ex, "d": d, "gamma": gamma, "alpha": alpha, "branch": br,
            "N": N, "L": L, "eta0": float(eta0), "gamma0": float(gamma0), "lr_depth": lr_depth, "optimizer": optimizer}
    return Network(dense("input"), hidden, dense("output"), activation=activation, out_scale=1.0 / gamma,
                   post_activation=post_activation, meta=meta)
