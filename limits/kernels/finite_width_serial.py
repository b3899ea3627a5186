"""O(1/N) corrections of the read-out NNGP of a composition of layers (docs/theory/finite_width.rst §8).

Index set I = (input, position): a layer's N channels are vectors over I. Two stages alternate:

* **Gaussian** (after Dense/Conv): given everything before, the channels z_c are iid N(0, C) with the
  conditional covariance C (|I|×|I|); across networks E[C] = K + K1/N, N·Cov(C) = V.
* **features** (after Activation/LayerNorm): what the next parametric layer reads is the channel Gram
  Ĝ = (1/N) Σ_c g_c g_cᵀ; E[Ĝ] = G + G1/N, N·Cov(Ĝ) = W.

The layers act on (K, K1, V) or (G, G1, W) as follows (s, b the layer's σ_w², σ_b²; L its linear patch
operator on matrices over I — obtained from the layer's own kernel rule, so strides and paddings come with it):

* Dense / Conv (features → Gaussian): C = s L(Ĝ) + b, so K = s L G + b, K1 = s L G1, V = s² L W Lᵀ.
* Activation φ (Gaussian → features): Ĝ is a channel mean of φφᵀ(z_c), E[Ĝ | C] = F(C) = E_{N(0,C)}[φφᵀ], so
  G = F(K), G1 = D K1 + ½ ∂²F : V, W = D V Dᵀ + Σ (D, ∂²F the exact Price derivatives of
  :mod:`limits.kernels.price`; Σ the per-channel covariance of φφᵀ, four-point functions under N(0, K)).
* AvgPool / GlobalAvgPool / Flatten (either stage): per channel linear maps M of the positions, so every piece
  maps linearly (K ↦ M K Mᵀ, V ↦ (M⊗M) V (M⊗M)ᵀ) — a pooled Gaussian is Gaussian.
* LayerNorm (Gaussian → features): Ĝ_y = h(Ĝ_c), h_ab = x_ab/√((x_aa + ε)(x_bb + ε)) of the channel-centred Gram
  Ĝ_c = (1/N)Σ z zᵀ − z̄z̄ᵀ, E[Ĝ_c] = K + (K1 − K)/N, N·Cov(Ĝ_c) = U = V + (K_ac K_bd + K_ad K_bc) (Isserlis);
  the delta method: G = h(K), G1 = Dh (K1 − K) + ½ ∂²h : U, W = Dh U Dhᵀ.
* A Gaussian stage read by a linear or parametric layer directly (no nonlinearity) passes through the identity
  features: G = K, G1 = K1, W = V + Isserlis(K).

* Residual: a run of Residual blocks on a Gaussian stream and its reader (up to the next Dense/Conv) is one
  Z-estimator over the stream's channels, whose identities persist through the skips (the self-interaction of
  docs/theory/finite_width.rst §2): :mod:`limits.kernels.finite_width_residual`.

Refused by name (not derived): Attention (softmax of finite-width logits), Activation or LayerNorm after a
nonlinearity or Flatten (the input is no longer a field of iid Gaussian channels), and the residual sections
:mod:`limits.kernels.finite_width_residual` refuses. Cost: the four-point functions Σ are |pairs|² Gaussian
quadratures, |pairs| = |I|(|I|+1)/2 — meant for a few inputs and small images (the self-interaction of a residual
section is |pairs|³: a 1-D CNN on two inputs of length 3 takes about a minute per pair of branches).
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .fluctuations import pair_index, to_matrix
from .layer_operators import Stage, pair_operator, pair_vector, position_operator
from .price import PairDerivatives, hessian_contract, jacobian, pair_derivatives

WHAT = "limits.kernels.finite_width"


def _linear(st, layer, where):
    """Apply a linear layer (pooling, Flatten, the patch operator of Dense/Conv) to the stage."""
    S = int(np.prod(st.spatial)) if st.spatial else 1
    Lpos, sp, _ = position_operator(layer, st.spatial, where)
    Sp = int(np.prod(sp)) if sp else 1
    L = pair_operator(Lpos, st.P, S, Sp)
    n2 = st.P * Sp
    pr = pair_index(n2)
    Mv = L @ pair_vector(st.M, st.pairs)
    M = to_matrix(Mv, pr, n2)
    return Stage(st.kind, M, to_matrix(L @ pair_vector(st.M1, st.pairs), pr, n2), L @ st.V @ L.T, st.P, sp), L


# ------------------------------------------------------------------ stage transitions
def _isserlis(K, pairs):
    a, b = np.asarray(pairs).T
    return K[a[:, None], a[None, :]] * K[b[:, None], b[None, :]] + K[a[:, None], b[None, :]] * K[b[:, None], a[None, :]]


def _identity_features(st):
    """A Gaussian stage read directly: Ĝ = (1/N) Σ z zᵀ (module docstring)."""
    return Stage("features", st.M, st.M1, st.V + _isserlis(st.M, st.pairs), st.P, st.spatial)


def _activation(st, act):
    """Gaussian → features through φ: F(K), D K1 + ½ ∂²F : V, D V Dᵀ + Σ."""
    from .expectations import gram
    from .finite_width_ntk import FourPoint
    from .fourpoint import cov_phiphi

    pairs = st.pairs
    K = st.M
    pd = pair_derivatives(act, K, 0)
    D = jacobian(pd, pairs)
    G = gram(act, K)
    pr = np.asarray(pairs)
    Fv = pair_vector(G, pairs)
    if st.n <= 4:                                   # one joint rule for all pairs
        Sig = FourPoint(act, K).block("ffff", pr, pr) - np.outer(Fv, Fv)
    else:
        iu, ju = np.triu_indices(len(pairs))
        idx = np.concatenate([pr[iu], pr[ju]], axis=1)                           # (b, 4) variables
        Sig = np.zeros((len(pairs), len(pairs)))
        Sig[iu, ju] = cov_phiphi(act, K[idx[:, :, None], idx[:, None, :]])
        Sig = Sig + np.triu(Sig, 1).T
    G1 = D @ pair_vector(st.M1, pairs) + 0.5 * hessian_contract(pd, st.V, pairs)
    return Stage("features", G, to_matrix(G1, pairs, st.n), D @ st.V @ D.T + Sig, st.P, st.spatial)


def _layernorm_derivatives(K, eps) -> PairDerivatives:
    """h_ab = x_ab/√((x_aa+ε)(x_bb+ε)) (and x/(x+ε) on the diagonal) with its first and second derivatives."""
    d = np.diag(K) + eps
    s1, s2 = d[:, None], d[None, :]
    r = np.sqrt(s1 * s2)
    x = K
    h = {"12_12": np.zeros_like(K), "11_12": -1 / (2 * s1 * r), "12_22": -1 / (2 * s2 * r),
         "11_22": x / (4 * s1 * s2 * r), "11_11": 3 * x / (4 * s1 * s1 * r), "22_22": 3 * x / (4 * s2 * s2 * r)}
    F = x / r
    np.fill_diagonal(F, np.diag(K) / d)
    return PairDerivatives(F, -x / (2 * s1 * r), 1 / r, h, eps / d ** 2, -2 * eps / d ** 3)


def _layernorm(st, eps):
    pairs = st.pairs
    pd = _layernorm_derivatives(st.M, eps)
    D = jacobian(pd, pairs)
    U = st.V + _isserlis(st.M, pairs)
    G1 = D @ pair_vector(st.M1 - st.M, pairs) + 0.5 * hessian_contract(pd, U, pairs)
    return Stage("features", pd.F, to_matrix(G1, pairs, st.n), D @ U @ D.T, st.P, st.spatial)


def _parametric(st, layer, where):
    """Dense / Conv: features → Gaussian, C = s L(Ĝ) + b through the layer's own rule."""
    if st.kind == "gaussian":
        st = _identity_features(st)
    out, _ = _linear(st, layer, where)
    bias = position_operator(layer, st.spatial, where)[2]
    return Stage("gaussian", out.M + bias, out.M1, out.V, out.P, out.spatial)


