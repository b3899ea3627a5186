"""Demonstration networks for ``coord_check`` (tests, gallery, README): width-taking factories of a small MLP
and a small ``nn.TransformerEncoder`` on a tiny synthetic task, a deliberately broken μP (the read-out
left as in SP) — the bug coordinate checks exist to catch — and a byte-level GPT written by hand as
nanoGPT writes it (packed ``c_attn`` qkv ``nn.Linear`` split into heads, ``F.scaled_dot_product_attention``
or the explicit ``softmax(q @ kᵀ · 1/√d)``, pre-LayerNorm blocks, optionally tied embedding/read-out):
``gpt`` (2 heads, head dimension ∝ width), ``gpt_tied``, ``gpt_explicit``, ``gpt_fixed_head_dim``
(heads ∝ width, head dimension 16), with next-byte data ``byte_data()``.

    limits coord-check --factory limits.torch.demos:transformer --param muP
    limits coord-check --factory limits.torch.demos:broken_mup_transformer --as-is --expect muP

The factories and data functions are declared (:mod:`limits.registry`), so they need no ``--allow``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

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


# ------------------------------------------------------------------ a byte-level GPT, written as nanoGPT writes it
BYTES = 256
GPT_SEQ = 16
TEXT = (
    "Width is the number of units in a layer. As it grows, a network's function at initialisation becomes a "
    "Gaussian process, and its training becomes a kernel method, unless the parameterisation lets features "
    "move. The maximal update parameterisation scales the initial weights, the learning rates and the "
    "attention logits so that every layer keeps learning at every width, and so the best learning rate found "
    "on a narrow model stays the best on a wide one. A coordinate check measures, for each layer, how its "
    "activations and their change after a few steps grow with width, and compares the exponents with the "
    "predicted ones. Attention divides the query-key product by the head dimension rather than by its square "
    "root; a read-out tied to the token embedding takes the embedding's initial scale and learning rate, and "
    "multiplies its output by the inverse width ratio. "
)


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one packed ``c_attn`` Linear(N, 3N) split into q, k, v of ``heads`` heads,
    causal ``F.scaled_dot_product_attention`` (default scale 1/√d_head) or, with ``explicit``,
    ``softmax((q @ kᵀ) · 1/√d_head)`` written out; then ``c_proj`` Linear(N, N)."""

    def __init__(self, width, heads, explicit=False):
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of the {heads} heads")
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.n_head, self.n_embd, self.explicit = heads, width, explicit
        self.register_buffer("mask", torch.tril(torch.ones(GPT_SEQ, GPT_SEQ, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.explicit:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    """Pre-LayerNorm block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) with mlp = Linear(N, 4N) → GELU → Linear(4N, N)."""

    def __init__(self, width, heads, explicit=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, explicit)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    """Byte-level GPT: token and position embeddings (256 and 16 × N), ``layers`` blocks, ``ln_f``, read-out
    ``lm_head`` Linear(N, 256, no bias) — with ``tied`` the token embedding's own tensor. Returns logits
    (B, T, 256). PyTorch's default inits (SP: Linear U(±1/√fan-in), Embedding N(0, 1))."""

    def __init__(self, width, heads=2, layers=2, tied=False, explicit=False):
        super().__init__()
        self.wte = nn.Embedding(BYTES, width)
        self.wpe = nn.Embedding(GPT_SEQ, width)
        self.blocks = nn.ModuleList(Block(width, heads, explicit) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, BYTES, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt(width):
    """:class:`GPT` with 2 heads (head dimension N/2 ∝ width) and SDPA attention."""
    return GPT(width)


def gpt_tied(width):
    """:class:`GPT` whose read-out is the token embedding (``lm_head.weight is wte.weight``)."""
    return GPT(width, tied=True)


def gpt_explicit(width):
    """:class:`GPT` with attention written out: ``softmax((q @ kᵀ) · (1/√d), -1) @ v`` (nanoGPT's slow path)."""
    return GPT(width, explicit=True)


def gpt_fixed_head_dim(width):
    """:class:`GPT` with heads ∝ width (head dimension 16): μP keeps 1/√d_head here."""
    return GPT(width, heads=max(1, width // 16))


def gpt_nanogpt_init(width):
    """:func:`gpt_tied` with nanoGPT's init: every weight matrix N(0, 0.02²) at every width — hidden weights not
    ∝ fan-in^−½, so not SP (``parameterise`` refuses it unless ``check_init=False``)."""
    m = GPT(width, tied=True)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return m


def byte_data(batch=8, seq=GPT_SEQ, seed=0):
    """``batch`` windows of ``seq`` bytes of :data:`TEXT` at random offsets (seed) and their next bytes
    (integer targets: cross-entropy)."""
    data = torch.tensor(list(TEXT.encode("ascii")), dtype=torch.long)
    g = torch.Generator().manual_seed(int(seed))
    start = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
    X = torch.stack([data[s:s + seq] for s in start.tolist()])
    Y = torch.stack([data[s + 1:s + seq + 1] for s in start.tolist()])
    return X, Y
