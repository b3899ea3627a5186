"""Weights of S independent initialisations, stacked on a leading axis, and reproducible per-init
random streams (init s always draws from its own stream, so chunking never changes the numbers)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checks import generator, positive_int


_JUMP = 0x9E3779B97F4A7C15F39CC0605CEDC835
_MASK128 = (1 << 128) - 1


class Streams:
    """Reproducible per-init random streams, cheap to position.

    Init index s, layer j draws from one PCG64 stream (seeded by ``SeedSequence(root)``) advanced by
    ``(s·2^20 + j)·J mod 2^128`` with J = ⌊(φ−1)·2^128⌋ odd (the jump numpy's ``PCG64.jumped`` uses;
    power-of-two jumps would give correlated PCG streams). Distinct (s, j) are ≥ ~2^77 draws apart,
    so init s gets the same numbers however the inits are chunked, and positioning costs a state
    reset, not a new generator. ``streams[a:b]`` selects a sub-range of init indices.
    """

    def __init__(self, root: int, indices):
        self.root = int(root)
        self.indices = np.asarray(list(indices), dtype=np.int64)
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= 2**31):
            raise ValueError("init indices must lie in [0, 2^31)")
        self._bg = np.random.PCG64(np.random.SeedSequence(self.root))
        self._state0 = self._bg.state
        self._gen = np.random.Generator(self._bg)

    def __len__(self):
        return int(self.indices.size)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return Streams(self.root, self.indices[item])
        raise TypeError("Streams can only be sliced")

    def gen(self, k: int, j: int = 0) -> np.random.Generator:
        """Generator positioned at the start of substream (init ``indices[k]``, layer ``j``); consume
        it before asking for the next one (the generator object is shared)."""
        self._bg.state = self._state0
        if not 0 <= j < 2**20:
            raise ValueError("layer index j must lie in [0, 2^20)")
        self._bg.advance((((int(self.indices[k]) << 20) + int(j)) * _JUMP) & _MASK128)
        return self._gen


def init_streams(n_inits, rng=None, seed=None, start=0) -> Streams:
    """Streams of inits ``start … start+n_inits−1`` with a root drawn from ``rng`` (or ``seed``)."""
    n_inits = positive_int(n_inits, "n_inits")
    return streams_from_root(root_seed(rng, seed), range(start, start + n_inits))


def root_seed(rng=None, seed=None) -> int:
    """The one integer that fixes every init's stream (drawn from ``rng`` or built from ``seed``)."""
    return int(generator(rng, seed).integers(0, 2**63 - 1))


def streams_from_root(root: int, indices) -> Streams:
    return Streams(root, indices)


@dataclass
class Weights:
    """Stacked weights: ``W[name]`` (S, fan_out, fan_in), ``b[name]`` (S, fan_out) or absent.

    ``Wb[name]`` is the weight used by the *backward* pass (the same array unless the
    decoupled-backward mode of docs/theory/nfd.rst §5 gave it an independent copy that receives the same updates).
    """

    W: dict
    b: dict
    Wb: dict = field(default_factory=dict)

    @property
    def n_inits(self) -> int:
        return next(iter(self.W.values())).shape[0]

    @property
    def decoupled(self) -> tuple:
        return tuple(k for k in self.Wb if self.Wb[k] is not self.W[k])

    def backward_weight(self, name):
        return self.Wb.get(name, self.W[name])

    def copy(self) -> "Weights":
        W = {k: v.copy() for k, v in self.W.items()}
        b = {k: v.copy() for k, v in self.b.items()}
        Wb = {k: (W[k] if v is self.W[k] else v.copy()) for k, v in self.Wb.items()}
        return Weights(W, b, Wb)

    def select(self, idx) -> "Weights":
        """Sub-batch of initialisations (``idx`` slice or index array)."""
        W = {k: v[idx] for k, v in self.W.items()}
        b = {k: v[idx] for k, v in self.b.items()}
        Wb = {k: (W[k] if v is self.W[k] else v[idx]) for k, v in self.Wb.items()}
        return Weights(W, b, Wb)

    def arrays(self) -> dict:
        """Flat dict of all arrays ('W:in', 'b:in', 'Wb:1.1', …) — for saving."""
        out = {f"W:{k}": v for k, v in self.W.items()}
        out.update({f"b:{k}": v for k, v in self.b.items()})
        out.update({f"Wb:{k}": v for k, v in self.Wb.items() if v is not self.W[k]})
        return out


def _decoupled_names(net, decoupled) -> tuple:
    names = net.layer_names()
    if decoupled in (False, None):
        return ()
    if decoupled is True:
        return tuple(n for n in names if n != "in")
    if decoupled == "hidden":
        return tuple(n for n in names if n not in ("in", "out"))
    dec = tuple(decoupled)
    bad = [n for n in dec if n not in names]
    if bad:
        raise ValueError(f"decoupled: unknown layer names {bad}; layers are {names}")
    return dec


def draw_layer(streams, j, dense, decoupled=False):
    """Draw W (S, out, in), b (S, out) or None, and an independent backward copy if ``decoupled``;
    init k from substream (k, j), in the fixed order W, b, W̃."""
    S = len(streams)
    W = np.empty((S, dense.fan_out, dense.fan_in))
    b = np.empty((S, dense.fan_out)) if dense.bias else None
    Wb = np.empty_like(W) if decoupled else None
    for k in range(S):
        g = streams.gen(k, j)
        g.standard_normal(out=W[k])
        if b is not None:
            g.standard_normal(out=b[k])
        if Wb is not None:
            g.standard_normal(out=Wb[k])
    W *= dense.std
    if b is not None:
        b *= dense.bias_std
    if Wb is not None:
        Wb *= dense.std
    return W, b, Wb


def init_weights(net, n_inits=1, rng=None, seed=None, decoupled=False, streams=None) -> Weights:
    """Draw the weights of ``n_inits`` independent initialisations of ``net``.

    ``decoupled``: False (ordinary backprop), True (every layer but the read-in gets an independent
    backward copy W̃, docs/theory/nfd.rst §5 "GIA"), "hidden" (hidden blocks only) or a list of layer names.
    ``streams`` (a :class:`Streams`, e.g. ``init_streams(10, seed=0)[3:5]``) overrides rng/seed.
    """
    if streams is None:
        streams = init_streams(n_inits, rng, seed)
    elif not isinstance(streams, Streams):
        raise ValueError("streams must be a limits.finite.weights.Streams")
    dec = set(_decoupled_names(net, decoupled))
    W, b, Wb = {}, {}, {}
    for j, (name, dense) in enumerate(net.layers().items()):
        w, bb, wb = draw_layer(streams, j, dense, decoupled=name in dec)
        W[name] = w
        if bb is not None:
            b[name] = bb
        Wb[name] = w if wb is None else wb
    return Weights(W, b, Wb)
