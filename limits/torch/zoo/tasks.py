"""Tasks of our own for zoo models (no download): inputs shaped as the models' first argument.

* :func:`next_bytes` — byte-level next-token prediction on ``limits/torch/transfer_text.txt`` (an original essay
  shipped with the package): ``input_ids`` (B, T) and the next bytes (B, T), for causal LMs (vocabulary 256);
* :func:`masked_bytes` — the same windows with a fraction of the bytes replaced by the mask id 256, targets the
  original bytes at every position: for encoders (BERT) and encoder–decoders (BART, whose decoder reads the
  shifted input), vocabulary 257;
* :func:`digit_images` — scikit-learn's bundled 8×8 digits as ``pixel_values`` (B, 1, 8, 8), standardised over
  the training rows, class indices as targets (ViT, ConvNeXt).

Each returns {"train": (X, Y), "test": (X, Y)} from a seeded split, like :mod:`limits.torch.transfer_demos`.
"""
from __future__ import annotations

import numpy as np

MASK_ID = 256
TASKS = ("next_bytes", "masked_bytes", "digit_images")


def next_bytes(n_train=256, n_test=64, seq=16, seed=0):
    """Byte windows and their next bytes (module docstring)."""
    from ..transfer_demos import text_data

    return text_data(n_train=n_train, n_test=n_test, seq=seq, seed=seed)


def masked_bytes(n_train=256, n_test=64, seq=16, seed=0, rate=0.25):
    """Byte windows with a fraction ``rate`` of positions set to :data:`MASK_ID`; targets: the original bytes."""
    import torch

    if not 0 < rate < 1:
        raise ValueError(f"rate must lie in (0, 1), got {rate}")
    d = next_bytes(n_train, n_test, seq, seed)
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(7,)))
    out = {}
    for k, (X, _) in d.items():
        mask = torch.as_tensor(rng.random(tuple(X.shape)) < rate)
        out[k] = (X.masked_fill(mask, MASK_ID), X.clone())
    return out


def digit_images(n_test=397, seed=0):
    """The 8×8 digits as (B, 1, 8, 8) images and class indices (module docstring)."""
    from ..transfer_demos import digits_data

    d = digits_data(n_test=n_test, seed=seed)
    return {k: (X.reshape(-1, 1, 8, 8).double(), y) for k, (X, y) in d.items()}


def task(name, **kw):
    """One of :data:`TASKS` by name."""
    if name not in TASKS:
        raise ValueError(f"task {name!r}: known {', '.join(TASKS)}")
    return globals()[name](**kw)


__all__ = ["next_bytes", "masked_bytes", "digit_images", "task", "TASKS", "MASK_ID"]
