"""Linear (and nonlinear) predictive-coding network description shared by every pc routine.

General energy (docs/theory/pc.rst §1, seed 001 Eq. 1 / 26, seed 003 Eq. S.10)::

    F(z) = Σ_{l=1}^{L} (λ_l/2) ‖ z_l − a_l W_l φ(z_{l−1}) − τ_l z_{l−n} − c_l ‖²   (+ (α/2) Σ_hidden ‖z_l‖²)

with ``z_0 = x`` (supervised) and ``z_L = y`` clamped. Conventions pinned here and used everywhere:

* prediction error ``ε_l := z_l − a_l W_l φ(z_{l−1}) − τ_l z_{l−n} − c_l`` (activity minus prediction);
* residual ``r := y − f(x)`` (target minus forward output);
* batches: samples are rows, energies are averaged with ``1/B`` (so ``F = (1/B) Σ_i Σ_l (λ_l/2)‖ε_{l,i}‖²``,
  identical to the ``1/(2B)`` of seed 001 Eq. 31 and the ``1/(2P)`` of seed 000 Eq. 2).

``skips``: ``None`` (MLP), the string ``"1-skip"`` (τ_l = 1 for l = 2..H, seed 001 Eq. 24), an
integer ``n`` (n-skip, seed 001 Eq. 26: τ_l = 1 for l = n+1..H, source ``z_{l−n}``) or a length-L
sequence of τ_l ∈ {0, 1} (source ``z_{l−1}``; τ_L may be 1 when d_out = N).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array


@dataclass(frozen=True)
class Net:
    """Validated network: weights ``W[l-1]`` (N_l × N_{l-1}), multipliers ``a``, skip coefficients
    ``tau`` with sources ``src`` (layer index each skip reads from), layer weights ``lam``, biases."""

    W: tuple
    a: np.ndarray
    tau: np.ndarray
    src: np.ndarray
    lam: np.ndarray
    bias: tuple | None

    @property
    def L(self) -> int:
        return len(self.W)

    @property
    def H(self) -> int:
        return len(self.W) - 1

    @property
    def dims(self) -> list[int]:
        return [self.W[0].shape[1]] + [w.shape[0] for w in self.W]

    @property
    def d_in(self) -> int:
        return self.W[0].shape[1]

    @property
    def d_out(self) -> int:
        return self.W[-1].shape[0]

    @property
    def bandwidth(self) -> int:
        """Block bandwidth of the activity Hessian (1 = block tridiagonal)."""
        bw = 1
        for l in range(1, self.L + 1):
            if self.tau[l - 1] != 0:
                bw = max(bw, l - int(self.src[l - 1]))
        return bw

    def layer_map(self, l: int) -> np.ndarray:
        """Dense linear map ``B_l = a_l W_l + τ_l I`` for a 1-skip chain (only when src = l−1)."""
        B = self.a[l - 1] * self.W[l - 1]
        if self.tau[l - 1] != 0:
            if self.src[l - 1] != l - 1:
                raise ValueError("layer_map is defined only for skips from the previous layer")
            B = B + self.tau[l - 1] * np.eye(B.shape[0])
        return B


def _weights(weights, check_finite=True) -> tuple:
    if isinstance(weights, np.ndarray) and weights.ndim == 2:
        weights = [weights]
    try:
        ws = list(weights)
    except TypeError:
        raise ValueError("weights must be a sequence of 2-D arrays W_1 (N×d_in), …, W_L (d_out×N)") from None
    if len(ws) == 0:
        raise ValueError("weights must contain at least one matrix")
    out = []
    for i, w in enumerate(ws):
        if check_finite:
            w = finite_array(w, f"weights[{i}]")
        else:                       # caller checks finiteness itself (fused into its first pass)
            try:
                w = np.asarray(w, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"weights[{i}] must be a numeric array ({exc})") from None
        if w.ndim != 2:
            raise ValueError(f"weights[{i}] must be 2-dimensional, got shape {w.shape}")
        if 0 in w.shape:
            raise ValueError(f"weights[{i}] has shape {w.shape}: every layer width must be >= 1")
        out.append(w)
    for i in range(1, len(out)):
        if out[i].shape[1] != out[i - 1].shape[0]:
            raise ValueError(
                f"weights[{i}] has shape {out[i].shape} but weights[{i - 1}] has {out[i - 1].shape[0]} "
                f"rows: W_{i + 1} must have {out[i - 1].shape[0]} columns")
    return tuple(out)


def per_layer(value, L, name, default, positive=False):
    """A scalar or length-L sequence as a length-L float64 array (``default`` for None), or ``ValueError`` naming ``name``."""
    if value is None:
        return np.full(L, float(default))
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(L, float(arr))
    if arr.shape != (L,):
        raise ValueError(f"{name} must be a scalar or a length-{L} sequence (one per layer), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if positive and np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0 for every layer, got {arr.tolist()}")
    return arr


def _skips(skips, L):
    tau = np.zeros(L)
    src = np.arange(L)  # layer l (1-based) reads its skip from l-1 (0-based index = l-1)
    if skips is None or skips is False:
        return tau, src
    H = L - 1
    if isinstance(skips, str):
        s = skips.lower().replace("_", "-")
        if s in ("1-skip", "resnet", "residual"):
            skips = 1
        elif s in ("none", "mlp"):
            return tau, src
        elif s.endswith("-skip") and s[:-5].isdigit():
            skips = int(s[:-5])
        else:
            raise ValueError(f"skips must be None, '1-skip', 'n-skip', an int n or a list of τ_l; got {skips!r}")
    if isinstance(skips, (int, np.integer)) and not isinstance(skips, bool):
        n = int(skips)
        if n < 1:
            raise ValueError(f"skips (skip length n) must be >= 1, got {n}")
        for l in range(n + 1, H + 1):
            tau[l - 1] = 1.0
            src[l - 1] = l - n
        return tau, src
    arr = np.asarray(skips, dtype=np.float64)
    if arr.shape != (L,):
        raise ValueError(f"skips must have length L = {L} (τ_1..τ_L), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("skips contains NaN or inf")
    return arr.copy(), src


def make_net(weights, multipliers=None, skips=None, layer_weights=None, biases=None, check_finite=True) -> Net:
    """Validate and bundle the network description (raises ``ValueError`` naming the argument).
    ``check_finite=False`` skips only the NaN/inf scan of the weights, for callers that detect
    non-finite weights in their own first pass over them (:func:`limits.pc.equilibrium_energy`)."""
    W = _weights(weights, check_finite)
    L = len(W)
    a = per_layer(multipliers, L, "multipliers", 1.0)
    lam = per_layer(layer_weights, L, "layer_weights", 1.0, positive=True)
    tau, src = _skips(skips, L)
    dims = [W[0].shape[1]] + [w.shape[0] for w in W]
    for l in range(1, L + 1):
        if tau[l - 1] != 0 and dims[l] != dims[src[l - 1]]:
            raise ValueError(f"skips: layer {l} has width {dims[l]} but its skip source z_{src[l - 1]} has "
                             f"width {dims[src[l - 1]]}; identity skips need equal widths")
    bias = None
    if biases is not None:
        bl = list(biases)
        if len(bl) != L:
            raise ValueError(f"biases must have one vector per layer (L = {L}), got {len(bl)}")
        bias = []
        for l, b in enumerate(bl, start=1):
            b = np.zeros(dims[l]) if b is None else finite_array(b, f"biases[{l - 1}]", ndim=1)
            if b.shape != (dims[l],):
                raise ValueError(f"biases[{l - 1}] must have length {dims[l]}, got {b.shape}")
            bias.append(b)
        bias = tuple(bias)
    return Net(W, a, tau, src, lam, bias)


def check_data(net: Net, X, Y=None, x_name="X", y_name="Y"):
    """Validate ``X`` (B × d_in) and ``Y`` (B × d_out); 1-D arrays are promoted to a single row
    (or to a column when the layer has width 1)."""
    X = finite_array(X, x_name)
    if X.ndim == 1:
        X = X[None, :] if X.shape[0] == net.d_in else X[:, None]
    if X.ndim != 2 or X.shape[1] != net.d_in:
        raise ValueError(f"{x_name} must be B×d_in with d_in = {net.d_in} (columns of W_1), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{x_name} has no samples (batch size B = 0); pass at least one row")
    if Y is None:
        return X, None
    Y = finite_array(Y, y_name)
    if Y.ndim == 1:
        Y = Y[None, :] if (Y.shape[0] == net.d_out and X.shape[0] == 1) else Y[:, None]
    if Y.ndim != 2 or Y.shape[1] != net.d_out:
        raise ValueError(f"{y_name} must be B×d_out with d_out = {net.d_out} (rows of W_L), got shape {Y.shape}")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"{x_name} has {X.shape[0]} samples (rows) but {y_name} has {Y.shape[0]}")
    return X, Y


def forward(net: Net, X, phi=None) -> list[np.ndarray]:
    """Forward pass ``h_0 = x``, ``h_l = a_l W_l φ(h_{l−1}) + τ_l h_{l−n} + c_l`` (φ only on hidden
    layers; ``h_0`` enters linearly). Returns ``[h_0, …, h_L]`` (rows = samples)."""
    hs = [X]
    for l in range(1, net.L + 1):
        prev = hs[l - 1] if (phi is None or l == 1) else phi(hs[l - 1])
        h = net.a[l - 1] * (prev @ net.W[l - 1].T)
        if net.tau[l - 1] != 0:
            h = h + net.tau[l - 1] * hs[net.src[l - 1]]
        if net.bias is not None:
            h = h + net.bias[l - 1]
        hs.append(h)
    return hs


def output_jacobians(net: Net) -> list[np.ndarray]:
    """``G_l = ∂z_L/∂ε_l`` (d_out × N_l) of the linear network, l = 0..L (``G_L = I``; ``G_0`` is the
    end-to-end map). Backward accumulation, O(L N² d_out):
    ``G_l = a_{l+1} G_{l+1} W_{l+1} + Σ_{m: src_m = l} τ_m G_m``. For a chain ``G_l = B_{L:l+1}``."""
    L = net.L
    G: list = [None] * (L + 1)
    G[L] = np.eye(net.d_out)
    for l in range(L - 1, -1, -1):
        g = net.a[l] * (G[l + 1] @ net.W[l])
        for m in range(l + 1, L + 1):
            if net.tau[m - 1] != 0 and net.src[m - 1] == l:
                g = g + net.tau[m - 1] * G[m]
        G[l] = g
    return G


def with_dummy_latents(weights, multipliers=None, input=False, output=True):
    """Add "dummy" end latents (seed 001 §A.2.1): ``F_0 = ½‖x − z_0‖²`` and/or ``F_L = ½‖y − z_L‖²``
    are identity layers prepended / appended to the chain, so the old end activities become free
    (the output dummy adds a diagonal block ``2I`` to H_z). Returns ``(weights, multipliers)``."""
    W = [np.asarray(w, float) for w in weights]
    a = [1.0] * len(W) if multipliers is None else [float(v) for v in np.broadcast_to(multipliers, (len(W),))]
    if input:
        W = [np.eye(W[0].shape[1])] + W
        a = [1.0] + a
    if output:
        W = W + [np.eye(W[-1].shape[0])]
        a = a + [1.0]
    return W, np.array(a)


def phi_pair(activation):
    """The activation object of ``activation`` (a name or an object with ``phi``), or None for linear."""
    if activation is None:
        return None
    import limits

    act = limits.activation(activation) if not hasattr(activation, "phi") else activation
    if getattr(act, "name", None) == "linear":
        return None
    return act


def predictions(net: Net, zs, phi):
    """Predictions ``μ_l = a_l W_l φ(z_{l−1}) + τ_l z_{src} + c_l`` for l = 1..L."""
    mus = []
    for l in range(1, net.L + 1):
        prev = zs[l - 1] if (phi is None or l == 1) else phi.phi(zs[l - 1])
        mu = net.a[l - 1] * (prev @ net.W[l - 1].T)
        if net.tau[l - 1] != 0:
            mu = mu + net.tau[l - 1] * zs[net.src[l - 1]]
        if net.bias is not None:
            mu = mu + net.bias[l - 1]
        mus.append(mu)
    return mus


def skips_arg(net):
    """Reconstruct a skips argument equivalent to ``net`` (for re-validation by helpers)."""
    if not np.any(net.tau):
        return None
    if np.all(net.src == np.arange(net.L)):
        return net.tau
    n = {l - int(s) for l, s in zip(range(1, net.L + 1), net.src) if net.tau[l - 1]}
    if len(n) == 1:
        return n.pop()
    raise ValueError("mixed skip lengths are not supported here")
