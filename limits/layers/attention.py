"""Attention: global multi-head self-attention, the infinite-width limit of Hron et al. (2020) in the
convention of neural-tangents' ``GlobalSelfAttention(linear_scaling=True)`` (softmax; optional positional
embeddings added to the input, neural-tangents' ``pos_emb_type="SUM"``). docs/theory/layers.rst §3 sets this
limit next to the usual finite transformer (untied query/key, 1/√n logits) and says what changes with those.

Finite (positions i, j over all spatial positions; per head h, key and query weights *tied*, W ~ N(0, 1))::

    x̃_i = x_i + σ_e E_i           (``pos_emb="SUM"``: E ~ N(0, 1) of shape (positions, C), trained; else x̃ = x)
    k_h,i = x̃_i W^K_h,   logits_h,ij = s · ⟨k_h,i, k_h,j⟩ / (C · n_key)      ← 1/(C·n_key), not 1/√n_key
    A_h = softmax_j(logits_h),   v_h = x_v W^V_h (x_v = x̃ with ``pos_emb_values``, else x),
    y = σ_w/√(n_val · H · C) · concat_h(A_h v_h) W^O + σ_b b

with s = ``qk_scale`` (neural-tangents' W_query_std·W_key_std), σ_w² = ``sigma_w2`` ((W_out_std·W_value_std)²)
and σ_e² = ``sigma_pe2`` (W_pos_emb_std²). At infinite width the logits converge to s·(K(x, x)[i, j] + σ_e² δ_ij),
so A(x) = softmax_j(s (Σ_x + σ_e² I)) is deterministic and, with K_v = K + σ_e² δ_ij, Θ_v = Θ + σ_e² δ_ij when the
values see the embedding (else K_v = K, Θ_v = Θ)::

    K'(x, y) = σ_w² A(x) K_v(x, y) A(y)ᵀ + σ_b²,      Θ' = σ_w² A(x) (Θ_v + 2 K_v) A(y)ᵀ + σ_b²

(value and output weights each contribute σ_w² A K_v Aᵀ; the trained embedding σ_e² A δ Aᵀ through the values; the
key weights' and the keys' embedding share vanish like 1/N). The embedding's Gram ⟨E_i, E_j⟩/C tends to δ_ij only
for infinitely many channels: the rule refuses an embedding on the raw input (put a Dense or Conv first).

Not the usual finite transformer: that one has *untied* W^Q, W^K and logits ⟨q_i, k_j⟩/√n_key. Untied weights with
the 1/(C·n_key) scaling above give logits → 0, i.e. uniform attention = this layer with ``qk_scale=0`` (global
average pooling of the values); with 1/√n_key the logits stay Gaussian and random, the output is Gaussian only
given them, and the limit (a GP only as the number of heads grows too) has no closed form — not implemented.
Needs every pair of positions; cost O(P1·P2·S³), memory P1·P2·S² per block.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import positive_int, real_number
from .base import Layer, bias_theta, gram_theta, register
from .state import full_from_positions, positions_from_full

POS_EMB = ("NONE", "SUM")


def softmax(z):
    """softmax over the last axis (the attention weights of logits z), shifted by the row maximum."""
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _heads(xs, W):
    """x W_h for every head: (S, P, T, C), (S, H, C, n) → (S, P, H, T, n) by one batched matmul per init."""
    S, P, T, C = xs.shape
    H, n = W.shape[1], W.shape[-1]
    out = np.matmul(xs.reshape(S, P * T, C), W.transpose(0, 2, 1, 3).reshape(S, C, H * n))
    return out.reshape(S, P, T, H, n).transpose(0, 1, 3, 2, 4)


def _heads_back(d, W):
    """Σ_h d_h W_hᵀ: (S, P, H, T, n), (S, H, C, n) → (S, P, T, C)."""
    S, P, H, T, n = d.shape
    Wt = W.transpose(0, 1, 3, 2).reshape(S, H * n, W.shape[2])
    return np.matmul(d.transpose(0, 1, 3, 2, 4).reshape(S, P * T, H * n), Wt).reshape(S, P, T, -1)


@register
@dataclass(frozen=True)
class Attention(Layer):
    """Multi-head self-attention (module docstring): ``n_heads`` heads, logits s·⟨k_i, k_j⟩/(C n_key); ``pos_emb``
    "NONE" or "SUM" (a trained positional embedding of variance ``sigma_pe2`` added to the keys' input, and to the
    values' input when ``pos_emb_values``)."""

    n_heads: int = 1
    qk_scale: float = 1.0
    sigma_w2: float = 1.0
    sigma_b2: float = 0.0
    pos_emb: str = "NONE"
    sigma_pe2: float = 1.0
    pos_emb_values: bool = False
    parametric = True
    fresh_output = True

    def __post_init__(self):
        object.__setattr__(self, "n_heads", positive_int(self.n_heads, "Attention.n_heads"))
        object.__setattr__(self, "qk_scale", real_number(self.qk_scale, "Attention.qk_scale", allow_negative=True))
        object.__setattr__(self, "sigma_w2", real_number(self.sigma_w2, "Attention.sigma_w2"))
        object.__setattr__(self, "sigma_b2", real_number(self.sigma_b2, "Attention.sigma_b2"))
        pe = str(self.pos_emb).upper()
        if pe not in POS_EMB:
            raise ValueError(f"Attention.pos_emb must be one of {POS_EMB}, got {self.pos_emb!r}")
        object.__setattr__(self, "pos_emb", pe)
        object.__setattr__(self, "sigma_pe2", real_number(self.sigma_pe2, "Attention.sigma_pe2"))
        if not isinstance(self.pos_emb_values, (bool, np.bool_)):
            raise ValueError(f"Attention.pos_emb_values must be True or False, got {self.pos_emb_values!r}")
        object.__setattr__(self, "pos_emb_values", bool(self.pos_emb_values))

    @property
    def embedded(self) -> bool:
        return self.pos_emb == "SUM"

    def to_dict(self):
        d = super().to_dict()
        if not self.embedded:                    # files written before positional embeddings existed read the same
            for key in ("pos_emb", "sigma_pe2", "pos_emb_values"):
                d.pop(key)
        return d

    def needs_full(self, after):
        return True

    def kernel_work(self, spatial, full):
        """A_l K A_rᵀ per pair of inputs: 2·S multiply-adds per block entry (S positions), by matrix products
        (BLAS, one thread: ≥ 6× cheaper per multiply-add than a numpy pass per entry, measured 0.06 ns against
        0.37 ns), counted as 2·S/8 updates (:data:`limits.kernels.composed.UPDATES_PER_SECOND`)."""
        return max(1.0, 2.0 * float(np.prod(spatial)) / 8.0) if spatial else 1.0

    # ------------------------------------------------------------------ kernel
    def kernel(self, k, need_full_after=True, where=""):
        if not k.spatial:
            raise ValueError(f"{where}: Attention needs inputs with positions (P, *spatial, C); this input is (P, C)")
        if self.embedded and not k.wide:
            from ..errors import ModelError

            raise ModelError(f"{where}: a positional embedding needs an input with infinitely many channels (its Gram "
                             "⟨E_i, E_j⟩/C → δ_ij only as C → ∞); this Attention reads the raw input's channels — "
                             "put a Dense or Conv layer before it")
        sp, w, b = k.spatial, self.sigma_w2, self.sigma_b2
        e = self.sigma_pe2 if self.embedded else 0.0
        ev = e if self.pos_emb_values else 0.0
        packed = k.pairs is not None                 # packed pairs: the weights of each pair's two inputs
        if packed:
            A1, A2 = k.per_input(lambda cov: self._weights(cov, sp, e), "attention weights")
        else:
            A1 = self._weights(k.cov1, sp, e)
            A2 = A1 if k.cov2 is None else self._weights(k.cov2, sp, e)

        def weigh(K, Al, Ar, aligned=False, add=0.0):
            G = positions_from_full(K, sp)
            if add:
                G = G + add * np.eye(G.shape[-1])
            if aligned:                              # block x of K between the inputs of Al[x] and Ar[x]
                out = np.matmul(np.matmul(Al, G[:, 0]), np.swapaxes(Ar, 1, 2))[:, None]
            else:
                out = np.einsum("xia,xyab,yjb->xyij", Al, G, Ar, optimize=True)
            return full_from_positions(out, sp)

        nngp = w * weigh(k.nngp, A1, A2, packed, add=ev) + b
        ntk = None if k.ntk is None else w * weigh(k.ntk + 2.0 * k.nngp, A1, A2, packed, add=3.0 * ev) + b
        if packed:
            return k.replace(nngp=nngp, ntk=ntk, cov1=None, is_gaussian=True, wide=True)
        cov1 = w * weigh(k.cov1, A1, A1, True, ev) + b
        cov2 = None if k.cov2 is None else w * weigh(k.cov2, A2, A2, True, ev) + b
        return k.replace(nngp=nngp, ntk=ntk, cov1=cov1, cov2=cov2, is_gaussian=True, wide=True)

    def _weights(self, cov, sp, e):
        """A = softmax_j(s (Σ + σ_e² I)) per input, (P, S, S), from its self block ``cov`` (P, 1, *R)."""
        G = positions_from_full(cov, sp)[:, 0]
        if e:
            G = G + e * np.eye(G.shape[-1])
        return softmax(self.qk_scale * G)

    # ------------------------------------------------------------------ finite
    def out_shape(self, in_shape, width):
        if len(in_shape) < 2:
            raise ValueError("Attention needs inputs with positions (P, *spatial, C)")
        return tuple(in_shape[:-1]) + (width,)

    def param_shapes(self, in_shape, width, n_key=None):
        C, H = in_shape[-1], self.n_heads
        n = width if n_key is None else n_key
        shapes = {"K": (H, C, n), "V": (H, C, n), "O": (H * n, width), "b": (width,)}
        if self.embedded:
            shapes["E"] = tuple(in_shape)
        return shapes

    def apply(self, params, x):
        S, P, C = x.shape[0], x.shape[1], x.shape[-1]
        xs = x.reshape(S, P, -1, C)                                   # (S, P, T, C)
        T = xs.shape[2]
        xk = xs
        if self.embedded:
            xk = xs + np.sqrt(self.sigma_pe2) * params["E"].reshape(S, 1, T, C)
        xv = xk if self.pos_emb_values else xs
        Wk, Wv, Wo = params["K"], params["V"], params["O"]
        H, nk, nv = Wk.shape[1], Wk.shape[-1], Wv.shape[-1]
        keys = _heads(xk, Wk)                                         # (S, P, H, T, nk)
        s = self.qk_scale / (C * nk)
        A = softmax(s * np.matmul(keys, keys.transpose(0, 1, 2, 4, 3)))
        vals = _heads(xv, Wv)
        heads = np.matmul(A, vals)                                    # (S, P, H, T, nv)
        cat = heads.transpose(0, 1, 3, 2, 4).reshape(S, P, T, H * nv)
        c = np.sqrt(self.sigma_w2 / (nv * H * C))
        y = c * np.matmul(cat.reshape(S, P * T, H * nv), Wo).reshape(S, P, T, -1)
        if self.sigma_b2:
            y += np.sqrt(self.sigma_b2) * params["b"][:, None, None, :]
        return y.reshape(x.shape[:-1] + (Wo.shape[-1],)), (x.shape, xk, xv, keys, A, vals, cat, s, c)

    def _signals(self, params, cache, gy):
        """Backward signals: g (S, P, T, O), ∂/∂values, ∂/∂keys (S, P, H, T, n), and ∂/∂x through the values and
        through the keys (S, P, T, C) each."""
        shape, xk, xv, keys, A, vals, cat, s, c = cache
        S, P, T, C = xk.shape
        Wk, Wv, Wo = params["K"], params["V"], params["O"]
        H, nv = Wk.shape[1], Wv.shape[-1]
        g = gy.reshape(S, P, T, -1)
        dcat = c * np.matmul(g.reshape(S, P * T, -1), Wo.transpose(0, 2, 1))     # (S, P·T, H·nv)
        dheads = dcat.reshape(S, P, T, H, nv).transpose(0, 1, 3, 2, 4)
        dvals = np.matmul(A.transpose(0, 1, 2, 4, 3), dheads)          # (S, P, H, T, nv)
        dA = np.matmul(dheads, vals.transpose(0, 1, 2, 4, 3))
        dlog = A * (dA - (dA * A).sum(-1, keepdims=True))             # softmax backward
        dkeys = s * np.matmul(dlog + dlog.transpose(0, 1, 2, 4, 3), keys)   # logits = s·k kᵀ (tied)
        return g, dvals, dkeys, _heads_back(dvals, Wv), _heads_back(dkeys, Wk)

    def _embedding_gradient(self, gxv, gxk):
        """∂f/∂x̃ summed over the paths that read the embedding (keys, and values with ``pos_emb_values``)."""
        return gxk + gxv if self.pos_emb_values else gxk

    def backward(self, params, cache, gy):
        shape, xk, xv, keys, A, vals, cat, s, c = cache
        g, dvals, dkeys, gxv, gxk = self._signals(params, cache, gy)
        theta = gram_theta(cat, g, c * c)
        if self.sigma_b2:
            theta += bias_theta(gy, self.sigma_b2)
        for h in range(dvals.shape[2]):
            theta += gram_theta(xv, dvals[:, :, h], 1.0) + gram_theta(xk, dkeys[:, :, h], 1.0)
        if self.embedded:                    # E is shared by all inputs: σ_e² Σ_{i,c} ∂f_p/∂x̃_ic ∂f_q/∂x̃_ic
            ge = self._embedding_gradient(gxv, gxk)
            theta += self.sigma_pe2 * np.einsum("spic,sqic->spq", ge, ge, optimize=True)
        return (gxv + gxk).reshape(shape), theta

    def vjp(self, params, cache, gy):
        """∂/∂x and the parameter gradients summed over the inputs (training)."""
        shape, xk, xv, keys, A, vals, cat, s, c = cache
        g, dvals, dkeys, gxv, gxk = self._signals(params, cache, gy)
        grads = {"O": c * np.einsum("sptk,spto->sko", cat, g, optimize=True),
                 "V": np.einsum("sptc,sphtn->shcn", xv, dvals, optimize=True),
                 "K": np.einsum("sptc,sphtn->shcn", xk, dkeys, optimize=True),
                 "b": np.sqrt(self.sigma_b2) * g.sum(axis=(1, 2))}
        if self.embedded:
            ge = self._embedding_gradient(gxv, gxk).sum(1)
            grads["E"] = np.sqrt(self.sigma_pe2) * ge.reshape(params["E"].shape)
        return (gxv + gxk).reshape(shape), grads
