"""Kernels of compositions (``limits.serial``): ``kernel(serial, X1, X2)`` through the layers' own rules.

Inputs are (P, d) or ``(P, *spatial, C)`` (as neural-tangents). The state K⁰(x, y)[i, j] = ⟨x_i, y_j⟩/C,
Θ⁰ = 0 is handed from layer to layer (:mod:`limits.layers.state`); each layer maps it by its rule
(:mod:`limits.layers`). The representation — every pair of positions ("full", P1·P2·S² floats per
block) or equal positions only ("diagonal", P1·P2·S) — is decided by one backward pass over the
composition and reported per layer in ``diagnostics["structure"]`` with its memory
(``diagnostics["peak_bytes"]``). Cost: the sum of the layers' costs (see each layer's docstring).

Before anything is allocated, :func:`check_cost` estimates from shapes alone the memory one pair of inputs needs
at the costliest layer and a lower bound of the time (Σ layers × block entries × ``Layer.kernel_work`` × pairs,
at :data:`UPDATES_PER_SECOND`), and refuses beyond half the available memory or one hour with the estimate and
``max_memory=`` / ``max_seconds=``. Measured on CNNs with flatten or global pooling, attention (up to 256
tokens) and 1-D convolutions (packed pairs; ``python benchmarks/bench_compositions.py --estimate``, machine load
≈ 12): 2.6–1100× more CPU than the lower bound, so a refused composition would have taken at least as long as
said (no false refusals there), and a filter of 10¹² or attention on 128×128 images is refused in under a second.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array
from ..results import Result, kernel_summary

GETS = ("nngp", "ntk")


@dataclass(frozen=True)
class SerialKernelResult(Result):
    """Read-out NNGP ``nngp`` and NTK ``ntk`` (P1×P2) of a composition, the composition (as a dict), the
    inputs, and diagnostics: ``structure`` (per layer: representation, spatial shape, bytes),
    ``input_representation``, ``peak_bytes``."""

    nngp: np.ndarray | None
    ntk: np.ndarray | None
    model: dict
    diagnostics: dict
    symmetric: bool = False
    X1: np.ndarray | None = None
    X2: np.ndarray | None = None

    @property
    def shape(self):
        a = self.nngp if self.nngp is not None else self.ntk
        return a.shape

    def __str__(self):
        return kernel_summary(self)


def composition_inputs(X, name):
    """``X`` checked as a composition's inputs: finite, ``(P, d)`` or ``(P, *spatial, C)`` with at most two spatial axes."""
    X = finite_array(X, name)
    if X.ndim < 2 or X.shape[0] < 1 or X.shape[-1] < 1:
        raise ValueError(f"{name} must be (P, d) or (P, *spatial, C) with P, C >= 1, got shape {X.shape}")
    if X.ndim > 2 and min(X.shape[1:-1]) < 1:
        raise ValueError(f"{name}: images of zero size (spatial axes {X.shape[1:-1]}); every spatial axis needs >= 1 "
                         "position")
    if X.ndim > 4:
        raise ValueError(f"{name}: at most two spatial axes (P, H, W, C), got shape {X.shape}")
    _read_in_scale(X, name)
    return X


READ_IN_LIMIT = 1e300       # a read-in kernel entry ⟨x, y⟩/C beyond this leaves float64 within a few layers


def _read_in_scale(X, name):
    """Refuse inputs whose read-in kernel ⟨x_p, y_p'⟩/C (per position) would exceed :data:`READ_IN_LIMIT`:
    by Cauchy–Schwarz its largest entry is the largest |x_p|²/C, computed scaled (no overflow on the way)."""
    if not X.size:
        return
    big = float(np.max(np.abs(X)))
    if big == 0.0:
        return
    C = X.shape[-1]
    v = X.reshape(-1, C) / big
    q = float(np.max(np.einsum("ij,ij->i", v, v))) / C          # max |x_p|²/(C big²)
    log_q = 2.0 * np.log10(big) + np.log10(q)
    if log_q > np.log10(READ_IN_LIMIT):
        raise ValueError(f"{name}: the read-in kernel ⟨x, y⟩/C of these inputs reaches 1e{log_q:.0f} (max |{name}| = "
                         f"{big:.3g}), beyond float64's range once the layers multiply it (limit "
                         f"{READ_IN_LIMIT:g}); rescale the inputs")


BLOCK_BYTES = 256 * 2**20       # one tile's blocks (with temporaries) stay below this
TILE_ENTRIES = 2**20            # inputs with spatial axes: a block of about this many floats (8 MiB) per tile
MIN_TILE = 8                    # … and at least this many inputs per tile side


