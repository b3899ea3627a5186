"""``Model.to_torch``: a :class:`limits.Model` at width N as a ``torch.nn.Module`` computing exactly what
``model.finite(N)`` computes (docs/theory/finite.rst conventions, :mod:`limits.finite.network`)::

    h⁰ = m_in W_in x + β_in b_in
    h^l = [h^{l−1}] + ρ_eff (m_l W_l φ(h^{l−1}) + β_l b_l)
    f   = s_out (m_out W_out φ(h^B) + β_out b_out)

with the trained parameters W ~ N(0, std²), b ~ N(0, bias_std²) and per-parameter learning rates
η_W, η_b of the concrete :class:`limits.finite.Network` — the one place a Model becomes numbers, so
the torch module cannot drift from the numpy simulator. ``param_groups(lr_scale)`` gives one optimizer
group per parameter with that rate; torch's SGD and Adam then apply θ ← θ − η g and
θ ← θ − η m̂/(√v̂ + ε), the updates of :mod:`limits.finite.optim`, for the loss of
:func:`mse_loss` (the simulator's ℓ = (1/P) Σ ½ (f − y)²).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

TORCH_ACTIVATIONS = {
    "linear": lambda x: x,
    "relu": torch.relu,
    "erf": torch.erf,
    "tanh": torch.tanh,
    "gelu": lambda x: torch.nn.functional.gelu(x, approximate="none"),
    "sigmoid": torch.sigmoid,
}


def torch_activation(act):
    """The torch function of a registered activation name (or an Activation with that name)."""
    name = getattr(act, "name", act)
    if not isinstance(name, str) or name not in TORCH_ACTIVATIONS:
        from ..errors import ModelError

        raise ModelError(f"activation {name!r} has no torch counterpart in limits.torch "
                         f"(known: {', '.join(TORCH_ACTIVATIONS)})")
    return TORCH_ACTIVATIONS[name]


def _key(kind, name):
    return f"{kind}_{name.replace('.', '_')}"


param_key = _key          # public within the package: the parameter name of a layer's W or b ("W_1_1")


class TorchNetwork(nn.Module):
    """A concrete :class:`limits.finite.Network` as a torch module (module docstring).

    ``weights``: a :class:`limits.finite.Weights` (from ``limits.finite.init_weights``) whose init
    ``index`` is copied; otherwise the weights are drawn with the network's init laws W_ij ~ N(0, std²),
    b_i ~ N(0, bias_std²) from a ``torch.Generator`` seeded by ``seed``, or (``seed=None``) from torch's global
    RNG, as torch's own modules do (reproducible under ``torch.manual_seed``).
    Parameters are named ``W_in``, ``W_1_1``, …, ``W_out`` (and ``b_…``), as the layers of
    ``Network.layer_names()``.
    """

    def __init__(self, net, weights=None, index=0, seed=None, dtype=torch.float64):
        super().__init__()
        self.network = net
        self.phi = torch_activation(net.act())
        self._layers = net.layers()
        gen = None
        if weights is None:
            gen = None if seed is None else torch.Generator().manual_seed(int(seed))
        elif seed is not None:
            raise ValueError("pass weights= or seed=, not both")
        for name, d in self._layers.items():
            if weights is not None:
                if name not in weights.W:
                    raise ValueError(f"weights: no layer {name!r}; the network has {list(self._layers)}")
                W = torch.as_tensor(np.asarray(weights.W[name][index]), dtype=dtype).clone()
                if W.shape != (d.fan_out, d.fan_in):
                    raise ValueError(f"weights[{name!r}] has shape {tuple(W.shape)}, the layer needs "
                                     f"{(d.fan_out, d.fan_in)}")
                b = (torch.as_tensor(np.asarray(weights.b[name][index]), dtype=dtype).clone()
                     if d.bias else None)
            else:
                W = torch.randn((d.fan_out, d.fan_in), generator=gen, dtype=dtype) * d.std
                b = torch.randn((d.fan_out,), generator=gen, dtype=dtype) * d.bias_std if d.bias else None
            self.register_parameter(_key("W", name), nn.Parameter(W))
            if b is not None:
                self.register_parameter(_key("b", name), nn.Parameter(b))

    # ------------------------------------------------------------------ forward
    def _dense(self, name, x):
        d = self._layers[name]
        out = torch.matmul(x, getattr(self, _key("W", name)).T)
        if d.mult != 1.0:
            out = out * d.mult
        if d.bias:
            out = out + d.bias_mult * getattr(self, _key("b", name))
        return out

    def forward(self, x, return_hidden=False):
        """f (P, d_out) for inputs x (P, d_in); with ``return_hidden`` also the stream states h⁰…h^B."""
        net, phi = self.network, self.phi
        u = self._dense("in", x)
        h = phi(u) if net.readin_phi else u
        hs = [h]
        for i, blk in enumerate(net.blocks, 1):
            a = h if net.post_activation else phi(h)
            nL = len(blk.layers)
            for k in range(1, nL + 1):
                u = self._dense(f"{i}.{k}", a)
                if k < nL:
                    a = phi(u)
            F = u if blk.branch == 1.0 else blk.branch * u
            z = h + F if blk.residual else F
            h = phi(z) if net.post_activation else z
            hs.append(h)
        a = phi(h) if net.readout_phi else h
        f = self._dense("out", a) * net.out_scale
        return (f, hs) if return_hidden else f

    # ------------------------------------------------------------------ training
    def param_groups(self, lr_scale=1.0) -> list:
        """One optimizer group per parameter, ``lr`` = the simulator's η of that parameter × lr_scale."""
        groups = []
        for name, d in self._layers.items():
            groups.append({"params": [getattr(self, _key("W", name))], "lr": d.lr * float(lr_scale),
                           "name": _key("W", name)})
            if d.bias:
                groups.append({"params": [getattr(self, _key("b", name))], "lr": d.b_lr * float(lr_scale),
                               "name": _key("b", name)})
        return groups

    def optimizer(self, name="sgd", lr_scale=1.0, betas=(0.9, 0.999), eps=1e-8):
        """``torch.optim.SGD`` or ``torch.optim.Adam`` over :meth:`param_groups` (the simulator's
        "gd"/"sgd" and "adam" updates)."""
        if name in ("sgd", "gd"):
            return torch.optim.SGD(self.param_groups(lr_scale), lr=0.0)
        if name == "adam":
            return torch.optim.Adam(self.param_groups(lr_scale), lr=0.0, betas=betas, eps=eps)
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {name!r}")

    def to_weights(self):
        """The parameters as a one-init :class:`limits.finite.Weights` (float64 numpy copies)."""
        from ..finite.weights import Weights

        W, b = {}, {}
        for name, d in self._layers.items():
            W[name] = getattr(self, _key("W", name)).detach().cpu().double().numpy()[None].copy()
            if d.bias:
                b[name] = getattr(self, _key("b", name)).detach().cpu().double().numpy()[None].copy()
        return Weights(W, b, dict(W))


