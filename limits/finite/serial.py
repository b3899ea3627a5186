"""Finite networks of compositions (``limits.serial``) at width N — the one place a composition becomes numbers.

Every Dense / Conv / Attention layer gets N output channels (Attention: N key and N value channels per
head), the last one ``d_out``; weights are raw N(0, 1) (NTK parameterisation: each layer scales by
σ_w/√fan_in itself). Init s draws from its own stream (``SeedSequence(seed).spawn``), so results never
depend on chunking. Per init::

    f = forward pass of the layers' ``apply`` (leading axes (S, P))
    NNGP observable: E[f fᵀ | last hidden a] = σ_w² a aᵀ/C + σ_b² when the read-out is Dense (same mean as
                     f fᵀ, O(N^-1/2) spread), else f fᵀ/d_out
    NTK:             Σ_θ ∂f₀(x)/∂θ ∂f₀(x')/∂θ — the exact parameter-gradient inner product, from one hand-written
                     backward pass per layer (each returns its weights' share of Θ)

Cost per init: the forward + backward pass, O(P·N²·F·S) for conv layers (F the filter size) plus O(P²·S²·N) for the Θ grams.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import parallel
from ..checks import positive_int
from ._blas import limit_blas


@dataclass(frozen=True)
class SerialNetwork:
    """A composition at width ``width`` with ``d_out`` outputs (module docstring)."""

    model: object
    width: int
    d_out: int = 1

    def __post_init__(self):
        object.__setattr__(self, "width", positive_int(self.width, "width"))
        object.__setattr__(self, "d_out", positive_int(self.d_out, "d_out"))

    def plan(self, in_shape):
        return self.model.plan(tuple(in_shape), self.width, self.d_out)

    def init_weights(self, in_shape, n_inits, seed=0, streams=None):
        """Raw N(0, 1) weights, per layer a dict of ``(S, *shape)`` arrays; init s from its own stream."""
        gens = streams if streams is not None else [np.random.default_rng(s)
                                                    for s in np.random.SeedSequence(int(seed)).spawn(n_inits)]
        return self.model.init(self.plan(in_shape), lambda shape: np.stack([g.standard_normal(shape) for g in gens]))

    def forward(self, params, X):
        """f (S, P, d_out) and the per-layer caches."""
        S = next(iter(leaves(params)), np.zeros((1,))).shape[0]
        x = np.broadcast_to(np.asarray(X, dtype=np.float64)[None], (S,) + np.shape(X))
        return self.model.apply(params, np.ascontiguousarray(x))

    @limit_blas
    def kernels(self, X, n_inits, seed=0, chunk=8, ntk=True, n_jobs=None):
        """Per init: the NNGP observable (S, P, P) and the empirical NTK of output 0 (S, P, P) (module docstring).
        ``n_jobs``: threads over the chunks of inits (:mod:`limits.parallel`; None: the current count), each
        holding ``chunk`` inits in memory; the numbers are the same for any value."""
        X = np.asarray(X, dtype=np.float64)
        n_inits = positive_int(n_inits, "n_inits")
        gens = [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(n_inits)]
        layers = self.model.layers
        rb = bool(layers) and type(layers[-1]).__name__ == "Dense"

        def one(st):                    # a chunk of inits (own streams): any thread (limits.parallel)
            params = self.init_weights(X.shape[1:], None, streams=gens[st:st + chunk])
            f, caches = self.forward(params, X)
            if f.ndim != 3:
                raise ValueError(f"the composition's output has shape {f.shape[2:]} per input; end it with "
                                 "Flatten() or GlobalAvgPool() and a Dense read-out")
            if rb:
                a, last = caches[-1], layers[-1]
                K = last.sigma_w2 * np.matmul(a, a.transpose(0, 2, 1)) / a.shape[-1] + last.sigma_b2
            else:
                K = np.matmul(f, f.transpose(0, 2, 1)) / f.shape[-1]
            th = None
            if ntk:
                g = np.zeros_like(f)
                g[..., 0] = 1.0
                _, th = self.model.backward(params, caches, g)
            return K, th
        out = parallel.map_blocks(one, range(0, n_inits, chunk), n_jobs)
        return np.concatenate([k for k, _ in out]), (np.concatenate([t for _, t in out]) if ntk else None)


    @limit_blas
    def train_gd(self, X, Y, steps, lr, n_inits, seed=0, X_test=None, reduction="sum", chunk=8):
        """Full-batch gradient descent on ℓ = c Σ_μ ½‖f(x_μ) − y_μ‖² (c = 1 "sum", 1/P "mean") of every raw
        weight, θ ← θ − η ∂ℓ/∂θ, for ``n_inits`` initialisations; returns (f0 (S, P, d), f0_test (S, Pt, d),
        f_test (len(steps), S, Pt, d)) with f_test at the requested step counts."""
        X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
        Y = Y[:, None] if Y.ndim == 1 else Y
        Xs = X if X_test is None else np.asarray(X_test, dtype=np.float64)
        steps = [int(k) for k in np.atleast_1d(steps)]
        c = 1.0 if reduction == "sum" else 1.0 / X.shape[0]
        net = SerialNetwork(self.model, self.width, Y.shape[1])
        gens = [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(n_inits)]
        out0, outs0, outs = [], [], []
        for st in range(0, n_inits, chunk):
            params = net.init_weights(X.shape[1:], None, streams=gens[st:st + chunk])
            rec = {}
            f0 = fs0 = None
            for k in range(max(steps) + 1):
                if k in steps or k == 0:
                    fs = net.forward(params, Xs)[0]
                    if k == 0:
                        fs0 = fs
                    rec[k] = fs
                if k == max(steps):
                    break
                f, caches = net.forward(params, X)
                if k == 0:
                    f0 = f
                _, grads = self.model.vjp(params, caches, c * (f - Y[None]))
                _sgd(params, grads, lr)
            out0.append(f0)
            outs0.append(fs0)
            outs.append(np.stack([rec[k] for k in steps]))
        return np.concatenate(out0), np.concatenate(outs0), np.concatenate(outs, axis=1)


def _sgd(params, grads, lr):
    for p, g in zip(params, grads):
        if isinstance(p, dict):
            for key, v in g.items():
                p[key] -= lr * v
        else:
            _sgd(p, g, lr)


def leaves(params):
    """Every weight array of a nested parameter list (dicts, Residual lists), in order."""
    for p in params:
        if isinstance(p, dict):
            yield from p.values()
        else:
            yield from leaves(p)


def _layer_floats(layer, in_shape, out_shape, n, P):
    """(floats, what) one init of ``layer`` holds at its peak, from shapes (:func:`init_bytes`)."""
    e_in, e_out = P * float(np.prod(in_shape)), P * float(np.prod(out_shape))
    params = sum(float(np.prod(s)) for s in layer.param_shapes(in_shape, n).values()) if layer.parametric else 0.0
    floats, what = e_in + 3 * e_out + 2 * params, f"{P} inputs × {int(np.prod(out_shape))} outputs"
    name = type(layer).__name__
    if name == "Attention":
        T, H = float(np.prod(in_shape[:-1])), layer.n_heads
        floats += P * H * (8 * T * T + 6 * T * n)           # A, logits, dA, the softmax backward (twice); keys, values
        floats += 3 * P * P * T * T                          # the NTK's pair Grams over positions
        what = f"{P} inputs × {H} head(s) × {int(T)}² attention weights and the NTK's {P}² × {int(T)}² position pairs"
    elif name == "Conv":
        floats += 3 * P * float(np.prod(out_shape[:-1])) * float(np.prod(layer.filter_shape)) * in_shape[-1]
        what = f"{P} inputs × {int(np.prod(out_shape[:-1]))} positions × {int(np.prod(layer.filter_shape))}-tap patches"
    return floats, what


def init_bytes(model, in_shape, P, width):
    """Bytes one initialisation of ``model`` at ``width`` allocates in :meth:`SerialNetwork.kernels` (forward caches
    of every layer, the backward's temporaries, the weights and their gradients), from shapes alone — an estimate
    (1.05–1.95 × the peak tracemalloc measures on 18 compositions: benchmarks/finite_memory.py); and the costliest layer ``(index, description)``."""
    total, worst = 0.0, (0.0, "", -1)

    def walk(plan, where):
        nonlocal total, worst
        for i, (layer, sin, sout, n) in enumerate(plan):
            if type(layer).__name__ == "Residual":
                walk(n, f"{where}{i}.")
                total += 2 * P * float(np.prod(sin))
                continue
            f, what = _layer_floats(layer, sin, sout, n, P)
            total += f
            if f > worst[0]:
                worst = (f, what, f"{where}{i} ({type(layer).__name__})")
    walk(SerialNetwork(model, width).plan(in_shape), "")
    return 8.0 * total, worst[2], worst[1]


def check_memory(model, in_shape, P, widths, chunk=8, what="check"):
    """Inits per chunk for :meth:`SerialNetwork.kernels` at the largest of ``widths`` that fit in half the available
    memory (at most ``chunk``); ``ValueError`` with the estimate when one init does not fit — before anything is
    allocated."""
    from ..memory import available_memory
    from ..readfile import human

    per, layer, why = init_bytes(model, in_shape, P, max(widths))
    avail = available_memory()
    if avail is None:
        return chunk
    limit = 0.5 * avail
    if per > limit:
        raise ValueError(f"{what}: one finite network of this composition at width {max(widths)} needs ≈ {human(per)} "
                         f"(costliest: layer {layer}, {why}), more than half the available memory "
                         f"({human(avail)}); use fewer inputs or positions, or smaller --widths")
    return int(max(1, min(chunk, limit // per)))


def kernel_samples(model, X1, X2, widths, inits, seed, kinds=("nngp", "ntk"), chunk=8, progress=None):
    """For ``limits.check``: per kind {"nngp", "ntk"} the theory-entry index pairs and, per width, the per-init
    samples (inits × entries) of the finite observable at those pairs (upper triangle when X2 is None). The memory
    of the finite networks is estimated first (:func:`check_memory`: the chunk of inits shrinks to fit half the
    available memory, one init that does not fit is refused)."""
    symmetric = X2 is None
    X = X1 if symmetric else np.concatenate([X1, X2])
    n = parallel.threads()              # n chunks in memory at once: the budget is shared
    total = check_memory(model, X.shape[1:], X.shape[0], widths, chunk * n)
    chunk, jobs = max(1, total // n), max(1, min(n, total))
    P1 = X1.shape[0]
    if symmetric:
        i, j = np.triu_indices(P1)
    else:
        ii, jj = np.meshgrid(np.arange(P1), np.arange(X2.shape[0]), indexing="ij")
        i, j = ii.ravel(), P1 + jj.ravel()
    seeds = [int(s.generate_state(1, dtype=np.uint64)[0] >> 1) for s in np.random.SeedSequence(int(seed)).spawn(len(widths))]
    out = {k: [] for k in kinds}
    for w, s in zip(widths, seeds):
        K, T = SerialNetwork(model, int(w)).kernels(X, inits, seed=s, chunk=chunk, ntk="ntk" in kinds, n_jobs=jobs)
        if "nngp" in kinds:
            out["nngp"].append(K[:, i, j])
        if "ntk" in kinds:
            out["ntk"].append(T[:, i, j])
        if progress is not None:
            progress.update(1)
    return (i, j - (0 if symmetric else P1)), out