# ------------------------------------------------------------------ the walk over the composition
def _refuse(where, why):
    raise ModelError(f"{WHAT} cannot treat this composition: {where}: {why}")


def propagate(serial, X):
    """The read-out stage of ``serial`` on the inputs X (P, *spatial, C) (module docstring)."""
    X = np.asarray(X, dtype=np.float64)
    P, spatial = X.shape[0], tuple(X.shape[1:-1])
    shape = tuple(X.shape[1:])
    for layer in serial.layers:                        # the output's shape first: refuse before any work
        shape = layer.out_shape(shape, 2)
    if len(shape) > 1:
        _refuse("the read-out", f"the composition's output still has spatial axes {shape[:-1]}; end it with Flatten "
                                "or GlobalAvgPool and a Dense read-out")
    Z = X.reshape(P, -1, X.shape[-1])
    G0 = np.einsum("pic,qjc->piqj", Z, Z).reshape(P * Z.shape[1], -1) / X.shape[-1]
    n = G0.shape[0]
    m = n * (n + 1) // 2
    st = Stage("features", G0, np.zeros_like(G0), np.zeros((m, m)), P, spatial)
    layers, i, after_flatten = list(serial.layers), 0, False
    while i < len(layers):
        layer = layers[i]
        where = f"layer {i} ({layer.describe()})"
        if type(layer).__name__ == "Residual":
            st, i = _section(st, layers, i, where, after_flatten)
            after_flatten = False
            continue
        st, after_flatten = _step(st, layer, where, after_flatten)
        i += 1
    return st


