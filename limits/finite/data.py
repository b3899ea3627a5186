"""Synthetic data (docs/theory/finite.rst §3) and loading of user arrays. Samples are rows.

Image datasets cannot be downloaded here: users pass their own arrays through :func:`load_arrays`
(``.npy``/``.npz``, always ``allow_pickle=False``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..checks import finite_array, generator, positive_float, positive_int
from ..registry import sweep_computation


@sweep_computation
def gaussian_inputs(P, d, rng=None, seed=None, scale=1.0) -> np.ndarray:
    """X (P, d) with i.i.d. entries N(0, scale²)."""
    P, d = positive_int(P, "P"), positive_int(d, "d")
    scale = positive_float(scale, "scale")
    return scale * generator(rng, seed).standard_normal((P, d))


@sweep_computation
def sphere_inputs(P, d, rng=None, seed=None, radius=None) -> np.ndarray:
    """X (P, d) uniform on the sphere of radius ``radius`` (default √d, so x·x/d = 1)."""
    P, d = positive_int(P, "P"), positive_int(d, "d")
    radius = np.sqrt(d) if radius is None else positive_float(radius, "radius")
    Z = generator(rng, seed).standard_normal((P, d))
    return radius * Z / np.linalg.norm(Z, axis=1, keepdims=True)


@sweep_computation
def toy_task(P=20, D=40, rng=None, seed=None, labels="random"):
    """Seed 000 §A.8 toy task: x ∈ R^D with entries N(0, 1), binary labels y ∈ {−1, 1}; P = 20, D = 40.

    The seed does not say how labels depend on x: ``labels="random"`` draws them uniformly and
    independently (default); ``labels="teacher"`` uses ``sign(w*·x)`` with a random teacher w*.
    Returns (X (P, D), Y (P, 1)).
    """
    P, D = positive_int(P, "P"), positive_int(D, "D")
    g = generator(rng, seed)
    X = g.standard_normal((P, D))
    if labels == "random":
        y = np.where(g.random(P) < 0.5, -1.0, 1.0)
    elif labels == "teacher":
        w = g.standard_normal(D)
        s = X @ w
        y = np.where(s >= 0, 1.0, -1.0)
    else:
        raise ValueError(f"labels must be 'random' or 'teacher', got {labels!r}")
    return X, y[:, None]


@sweep_computation
def angle_inputs(P, d, norm=1.0, rng=None, seed=None, kernel_scale=None) -> np.ndarray:
    """Seed 004 Fig. 6(a): P vectors of equal length whose mutual angles are multiples of 2π/P,
    ``x_α = r (cos θ_α e₁ + sin θ_α e₂)``, θ_α = 2πα/P (α = 0..P−1). ``e₁, e₂`` are the first two
    axes, or a random orthonormal pair when ``rng``/``seed`` is given. ``kernel_scale`` sets
    r so that x·x/d equals it (seed 004 uses K⁰ = 0.05); otherwise r = ``norm``."""
    P, d = positive_int(P, "P"), positive_int(d, "d")
    if d < 2:
        raise ValueError(f"d must be >= 2 for angle-spaced inputs, got {d}")
    r = positive_float(norm, "norm") if kernel_scale is None else np.sqrt(positive_float(kernel_scale,
                                                                                          "kernel_scale") * d)
    th = 2 * np.pi * np.arange(P) / P
    if rng is None and seed is None:
        E = np.zeros((2, d))
        E[0, 0] = E[1, 1] = 1.0
    else:
        Q, _ = np.linalg.qr(generator(rng, seed).standard_normal((d, 2)))
        E = Q.T
    return r * (np.cos(th)[:, None] * E[0] + np.sin(th)[:, None] * E[1])


def load_arrays(path, x_key="X", y_key="Y"):
    """Load user data without pickle: ``.npy`` → (X, None); ``.npz`` → (X, Y or None).

    Arrays are checked to be finite float arrays; X must be 2-D (samples are rows); Y, if present,
    1-D (made a column) or 2-D with as many rows as X."""
    from ..readfile import load_arrays as read_arrays

    path = Path(path)
    if path.suffix not in (".npy", ".npz"):
        raise ValueError(f"path must end in .npy or .npz, got {path.suffix!r}")
    arrays = dict(read_arrays(path, "path"))         # bounded and never unpickled (limits.readfile)
    if "" in arrays:
        X, Y = arrays[""], None
    else:
        if x_key not in arrays:
            raise ValueError(f"x_key: {x_key!r} not in {path.name} (has {sorted(arrays)})")
        X, Y = arrays[x_key], arrays.get(y_key)
    X = finite_array(X, "X", ndim=2)
    if Y is not None:
        Y = finite_array(Y, "Y")
        if Y.ndim == 1:
            Y = Y[:, None]
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise ValueError(f"Y must have {X.shape[0]} rows, got shape {Y.shape}")
    return X, Y