class torch_threads:
    """Run the body with ``n`` torch intra-op threads (default ``$LIMITS_BLAS_THREADS``, i.e. 1 — as the
    numpy simulators: on small per-init products extra threads only add synchronisation)."""

    def __init__(self, n=None):
        from ..blas import default_threads

        self.want = default_threads() if n is None else int(n)

    def __enter__(self):
        self.n = torch.get_num_threads()
        torch.set_num_threads(max(1, self.want))
        return self

    def __exit__(self, *exc):
        torch.set_num_threads(self.n)


def mse_loss(f, y):
    """The simulator's training loss ℓ = (1/P) Σ_{μ,o} ½ (f_{μo} − y_{μo})² (``reduction="mean"``)."""
    if y.ndim == 1:
        y = y[:, None]
    return 0.5 * ((f - y) ** 2).sum() / f.shape[0]


def from_model(model, width, weights=None, index=0, seed=None, dtype=torch.float64) -> TorchNetwork:
    """:meth:`limits.Model.to_torch`: ``TorchNetwork(model.finite(width), …)``."""
    if not (hasattr(model, "finite") and hasattr(model, "act")):
        raise ValueError(f"from_model: give a limits.Model (limits.mlp/resnet or limits.Model.load), got "
                         f"{type(model).__name__}")
    torch_activation(model.act)             # refuse an activation without a torch counterpart first
    net = model.finite(width)
    return TorchNetwork(net, weights=weights, index=index, seed=seed, dtype=dtype)


__all__ = ["TorchNetwork", "from_model", "mse_loss", "torch_threads", "torch_activation", "TORCH_ACTIVATIONS"]