def _section(st, layers, i, where, after_flatten):
    """A run of Residual blocks from layer i and its reader (up to the next Dense/Conv):
    :mod:`limits.kernels.finite_width_residual`. Returns the reader's stage and the index after it."""
    from ..layers import Identity
    from .finite_width_residual import residual_section

    if st.kind != "gaussian" or after_flatten:
        _refuse(where, "Residual on a stream that is not a field of iid Gaussian channels (after a nonlinearity, "
                       "LayerNorm or Flatten): its self-interaction is derived for a stream that starts after Dense/Conv")
    j = i
    while j < len(layers) and (type(layers[j]).__name__ == "Residual" or isinstance(layers[j], Identity)):
        j += 1
    k = j
    while k < len(layers) and type(layers[k]).__name__ not in ("Dense", "Conv"):
        k += 1
    if k == len(layers):
        _refuse(where, "a residual section must be followed by a Dense/Conv read-out (through at most one Activation "
                       "and pooling/Flatten)")
    res = [x for x in layers[i:j] if not isinstance(x, Identity)]
    return residual_section(st, res, layers[j:k + 1], where), k + 1


def _step(st, layer, where, after_flatten):
    """One layer outside residual sections (module docstring): (stage, after_flatten)."""
    from ..layers import Activation, AvgPool, Dense, Flatten, GlobalAvgPool, Identity, LayerNorm

    name = type(layer).__name__
    if isinstance(layer, Identity):
        return st, after_flatten
    if name in ("Dense", "Conv") or isinstance(layer, Dense):
        return _parametric(st, layer, where), False
    if isinstance(layer, Activation):
        if st.kind != "gaussian" or after_flatten:
            _refuse(where, "Activation after a nonlinearity, LayerNorm or Flatten — its input is not a field of "
                           "iid Gaussian channels")
        return _activation(st, layer.act), after_flatten
    if isinstance(layer, LayerNorm):
        if st.kind != "gaussian" or after_flatten:
            _refuse(where, "LayerNorm needs a Gaussian field of iid channels (after Dense or Conv)")
        return _layernorm(st, layer.eps), after_flatten
    if isinstance(layer, (AvgPool, GlobalAvgPool, Flatten)):
        if isinstance(layer, Flatten) and st.kind == "gaussian":
            st = _identity_features(st)
        return _linear(st, layer, where)[0], after_flatten or isinstance(layer, Flatten)
    if name == "Attention":
        _refuse(where, "Attention: the O(1/N) correction of the softmax of finite-width logits is not derived")
    _refuse(where, f"{name}: no O(1/N) rule")


def finite_width_serial(serial, X1, X2=None):
    """(K, K1, N·Var of the read-out C, note) for a composition on X1 (× X2): module docstring."""
    Z = X1 if X2 is None else np.concatenate([X1, X2])
    st = propagate(serial, Z)
    if st.kind != "gaussian":
        st = _identity_features(st)
    P1 = X1.shape[0]
    var = to_matrix(np.diag(st.V), st.pairs, st.n)
    cut = (lambda A: A) if X2 is None else (lambda A: A[:P1, P1:])     # noqa: E731
    return cut(st.M), cut(st.M1), cut(var), (st.V if X2 is None else None)


def model_of(serial, d_in):
    """The :class:`limits.Model` (NTK parameterisation) whose ``to_serial()`` is ``serial`` — a fully connected MLP
    or residual network written as layers — or None."""
    from ..layers import Activation, Dense, Residual
    from ..model import mlp, resnet

    ls = list(serial.layers)
    if len(ls) < 3 or not (isinstance(ls[0], Dense) and isinstance(ls[-2], Activation) and isinstance(ls[-1], Dense)):
        return None
    act = ls[-2].name_
    body = ls[1:-2]
    if body and all(isinstance(b, Residual) for b in body):
        br = body[0].branch.layers
        if len(br) != 2 or not (isinstance(br[0], Activation) and isinstance(br[1], Dense)):
            return None
        kw = dict(depth=len(body), activation=act, sigma_w2=br[1].sigma_w2, sigma_b2=br[1].sigma_b2, rho=body[0].rho)
        build = resnet
    elif len(body) % 2 == 0 and all(isinstance(b, (Activation if i % 2 == 0 else Dense)) for i, b in enumerate(body)):
        if not body:
            return None
        kw = dict(depth=len(body) // 2, activation=act, sigma_w2=body[1].sigma_w2, sigma_b2=body[1].sigma_b2)
        build = mlp
    else:
        return None
    try:
        m = build(d_in, sigma_w2_in=ls[0].sigma_w2, sigma_b2_in=ls[0].sigma_b2, sigma_w2_out=ls[-1].sigma_w2,
                  sigma_b2_out=ls[-1].sigma_b2, **kw)
        return m if m.to_serial() == serial else None
    except (ValueError, ModelError):
        return None
