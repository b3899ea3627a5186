"""Weights of S independent initialisations, stacked on a leading axis, and reproducible per-init
random streams (init s always draws from its own stream, so chunking never changes the numbers)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checks import generator, positive_int


def init_streams(n_inits, rng=None, seed=None, start=0) -> list:
    """One independent ``Generator`` per initialisation index ``start … start+n_inits−1``.

    The streams are children of one root entropy drawn from ``rng`` (or ``seed``), keyed by the init
    index, so init s gets the same numbers however the inits are chunked."""
    n_inits = positive_int(n_inits, "n_inits")
    root = int(generator(rng, seed).integers(0, 2**63 - 1))
    return streams_from_root(root, range(start, start + n_inits))


def streams_from_root(root: int, indices) -> list:
    return [np.random.Generator(np.random.PCG64(np.random.SeedSequence(root, spawn_key=(int(s),))))
            for s in indices]


@dataclass
class Weights:
    """Stacked weights: ``W[name]`` (S, fan_out, fan_in), ``b[name]`` (S, fan_out) or absent.

    ``Wb[name]`` is the weight used by the *backward* pass (the same array unless the
    decoupled-backward mode of nfd.md §5 gave it an independent copy that receives the same updates).
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


def draw_layer(streams, dense, decoupled=False):
    """Draw W (S, out, in), b (S, out) or None, and an independent backward copy if ``decoupled``,
    each init from its own stream, in the fixed order W, b, W̃."""
    S = len(streams)
    W = np.empty((S, dense.fan_out, dense.fan_in))
    b = np.empty((S, dense.fan_out)) if dense.bias else None
    Wb = np.empty_like(W) if decoupled else None
    for s, g in enumerate(streams):
        W[s] = g.standard_normal((dense.fan_out, dense.fan_in))
        if b is not None:
            b[s] = g.standard_normal(dense.fan_out)
        if Wb is not None:
            Wb[s] = g.standard_normal((dense.fan_out, dense.fan_in))
    W *= dense.std
    if b is not None:
        b *= dense.bias_std
    if Wb is not None:
        Wb *= dense.std
    return W, b, Wb


def init_weights(net, n_inits=1, rng=None, seed=None, decoupled=False, streams=None) -> Weights:
    """Draw the weights of ``n_inits`` independent initialisations of ``net``.

    ``decoupled``: False (ordinary backprop), True (every layer but the read-in gets an independent
    backward copy W̃, nfd.md §5 "GIA"), "hidden" (hidden blocks only) or a list of layer names.
    ``streams`` (list of Generators, one per init) overrides rng/seed.
    """
    if streams is None:
        streams = init_streams(n_inits, rng, seed)
    dec = set(_decoupled_names(net, decoupled))
    W, b, Wb = {}, {}, {}
    for name, dense in net.layers().items():
        w, bb, wb = draw_layer(streams, dense, decoupled=name in dec)
        W[name] = w
        if bb is not None:
            b[name] = bb
        Wb[name] = w if wb is None else wb
    return Weights(W, b, Wb)
