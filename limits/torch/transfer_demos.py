"""Demonstration networks and tasks for :func:`limits.torch.transfer` (tests, gallery, README):

* ``digits_mlp(width)`` on ``digits_data()`` — scikit-learn's bundled 8×8 digits (1797 images, no download),
  Linear(64, N) → ReLU → Linear(N, N) → ReLU → Linear(N, 10), cross-entropy;
* ``byte_transformer(width)`` on ``text_data()`` — a byte-level causal transformer (2 pre-LN blocks, 4 heads,
  feed-forward 2N) predicting the next byte of ``transfer_text.txt``, an original essay shipped with the package;
* ``residual_mlp(width, depth)`` on ``digits_data()`` — Linear(64, N), ``depth`` blocks h + W₂ relu(W₁ h) (no
  normalisation), ReLU, Linear(N, 10): the depth-transfer demo (``parameterise(…, "depth-muP", depths=…)``).

    limits transfer --factory limits.torch.transfer_demos:digits_mlp \\
        --data limits.torch.transfer_demos:digits_data --param muP --widths 64 128 256 --log2-lrs -12 -4 1
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..registry import torch_data, torch_factory

TEXT = Path(__file__).with_name("transfer_text.txt")
VOCAB = 256
SEQ = 32


# ---------------------------------------------------------------------- digits
@torch_factory
def digits_mlp(width):
    """Linear(64, N) → ReLU → Linear(N, N) → ReLU → Linear(N, 10)."""
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


@torch_data
def digits_data(n_test=397, seed=0):
    """{"train": (X, y), "test": (X, y)}: the 8×8 digits, pixels standardised over the training rows, a seeded
    split (1400 train / 397 test by default); y are class indices."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:       # pragma: no cover — depends on the install
        raise ValueError("digits_data needs scikit-learn (python -m pip install scikit-learn)") from None
    d = load_digits()
    idx = np.random.default_rng(seed).permutation(len(d.target))
    te, tr = idx[:n_test], idx[n_test:]
    X = d.data.astype(np.float32)
    mu, sd = X[tr].mean(0), X[tr].std(0) + 1.0
    X = (X - mu) / sd
    y = d.target.astype(np.int64)
    return {"train": (torch.as_tensor(X[tr]), torch.as_tensor(y[tr])),
            "test": (torch.as_tensor(X[te]), torch.as_tensor(y[te]))}


class Block(nn.Module):
    """h + W₂ relu(W₁ h) (the branch ends in ``fc2``)."""

    def __init__(self, width):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)

    def forward(self, h):
        return h + self.fc2(torch.relu(self.fc1(h)))


class ResidualMLP(nn.Module):
    def __init__(self, width, depth, d_in=64, d_out=10):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.out = nn.Linear(width, d_out)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(torch.relu(h))


@torch_factory
def residual_mlp(width, depth):
    """:class:`ResidualMLP`: Linear(64, N), ``depth`` residual blocks, ReLU, Linear(N, 10)."""
    return ResidualMLP(width, depth)


# ---------------------------------------------------------------------- bytes
class CausalBlock(nn.Module):
    """Pre-LN transformer block: x + attn(LN(x)) (causal, windows of ``seq`` positions), x + W₂ gelu(W₁ LN(x))."""

    def __init__(self, width, heads, seq=SEQ):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), persistent=False)

    def forward(self, x):                   # x: (B, seq, N) — windows of exactly ``seq`` positions
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class ByteTransformer(nn.Module):
    """Byte embedding + learned positions → ``layers`` causal blocks → LayerNorm → Linear(N, 256): next-byte
    logits at every position (B, T, 256)."""

    def __init__(self, width, layers=2, heads=4, seq=SEQ):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, width)
        self.pos = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(CausalBlock(width, heads, seq) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.out = nn.Linear(width, VOCAB)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for b in self.blocks:
            h = b(h)
        return self.out(self.ln(h))


@torch_factory
def byte_transformer(width):
    """:class:`ByteTransformer` at this width (2 blocks, 4 heads)."""
    return ByteTransformer(width)


def text_bytes() -> np.ndarray:
    """The shipped text as uint8 bytes."""
    return np.frombuffer(TEXT.read_bytes(), dtype=np.uint8)


@torch_data
def text_data(n_train=512, n_test=128, seq=SEQ, seed=0):
    """{"train": (X, Y), "test": (X, Y)}: ``seq``-byte windows X and the next bytes Y (shifted by one), train
    windows from the first 90 % of the text and test windows from the rest, at seeded random offsets."""
    b = text_bytes().astype(np.int64)
    cut = int(0.9 * b.size)
    rng = np.random.default_rng(seed)

    def windows(lo, hi, n):
        starts = rng.integers(lo, hi - seq - 1, size=n)
        w = np.stack([b[s:s + seq + 1] for s in starts])
        return torch.as_tensor(w[:, :-1]), torch.as_tensor(w[:, 1:])

    return {"train": windows(0, cut, n_train), "test": windows(cut, b.size, n_test)}


__all__ = ["digits_mlp", "digits_data", "residual_mlp", "ResidualMLP", "Block", "byte_transformer", "ByteTransformer",
           "CausalBlock", "text_data", "text_bytes"]
