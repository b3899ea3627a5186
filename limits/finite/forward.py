"""Batched forward pass over S initialisations (leading axis), recording every pre-activation."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._blas import limit_blas
from ..checks import finite_array


def _is_linear(act) -> bool:
    return getattr(act, "name", None) == "linear"


class Phi:
    """φ, φ' of a network's activation, with a fast path for the identity."""

    def __init__(self, net):
        self.act = net.act()
        self.linear = _is_linear(self.act)

    def phi(self, x):
        return x if self.linear else self.act.phi(x)

    def dphi(self, x):
        return np.ones_like(x) if self.linear else self.act.dphi(x)


def check_inputs(net, X, name="X") -> np.ndarray:
    X = finite_array(X, name, ndim=2)
    if X.shape[1] != net.d_in:
        raise ValueError(f"{name} must have shape (P, {net.d_in}), got {X.shape}")
    if X.shape[0] < 1:
        raise ValueError(f"{name} must have at least one row")
    return X


def dense_apply(dense, W, b, inp):
    """``mult · inp Wᵀ + bias_mult · b`` for inp (S|1, P, fan_in), W (S, out, in) or a lazily
    sampled weight with ``.apply(inp)`` (:class:`limits.finite.ntk.ConditionalWeight`)."""
    out = W.apply(inp) if hasattr(W, "apply") else np.matmul(inp, W.transpose(0, 2, 1))
    if dense.mult != 1.0:
        out *= dense.mult
    if b is not None:
        out += dense.bias_mult * b[:, None, :]
    return out


@dataclass
class Forward:
    """Everything the backward pass and the measurements need.

    ``h[l]`` (S, P, N): stream state after block l (``h[0]`` after the read-in); for post-activation
    nets these are post-activations. ``pre[name]``: output of weight layer ``name`` (pre-activation,
    (S, P, fan_out)); ``inp[name]``: what that layer multiplied; ``z[l-1]`` (post-activation nets):
    the pre-φ sum of block l; ``f`` (S, P, d_out) the network output (already times out_scale).
    """

    X: np.ndarray
    h: list
    pre: dict
    inp: dict
    z: list
    f: np.ndarray

    def postactivations(self) -> dict:
        """Layer name → the array that layer multiplies (S|1, P, fan_in): φ(h) of the previous
        representation for pre-activation nets ('in' → the inputs X)."""
        return dict(self.inp)

    def preactivations(self) -> dict:
        """Name → (S, P, width) for every hidden representation: stream states 'h0'…'hB' and the
        inner pre-activations of multi-layer blocks 'u{l}.{k}' (k < last)."""
        out = {f"h{l}": h for l, h in enumerate(self.h)}
        for name, u in self.pre.items():
            if name in ("in", "out"):
                continue
            blk, k = name.split(".")
            if f"{blk}.{int(k) + 1}" in self.pre:
                out[f"u{name}"] = u
        return out


@limit_blas
def forward(net, weights, X, check=True) -> Forward:
    """Forward pass of all S initialisations on inputs X (P, d_in) (see :mod:`limits.finite.network`)."""
    if check:
        X = check_inputs(net, X)
    P = Phi(net)
    W, B = weights.W, weights.b
    pre, inp, hs, zs = {}, {}, [], []
    x = X[None, :, :]
    inp["in"] = x
    u = dense_apply(net.readin, W["in"], B.get("in"), x)
    pre["in"] = u
    h = P.phi(u) if net.readin_phi else u
    hs.append(h)
    for i, blk in enumerate(net.blocks, 1):
        a = h if net.post_activation else P.phi(h)
        nL = len(blk.layers)
        for k, d in enumerate(blk.layers, 1):
            name = f"{i}.{k}"
            inp[name] = a
            u = dense_apply(d, W[name], B.get(name), a)
            pre[name] = u
            if k < nL:
                a = P.phi(u)
        F = u if blk.branch == 1.0 else blk.branch * u
        zz = h + F if blk.residual else F
        if net.post_activation:
            zs.append(zz)
            h = P.phi(zz)
        else:
            h = zz
        hs.append(h)
    a = P.phi(h) if net.readout_phi else h
    inp["out"] = a
    out = dense_apply(net.readout, W["out"], B.get("out"), a)
    pre["out"] = out
    f = out * net.out_scale
    return Forward(X, hs, pre, inp, zs, f)


def output(net, weights, X) -> np.ndarray:
    """Network outputs f (S, P, d_out)."""
    return forward(net, weights, X).f