def pair_bytes(model, input_shape, want_ntk=True) -> float:
    """Bytes one pair of inputs costs in the largest block (NNGP, NTK and ~2 temporaries)."""
    spatial = tuple(input_shape[:-1])
    S = float(np.prod(spatial)) if spatial else 1.0
    per = S * S if (spatial and model.needs_full(False)) else S
    return 8.0 * per * (2 + 2 * bool(want_ntk))


def default_block(model, input_shape, P, symmetric, want_ntk=True) -> int:
    """Inputs per tile side: the largest tile whose blocks stay below 256 MiB; with spatial axes also
    about ``TILE_ENTRIES`` floats per block (the layer rules' passes then run in cache-sized pieces) and,
    for a symmetric kernel, at most ⌈P/4⌉ (the tiles below the diagonal are not computed: 10 of 16 tiles,
    ~60 % of the work), never fewer than ``MIN_TILE`` inputs."""
    b = max(1, int(np.sqrt(BLOCK_BYTES / pair_bytes(model, input_shape, want_ntk))))
    if len(input_shape) > 1:
        per = pair_bytes(model, input_shape, False) / 16.0
        small = int(np.sqrt(TILE_ENTRIES / per))
        if symmetric:
            small = min(small, -(-P // 4))
        b = min(b, max(MIN_TILE, small))
    return b


UPDATES_PER_SECOND = 3e9        # a ceiling of the layer rules: one numpy pass over an in-cache block costs
                                # ≥ 0.33 ns per entry (measured 0.34–0.40 ns), and no rule makes fewer than one
                                # pass per update (attention's products count at 1/8, Attention.kernel_work);
                                # the packed rules measured 2e6–8e8 per CPU-second (2-core machine), so time
                                # estimates are lower bounds
MAX_SECONDS = 3600.0            # default: refuse what would take at least an hour


def estimate(model, input_shape, P1, P2, want_ntk=True, symmetric=True) -> dict:
    """What :func:`kernel` will need, from shapes alone (nothing is allocated): per layer the block entries
    per pair of inputs (S² positions pairs when every pair is kept, S when only equal positions), the peak
    ``pair_bytes`` (the input and output blocks of the costliest layer, NNGP and NTK, and ~2 temporaries), and
    ``updates`` (Σ over layers of entries × :meth:`limits.layers.Layer.kernel_work` × pairs of inputs) with
    ``seconds`` = updates / :data:`UPDATES_PER_SECOND` — a lower bound. ``worst`` names the costliest layer."""
    needs = model.needs(False)
    pairs = P1 * (P1 + 1) / 2.0 if symmetric else float(P1) * P2
    per = 2 + 2 * bool(want_ntk)
    shape, peak, updates, worst = tuple(input_shape), 0.0, 0.0, None
    head, rank = _factored(model, input_shape, needs)
    for i, layer in enumerate(_flat(model)):
        full = needs[i] if i < len(needs) else False
        entries = _entries(shape, full)
        new = tuple(layer.out_shape(shape, 1)) if hasattr(layer, "out_shape") else shape
        work = entries * float(layer.kernel_work(shape[:-1], full))
        if i < head:                             # factored read-in: one rank-m product per block entry at its end
            work = 0.0 if i < head - 1 else _entries(new, True) * max(1.0, 2.0 * rank / 8.0)
        peak = max(peak, 8.0 * per * (entries + _entries(new, full)))
        if worst is None or work > worst[0]:
            what = layer.describe() if len(layer.describe()) <= 100 else layer.name
            worst = (work, f"layer {i} ({what}) on {'×'.join(map(str, shape[:-1])) or 'no'} positions "
                           f"({'every pair' if full and len(shape) > 1 else 'equal positions'})")
        updates += work * pairs
        shape = new
    return {"pair_bytes": peak, "updates": updates, "seconds": updates / UPDATES_PER_SECOND,
            "worst": worst[1] if worst else "", "pairs": pairs}


def packed_bytes(model, input_shape, P1, P2, want_ntk=True) -> float:
    """Bytes the packed kernel (:mod:`limits.kernels.packed`) of P1 × P2 inputs allocates at its peak, from shapes
    alone: the outputs (8·P1·P2 per kernel), the per-input quantities recorded for both sides (at most a self
    block per layer and input: Σ_l entries_l) and one chunk of pairs (``CHUNK_ENTRIES`` block entries, or one
    pair's largest block if larger, × 2 for NNGP + NTK × ~6 arrays: input, output and the rules' temporaries)."""
    from .packed import CHUNK_ENTRIES

    needs = model.needs(False)
    shape, tape, largest = tuple(input_shape), 0.0, 1.0
    for i, layer in enumerate(_flat(model)):
        full = needs[i] if i < len(needs) else False
        e = _entries(shape, full)
        tape, largest = tape + e, max(largest, e)
        shape = tuple(layer.out_shape(shape, 1)) if hasattr(layer, "out_shape") else shape
    n_k = 1 + bool(want_ntk)
    return 8.0 * (n_k * P1 * P2 + (P1 + P2) * tape + 6 * n_k * max(CHUNK_ENTRIES, largest))


def _flat(model):
    return list(model.layers)


def _factored(model, input_shape, needs):
    """(leading layers the packed engine folds into per-input features, their rank m)
    (:mod:`limits.kernels.lowrank`; every pair of positions after them, else none)."""
    from . import lowrank

    head = lowrank.prefix(model.layers, tuple(input_shape))
    if not head or not needs[head]:
        return 0, 0
    return head, lowrank.rank(model.layers[:head], tuple(input_shape))


def _entries(shape, full) -> float:
    S = float(np.prod([float(s) for s in shape[:-1]])) if len(shape) > 1 else 1.0
    return S * S if (full and len(shape) > 1) else S


def check_cost(model, input_shape, P1, P2, get, symmetric, max_memory=None, max_seconds=None) -> dict:
    """Refuse (``ValueError`` with the estimate and how to proceed) before anything is allocated: one pair of
    inputs needing more than ``max_memory`` bytes (default half the available memory) with the outputs, or an
    estimated time (a lower bound) over ``max_seconds`` (default :data:`MAX_SECONDS`)."""
    from ..progress import format_seconds
    from ..readfile import human
    from .nngp import available_memory

    est = estimate(model, input_shape, P1, P2, "ntk" in get, symmetric)
    out_bytes = 8.0 * P1 * P2 * len(get)
    if max_memory is None:
        avail = available_memory()
        limit, src = (None, "") if avail is None else (0.5 * avail, f"half the available memory ({human(avail)})")
    else:
        limit, src = float(max_memory), f"max_memory = {human(max_memory)}"
    if limit is not None and est["pair_bytes"] + out_bytes > limit:
        raise ValueError(f"limits.kernels.kernel: this composition needs ≈ {human(est['pair_bytes'])} for one pair "
                         f"of inputs at its costliest, {est['worst']}, plus {human(out_bytes)} of output, more than "
                         f"{src}; use smaller images (or pool before attention/global pooling), or pass "
                         "max_memory= (bytes) if the memory is there")
    budget = MAX_SECONDS if max_seconds is None else float(max_seconds)
    if est["seconds"] > budget:
        took = format_seconds(est["seconds"]) if est["seconds"] < 1e7 else f"{est['seconds'] / 3.156e7:.2g} years"
        raise ValueError(f"limits.kernels.kernel: this composition would take at least "
                         f"{took} ({est['updates']:.2g} kernel-entry updates for "
                         f"{est['pairs']:.3g} pairs of inputs, at most {UPDATES_PER_SECOND:.0e} per second; the "
                         f"costliest is {est['worst']}), more than the {format_seconds(budget)} allowed; use fewer "
                         "inputs, smaller images or filters, or pass max_seconds= to allow it")
    return est


def kernel(model, X1, X2=None, get=("nngp", "ntk"), block=None, max_memory=None,
           max_seconds=None) -> SerialKernelResult:
    """NNGP / NTK read-out kernels of the composition ``model`` between X1 and X2 (module docstring).
    The composition must end without spatial axes (Flatten / GlobalAvgPool before the read-out).
    Inputs are done in tiles of ``block`` × ``block`` inputs (default :func:`default_block`; every tile
    is the cross kernel of its two input sets, the diagonal tiles the symmetric kernel), so memory is
    the output plus one tile. Memory and time are estimated first (:func:`check_cost`): more than
    ``max_memory`` bytes (default half the available memory) or at least ``max_seconds`` (default one hour)
    is refused with the estimate."""
    from ..layers import Serial, serial

    m = model if isinstance(model, Serial) else serial(model)
    if isinstance(get, str):
        get = (get,)
    get = tuple(get)
    if not get or any(g not in GETS for g in get):
        raise ValueError(f"get must be a non-empty subset of {GETS}, got {get!r}")
    X1 = composition_inputs(X1, "X1")
    if X2 is not None:
        X2 = composition_inputs(X2, "X2")
        if X2.shape[1:] != X1.shape[1:]:
            raise ValueError(f"X2 has shape {X2.shape[1:]} per input but X1 has {X1.shape[1:]}")
    P1, P2 = X1.shape[0], (X1 if X2 is None else X2).shape[0]
    check_cost(m, X1.shape[1:], P1, P2, get, X2 is None, max_memory, max_seconds)
    packed = block is None and X1.ndim > 2           # inputs with positions: packed pairs (limits.kernels.packed)
    if block is None:
        block = default_block(m, X1.shape[1:], P1, X2 is None, "ntk" in get)
    from ..blas import blas_threads

    with blas_threads():                 # many small products (conv bands): one BLAS thread ($LIMITS_BLAS_THREADS)
        if packed:
            return _packed(m, X1, X2, get)
        if max(P1, P2) > block:
            return _tiled(m, X1, X2, get, int(block))
        return kernel_once(m, X1, X2, get)


def _packed(m, X1, X2, get):
    from .packed import kernel as packed_kernel

    out, diag = packed_kernel(m, X1, X2, get)
    return SerialKernelResult(out.get("nngp"), out.get("ntk"), m.to_dict(), diag, X2 is None, X1, X2)


def _tiled(m, X1, X2, get, b):
    """The kernel tile by tile (``kernel`` docstring); structure diagnostics of the first tile."""
    sym = X2 is None
    Y = X1 if sym else X2
    from .. import parallel

    out = {g: np.empty((X1.shape[0], Y.shape[0])) for g in get}
    tiles = [(i, j) for i in range(0, X1.shape[0], b) for j in range(i if sym else 0, Y.shape[0], b)]

    def one(tile):                       # tiles write disjoint blocks: any thread (limits.parallel)
        i, j = tile
        r = kernel_once(m, X1[i:i + b], None if (sym and i == j) else Y[j:j + b], get)
        for g in get:
            out[g][i:i + b, j:j + b] = getattr(r, g)
            if sym and i != j:
                out[g][j:j + b, i:i + b] = getattr(r, g).T
        return r.diagnostics
    first = parallel.map_blocks(one, tiles)[0]
    diag = {**first, "block": b, "peak_bytes_per_tile": first["peak_bytes"]}
    return SerialKernelResult(out.get("nngp"), out.get("ntk"), m.to_dict(), diag, sym, X1, X2)


def _probe(m, k0, symmetric):
    """A :class:`limits.kernels.halfangle.Probe` for a composition of position-free layers with closed-form
    activations (the delicate pairs are then recomputed from the rows), else None."""
    from .halfangle import Probe, SerialPairs

    if k0.spatial or not SerialPairs.supports(m) or not any(k in ("relu", "erf", "gelu")
                                                             for k in SerialPairs.kinds(m)):
        return None
    return Probe(symmetric)


def kernel_once(m, X1, X2, get):
    """The kernel of X1 (× X2) in one piece, every pair at once (no tiles, no packing): inputs without positions."""
    from ..layers.state import initial

    full = m.needs_full(False)
    k0 = initial(X1, X2, full, "ntk" in get)
    trace = [{"layer": -1, "name": "input", "representation": k0.representation, "spatial": list(k0.spatial),
              "bytes": int(k0.nbytes)}]
    probe = _probe(m, k0, X2 is None)
    if probe is not None:
        k0 = k0.replace(probe=probe)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        k = m.kernel(k0, False, "", trace)
    if k.spatial:
        raise ValueError(f"the composition ends with spatial axes {k.spatial}; end it with Flatten() or "
                         "GlobalAvgPool() (and a Dense read-out) for P1×P2 kernels")
    if probe is not None:                   # nearly collinear inputs, large norms: from the rows (halfangle)
        from .halfangle import patch_composition

        patch_composition(m, X1, X2, probe, k.nngp, k.ntk)
    nngp = k.nngp if "nngp" in get else None
    ntk = k.ntk if "ntk" in get else None
    for name, a in (("NNGP", nngp), ("NTK", ntk)):
        if a is not None and not np.all(np.isfinite(a)):
            raise ValueError(f"the {name} of this composition overflowed float64 (inf/NaN) on inputs with read-in "
                             f"variances up to {float(np.max(np.abs(k0.cov1))):.3g}; rescale the inputs or use "
                             "smaller variances")
    diag = {"structure": trace, "input_representation": k0.representation,
            "peak_bytes": int(max(t["bytes"] for t in trace)), "source": "limits.kernels.composed"}
    return SerialKernelResult(nngp, ntk, m.to_dict(), diag, X2 is None, X1, X2)
