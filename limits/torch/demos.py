"""Demonstration networks for ``coord_check`` (tests, gallery, README): width-taking factories of a small MLP
and a small ``nn.TransformerEncoder`` on a tiny synthetic task, and a deliberately broken μP (the read-out
left as in SP) — the bug coordinate checks exist to catch.

    limits coord-check --factory limits.torch.demos:transformer --param muP
    limits coord-check --factory limits.torch.demos:broken_mup_transformer --as-is --expect muP

The factories and data functions are declared (:mod:`limits.registry`), so they need no ``--allow``.
"""
from __future__ import annotations

import torch
from torch import nn

from ..registry import torch_data, torch_factory

VOCAB = 16
SEQ = 8
D_IN = 8


@torch_factory
def mlp(width):
    """Linear(8, N) → tanh → Linear(N, N) → tanh → Linear(N, 2)."""
    return nn.Sequential(nn.Linear(D_IN, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 2))


class TinyTransformer(nn.Module):
    """Embedding(16, N) → 2 pre-LN-free encoder layers (2 heads, feed-forward 2N, no dropout) → Linear(N, 16),
    logits averaged over the 8 positions."""

    def __init__(self, width, layers=2, heads=2):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, width)
        layer = nn.TransformerEncoderLayer(width, nhead=heads, dim_feedforward=2 * width, dropout=0.0,
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.out = nn.Linear(width, VOCAB)

    def forward(self, x):
        return self.out(self.enc(self.emb(x))).mean(dim=1)


@torch_factory
def transformer(width):
    """:class:`TinyTransformer` at this width."""
    return TinyTransformer(width)


@torch_data
def mlp_data():
    """32 Gaussian inputs in R^8, targets N(0, 1) in R^2 (seed 0)."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(32, D_IN, generator=g), torch.randn(32, 2, generator=g)


@torch_data
def transformer_data():
    """16 random token sequences of length 8, regression targets N(0, 1) on the 16 outputs (seed 0)."""
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB, (16, SEQ), generator=g), torch.randn(16, VOCAB, generator=g)


def _broken(factory, width, base=64):
    """μP (Adam) applied by ``parameterise``, then the read-out reverted to SP: init ∝ 1/√N and an
    unscaled learning rate (the read-out is the last Linear)."""
    from .apply_params import parameterise

    P = parameterise(factory, "muP", widths=(base, 2 * base), optimizer="adam")
    m = P(width)
    readout = [q for q in P.rules if q.role == "output"][0]
    r = width / P.base_width
    with torch.no_grad():
        m.get_parameter(readout.name).mul_(r ** -readout.init_exponent)
    groups = [{"params": [p], "lr_mult": 1.0 if n == readout.name else mult}
              for n, p, mult in m.limits_lr_multipliers]
    return m, groups


@torch_factory
def broken_mup_mlp(width):
    """μP MLP with an SP read-out (see :func:`_broken`)."""
    return _broken(mlp, width)


@torch_factory
def broken_mup_transformer(width):
    """μP transformer with an SP read-out (see :func:`_broken`)."""
    return _broken(transformer, width)


@torch_factory
def mup_transformer(width):
    """The correctly μP-parameterised transformer with its optimizer groups (for ``--as-is --expect muP``)."""
    from .apply_params import parameterise

    P = parameterise(transformer, "muP", widths=(64, 128), optimizer="adam")
    m = P(width)
    return m, [{"params": [p], "lr_mult": mult} for _, p, mult in m.limits_lr_multipliers]
