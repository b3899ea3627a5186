"""Hand-written μP networks as users write them today, and the learning-rate/scale bugs users make — the
reference modules on which :func:`limits.torch.coord_check` is calibrated (its false-alarm rate on the correct
ones, its power on each bug: ``benchmarks/coordcheck_calibration.py``) and its injected-bug tests.

``gpt(width, attention="sdpa", bug=None)``: a 2-layer pre-LayerNorm causal GPT on 16 tokens, sequence 8 —
token and position embeddings, blocks ``x += proj(attn(LN x))``, ``x += fc2(gelu(fc(LN x)))``, a final LN and a
read-out ``Linear(N, 16)`` — with μP (Adam) written by hand, relative to the base width ``BASE`` (r = N/BASE):

    embeddings, LayerNorm gains/biases, biases   init as torch's,      lr η
    hidden Linear weights (qkv, proj, fc, fc2)   init as torch's,      lr η / r
    read-out weight                              init torch's · r^−½,  lr η / r
    attention                                    logits q·k · √d₀/d   (= 1/√d at the base width; TP5's 1/d)

``attention="sdpa"``: a packed ``Linear(N, 3N)`` and ``F.scaled_dot_product_attention(..., scale=…)`` (nanoGPT);
``"mha"``: ``nn.MultiheadAttention`` (its 1/√d corrected by scaling the query input by √(d₀/d)); ``"explicit"``:
``softmax(q @ kᵀ · s) @ v`` written out;
``heads="width"``: heads ∝ width at head dimension 16 (then 1/√16 is already μP). The factory returns
``(module, [{"params", "lr_mult", "name"}])`` for ``coord_check(..., expect="muP")``. ``bug`` injects one of
``BUGS`` (the rows its pattern matches are the culprits a check should report first).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..registry import torch_data, torch_factory

VOCAB = 16
SEQ = 8
BASE = 64
HEAD_DIM = 16
BUGS = {       # bug: (the culprit rows: fnmatch patterns over row names, "|"-separated; what is wrong)
    "readout_sp": ("out.weight", "read-out left as in SP (init ∝ N^−½, learning rate η)"),
    "sdpa_sqrt_d": ("blocks.*.attn:logits", "attention 1/√d in F.scaled_dot_product_attention"),
    "mha_sqrt_d": ("blocks.*.attn.mha:logits", "attention 1/√d in nn.MultiheadAttention"),
    "hidden_lr": ("blocks.*.attn.*weight|blocks.*.fc*.weight", "hidden learning rate not divided by width (Adam)"),
    "embedding_hidden_lr": ("w[tp]e.weight", "input embeddings given the hidden learning rate η/r"),
    "ln_hidden_lr": ("*ln*.weight", "LayerNorm gains given the hidden learning rate η/r"),
    "heads_query_scale": ("blocks.*.attn:logits", "heads ∝ width, query still scaled as for a fixed head count"),
}


class Attention(nn.Module):
    """Causal self-attention: packed qkv + SDPA (``kind="sdpa"``) or ``nn.MultiheadAttention`` (``"mha"``);
    ``scale``: the logit scale's factor relative to 1/√d (1 = torch's default)."""

    def __init__(self, width, heads, kind="sdpa", scale=1.0, seq=SEQ):
        super().__init__()
        self.kind, self.heads, self.scale = kind, heads, float(scale)
        self.head_dim = width // heads
        if kind in ("sdpa", "explicit"):
            self.qkv = nn.Linear(width, 3 * width, bias=False)
            self.proj = nn.Linear(width, width, bias=False)
        else:
            self.mha = nn.MultiheadAttention(width, heads, bias=False, batch_first=True)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        if self.kind == "mha":
            q = x * self.scale if self.scale != 1.0 else x          # q = (c x) W_q: logits × c
            return self.mha(q, x, x, attn_mask=self.mask[:T, :T], need_weights=False)[0]
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        s = None if self.scale == 1.0 else self.scale / math.sqrt(self.head_dim)
        if self.kind == "explicit":                         # nanoGPT's slow path: softmax(q·kᵀ·s) v
            att = (q @ k.transpose(-2, -1)) * (self.scale / math.sqrt(self.head_dim))
            att = att.masked_fill(self.mask[:T, :T], float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=s)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, width, heads, kind, scale, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, kind, scale, seq)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """The plain module (torch's own init, attention logit factor ``scale`` relative to 1/√d)."""

    def __init__(self, width, heads=2, kind="sdpa", scale=1.0, layers=2, vocab=VOCAB, seq=SEQ):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList([Block(width, heads, kind, scale, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.out(self.ln_f(x))


def is_culprit(row, bug):
    """Whether the row name ``row`` (its label's part before " (") is one of ``bug``'s culprits."""
    from fnmatch import fnmatchcase

    return any(fnmatchcase(row.split(" (")[0], pat) for pat in BUGS[bug][0].split("|"))


def _is_hidden(name, p):
    return p.ndim == 2 and not name.startswith(("wte", "wpe", "out"))


def gpt(width, attention="sdpa", heads=2, bug=None, vocab=VOCAB, seq=SEQ):
    """μP GPT by hand (module docstring): ``(module, param_groups)``; ``heads``: a count or "width"."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug must be one of {sorted(BUGS)}, got {bug!r}")
    if bug == "mha_sqrt_d":
        attention = "mha"
    r = width / BASE
    by_width = heads == "width" or bug == "heads_query_scale"
    h = width // HEAD_DIM if by_width else int(heads)
    d, d0 = width // h, (HEAD_DIM if by_width else BASE // h)
    scale = math.sqrt(d0 / d)                               # q·k·√d₀/d = (q·k/√d)·√(d₀/d); 1 at fixed d
    if bug in ("sdpa_sqrt_d", "mha_sqrt_d"):
        scale = 1.0
    elif bug == "heads_query_scale":
        scale = r ** -0.5                                   # the fixed-head-count rule applied to heads ∝ N
    m = GPT(width, h, attention, scale, vocab=vocab, seq=seq)
    with torch.no_grad():
        if bug != "readout_sp":
            m.out.weight.mul_(r ** -0.5)
    groups = []
    for name, p in m.named_parameters():
        hidden = _is_hidden(name, p) or name == "out.weight"
        if bug == "hidden_lr" and _is_hidden(name, p):
            hidden = False
        if bug == "readout_sp" and name == "out.weight":
            hidden = False
        if bug == "embedding_hidden_lr" and name.startswith(("wte", "wpe")):
            hidden = True
        if bug == "ln_hidden_lr" and ".ln" in "." + name and name.endswith("weight"):
            hidden = True
        groups.append({"params": [p], "lr_mult": 1.0 / r if hidden else 1.0, "name": name})
    return m, groups


@torch_data
def gpt_data(batch=16, seed=0, vocab=VOCAB, seq=SEQ):
    """``batch`` random token sequences and their next tokens (integer targets: cross-entropy)."""
    g = torch.Generator().manual_seed(int(seed))
    x = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    return x[:, :-1], x[:, 1:]


@torch_factory
def sdpa_gpt(width):
    """μP GPT, packed qkv + F.scaled_dot_product_attention (module docstring)."""
    return gpt(width, "sdpa")


@torch_factory
def byte_gpt(width):
    """The SDPA μP GPT byte-level: 256 tokens, sequence 32 (data: ``gpt_data(8, vocab=256, seq=32)``)."""
    return gpt(width, "sdpa", vocab=256, seq=32)


@torch_factory
def mha_gpt(width):
    """μP GPT with nn.MultiheadAttention (module docstring)."""
    return gpt(width, "mha")


@torch_factory
def plain_mha_gpt(width):
    """The MHA GPT with torch's init and 1/√d: for ``parameterise(plain_mha_gpt, "muP")``."""
    return GPT(width, 2, "mha")


__all__ = ["GPT", "gpt", "is_culprit", "gpt_data", "sdpa_gpt", "byte_gpt", "mha_gpt", "plain_mha_gpt", "BUGS"]
