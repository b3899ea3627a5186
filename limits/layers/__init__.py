"""Composable architectures: one module per layer type, each with its infinite-width kernel rule
(NNGP and NTK, NTK parameterisation), its finite apply/backward at given weights and its
serialisation side by side (the pattern of neural-tangents' ``stax``)::

    import numpy as np, limits

    L = limits.layers
    m = limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                      L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0))
    X = np.random.default_rng(0).standard_normal((5, 8, 8, 1))   # (P, H, W, C): 5 images, 8×8, one channel
    k = limits.kernels.kernel(m, X)          # k.nngp, k.ntk (P×P); k.diagnostics["structure"]
    net = m.finite(256)                      # limits.finite.serial.SerialNetwork at width N = 256

(the README's "A layer composition" predicts and checks such a CNN on the digits).

Layers: Dense, Conv (1-D/2-D, strides, "SAME"/"VALID"/"CIRCULAR" as neural-tangents, computed at the output
resolution), Activation(name), Flatten, GlobalAvgPool, AvgPool (window, strides, "VALID"/"SAME"), LayerNorm (over
channels), Attention (infinite-width multi-head self-attention, tied query/key, logits s·⟨k_i, k_j⟩/(C·n_key),
optional positional embedding added), Residual(branch, rho), Identity. docs/theory/layers.rst has the rules.
"""
from __future__ import annotations

from .activation import Activation
from .attention import Attention
from .base import Layer, layer_from_dict
from .conv import Conv
from .dense import Dense
from .layernorm import LayerNorm
from .pooling import AvgPool, Flatten, GlobalAvgPool
from .serial import Identity, Residual, Serial, serial
from .state import Kernel

__all__ = ["Layer", "Dense", "Conv", "Activation", "Flatten", "GlobalAvgPool", "AvgPool", "LayerNorm", "Attention",
           "Residual", "Identity", "Serial", "serial", "Kernel", "layer_from_dict", "load", "as_serial"]


def load(path) -> Serial:
    """A composition from a .json / .toml file (:meth:`Serial.save`)."""
    return Serial.load(path)


def as_serial(obj):
    """The composition ``obj`` describes — a layer, a ``{"serial": [...]}`` mapping or a .json/.toml file
    holding one — or None when it describes something else (a ``limits.Model``)."""
    from pathlib import Path

    if isinstance(obj, Serial):
        return obj
    if isinstance(obj, Layer):
        return serial(obj)
    if isinstance(obj, dict):
        d = obj.get("model", obj) if isinstance(obj.get("model"), dict) else obj
        return Serial.from_dict(obj) if "serial" in d else None      # the whole mapping: no key ignored
    if isinstance(obj, (str, Path)) and Path(obj).suffix.lower() in (".json", ".toml") and Path(obj).is_file():
        try:
            return Serial.load(obj)
        except ValueError:
            return None
    return None
