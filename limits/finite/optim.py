"""Optimisers acting on dicts of batched arrays (leading axis = init). Each parameter has its own
learning rate (per-layer rates come from the Network); updates are returned so callers can apply
the same update to a decoupled backward copy (docs/theory/nfd.rst §5)."""
from __future__ import annotations

import numpy as np


class GD:
    """Plain (stochastic) gradient descent: ``θ ← θ − η_θ g``."""

    def __init__(self, lrs: dict):
        self.lrs = dict(lrs)
        self.t = 0

    def update(self, grads: dict) -> dict:
        """The update Δθ for every key in ``grads`` (not applied)."""
        self.t += 1
        return {k: -self.lrs[k] * g for k, g in grads.items() if self.lrs[k] != 0.0}


class Adam:
    """Adam (Kingma & Ba 2015) with bias correction, per-parameter learning rates:
    ``m ← β1 m + (1−β1) g``, ``v ← β2 v + (1−β2) g²``, ``Δθ = −η m̂/(√v̂ + ε)``."""

    def __init__(self, lrs: dict, betas=(0.9, 0.999), eps=1e-8):
        self.lrs = dict(lrs)
        self.b1, self.b2 = (float(b) for b in betas)
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        self.eps = float(eps)
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.m, self.v = {}, {}
        self.t = 0

    def update(self, grads: dict) -> dict:
        self.t += 1
        out = {}
        c1 = 1.0 - self.b1**self.t
        c2 = 1.0 - self.b2**self.t
        for k, g in grads.items():
            if self.lrs[k] == 0.0:
                continue
            m = self.m.get(k)
            if m is None:
                m = self.m[k] = np.zeros_like(g)
                self.v[k] = np.zeros_like(g)
            v = self.v[k]
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            out[k] = -self.lrs[k] * (m / c1) / (np.sqrt(v / c2) + self.eps)
        return out
