"""A family of generated modules for the property "a module :func:`limits.torch.parameterise` accepts passes its
own :func:`limits.torch.coord_check` at the nominal false-alarm rate" (``benchmarks/torch_property.py``,
``tests/torch_bridge/test_torch_plan.py``).

:func:`design` draws, from a seed, a small sequence model written with width-dependent multipliers in random
places — the ways people write μP by hand or leave a constant behind:

    input      token embedding (optionally tied to the read-out) or a Linear read-in of vectors
    root       nothing, a class token prepended (``torch.cat``), a position embedding added, or a gain multiplied
               — raw parameters of the root module
    blocks     1–2 residual blocks, pre-LayerNorm or RMSNorm (written out): an MLP (optionally its hidden Linear
               shared with a second module: ``b.weight = a.weight``) or causal attention (separate q/k/v or packed,
               SDPA with its own ``scale=`` or softmax(q·kᵀ·s) written out, s = c·d^−p)
    multiplier r^e (r = N/32, e ∈ {−1, −½, ½, 1}) on: the embedding's output, a pre-activation, an MLP's
               hidden activation, a branch's output, the read-out's input or output; or, rarely, where no weight
               stands between it and the next non-linearity (parameterise must refuse that by name)

The factory (:class:`Factory`) is picklable and deterministic in its design; :func:`data` gives its task.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

BASE = 32
VOCAB = 16
SEQ = 8
D_IN = 6
SITES = ("embedding", "pre_activation", "hidden", "branch", "readout_in", "readout_out", "unabsorbable")


@dataclass(frozen=True)
class Design:
    """What a generated module is made of (module docstring)."""

    seed: int
    tokens: bool
    tie: bool
    root: str                 # "none" | "token" | "pos" | "gain"
    blocks: tuple             # ("mlp"|"attn", ...)
    norm: str                 # "layer" | "rms"
    shared: bool
    packed: bool
    sdpa: bool
    score_power: float        # s = c · d^−p on q·kᵀ
    site: str                 # where the multiplier sits (SITES) or "none"
    exponent: float

    def describe(self) -> str:
        parts = ["tokens" + (" (tied read-out)" if self.tie else "") if self.tokens else "vectors",
                 f"root {self.root}", "+".join(self.blocks), f"{self.norm} norm"]
        if "attn" in self.blocks:
            parts.append(("packed" if self.packed else "q/k/v") + (" SDPA" if self.sdpa else " explicit")
                         + f" s∝d^-{self.score_power:g}")
        if self.shared:
            parts.append("shared hidden Linear")
        if self.site != "none":
            parts.append(f"×r^{self.exponent:+g} at {self.site}")
        return ", ".join(parts)


def design(seed) -> Design:
    """A random :class:`Design` from ``seed`` (module docstring)."""
    g = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(43,)))
    tokens = bool(g.random() < 0.6)
    blocks = tuple(str(g.choice(["mlp", "attn"])) for _ in range(int(g.integers(1, 3))))
    site = str(g.choice(SITES[:-1])) if g.random() < 0.85 else ("unabsorbable" if g.random() < 0.3 else "none")
    return Design(int(seed), tokens, tokens and bool(g.random() < 0.4),
                  str(g.choice(["none", "token", "pos", "gain"])), blocks, str(g.choice(["layer", "rms"])),
                  bool(g.random() < 0.3), bool(g.random() < 0.5), bool(g.random() < 0.5),
                  float(g.choice([0.5, 1.0])), site, float(g.choice([-1.0, -0.5, 0.5, 1.0])))


class RMS(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class _Attn(nn.Module):
    def __init__(self, n, d: Design, heads=2):
        super().__init__()
        self.h, self.d, self.packed = heads, d, d.packed
        if d.packed:
            self.qkv = nn.Linear(n, 3 * n)
        else:
            self.q, self.k, self.v = nn.Linear(n, n), nn.Linear(n, n, bias=False), nn.Linear(n, n)
        self.o = nn.Linear(n, n)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2) if self.packed else (self.q(x), self.k(x), self.v(x))
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        s = 2.0 * (C // self.h) ** -self.d.score_power
        if self.d.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=s)
        else:
            att = (q @ k.transpose(-2, -1)) * s
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, C))


class _MLP(nn.Module):
    def __init__(self, n, d: Design, mult):
        super().__init__()
        self.fc1, self.fc2, self.d, self.m = nn.Linear(n, 2 * n), nn.Linear(2 * n, n), d, mult
        if d.shared:
            self.fc3 = nn.Linear(n, 2 * n)
            self.fc3.weight = self.fc1.weight             # a projection shared by two modules

    def forward(self, x):
        pre = self.fc1(x)
        if self.d.shared:
            pre = pre + self.fc3(x.flip(1))
        if self.d.site == "pre_activation":
            pre = pre * self.m
        h = F.gelu(pre)
        if self.d.site == "hidden":
            h = h * self.m
        out = self.fc2(h)
        return out * self.m if self.d.site == "branch" else out


class Generated(nn.Module):
    """The module of a :class:`Design` at width ``n``."""

    def __init__(self, n, d: Design):
        super().__init__()
        self.d, self.m = d, (n / BASE) ** d.exponent
        self.inp = nn.Embedding(VOCAB, n) if d.tokens else nn.Linear(D_IN, n)
        if d.root == "token":
            self.cls = nn.Parameter(torch.randn(1, 1, n))
        elif d.root == "pos":
            self.pos = nn.Parameter(torch.randn(1, SEQ, n))
        elif d.root == "gain":
            self.gain = nn.Parameter(torch.ones(n))
        norm = nn.LayerNorm if d.norm == "layer" else RMS
        self.norms = nn.ModuleList(norm(n) for _ in d.blocks)
        self.blocks = nn.ModuleList(_Attn(n, d) if b == "attn" else _MLP(n, d, self.m) for b in d.blocks)
        if d.site == "unabsorbable":
            self.gate = nn.Linear(n, n)
        self.final = norm(n)
        self.out = nn.Linear(n, VOCAB if d.tokens else 2, bias=not d.tie)
        if d.tie:
            self.out.weight = self.inp.weight

    def forward(self, x):
        h = self.inp(x)
        if self.d.site == "embedding":
            h = h * self.m
        if self.d.root == "token":
            h = torch.cat((self.cls.expand(h.shape[0], -1, -1), h[:, 1:]), dim=1)
        elif self.d.root == "pos":
            h = h + self.pos[:, : h.shape[1]]
        for norm, block in zip(self.norms, self.blocks):
            h = h + block(norm(h))
        if self.d.site == "unabsorbable":
            h = h + torch.tanh(self.gate(h)) * self.m           # no weight between the tanh and the stream
        if self.d.root == "gain":
            h = h * self.gain
        h = self.final(h)
        if self.d.site == "readout_in":
            h = h * self.m
        y = self.out(h)
        return y * self.m if self.d.site == "readout_out" else y


class Factory:
    """``Factory(design)(width)`` → :class:`Generated` (picklable)."""

    def __init__(self, d: Design):
        self.design = d

    def __call__(self, width):
        return Generated(int(width), self.design)

    def __repr__(self):
        return f"Factory(design({self.design.seed}))"


def data(d: Design, batch=8, seed=0):
    """The task of a design: next tokens (cross-entropy) or N(0, 1) targets of N(0, 1) vectors (½ squared error)."""
    g = torch.Generator().manual_seed(int(seed))
    if d.tokens:
        x = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=g)
        return x[:, :-1], x[:, 1:]
    return torch.randn(batch, SEQ, D_IN, generator=g), torch.randn(batch, SEQ, 2, generator=g)


__all__ = ["Design", "design", "Generated", "Factory", "data", "SITES", "BASE"]
