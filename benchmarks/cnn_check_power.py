"""Power of ``limits.check`` on CNN-GP / CNTK with global average pooling (issue 33 item 6): the check on
scikit-learn digits (8×8, pixels centred) at the default widths (64, 128, 256, 512), initialisations raised
until it detects a relative bias of 0.5 % with 80 % probability, and where any offset would come from.

    python benchmarks/cnn_check_power.py --side 4        # digits resampled to 4×4: ~3.5 CPU-minutes per network
    python benchmarks/cnn_check_power.py --side 4 --only stride1 --seed 1 --inits 2100   # power 0.40 % (278 CPU s)
    python benchmarks/cnn_check_power.py                 # the 8×8 digits (about 4× the 4×4 cost; not run here)
    python benchmarks/cnn_check_power.py --inits 64      # a quick look (power ≈ 2–3 %)

Networks: 2 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.1), ReLU] → GlobalAvgPool → Dense(1, 0.1) (stride 1), and the
down-sampling one with strides 1, 2 (8×8 → 8×8 → 4×4). Printed per network: the verdict, the power, the
extrapolated relative bias δ∞ ± se along the prediction, then for the NNGP and the NTK separately the relative
bias per width δ_N ± se with the fits δ_N = a + b/N and a + b/N + c/N² (an O(1/N²) term the check's a + b/N
extrapolation would miss shows as a difference of the two a's), and the same for single entries (diagonal,
off-diagonal). Results: docs/theory/layers.rst §4. Initialisations are drawn in chunks (``limits.finite.serial``); one BLAS thread.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import limits  # noqa: E402

L = limits.layers
WIDTHS = (64, 128, 256, 512)


def networks():
    conv = lambda s: L.Conv((3, 3), "SAME", 2.0, 0.1, strides=(s, s))  # noqa: E731
    out = {}
    for name, strides in (("stride 1", (1, 1)), ("strides 1, 2", (1, 2))):
        out[name] = limits.serial(*[x for s in strides for x in (conv(s), L.Activation("relu"))],
                                  L.GlobalAvgPool(), L.Dense(1.0, 0.1))
    return out


def digits(P, side=8):
    from bench_layers import digits as d

    return d(P, side)


def fits(widths, means, ses):
    """(a, se(a)) of mean_N = a + b/N and of a + b/N + c/N² (weighted least squares, weights 1/se²)."""
    N = np.asarray(widths, float)
    out = []
    for cols in (2, 3):
        A = np.stack([N ** -k for k in range(cols)], axis=1) / ses[:, None]
        coef, *_ = np.linalg.lstsq(A, means / ses, rcond=None)
        cov = np.linalg.inv(A.T @ A)
        out.append((coef[0], np.sqrt(cov[0, 0])))
    return out


def check(k, X, inits, seed):
    """``limits.check(k, widths=WIDTHS, inits=inits, seed=seed)`` — the same samples and statistics (its
    composition path: ``kernel_samples`` then ``combine``), returned with the samples for :func:`decompose`."""
    from limits.checking.core import combine
    from limits.finite.serial import kernel_samples

    m = limits.layers.Serial.from_dict(k.model)
    (i, j), samples = kernel_samples(m, X, None, WIDTHS, inits, seed)
    tag = {"nngp": "K_out", "ntk": "Θ_out"}
    parts = {q: (getattr(k, q)[i, j], samples[q], [f"{tag[q]}[{x},{y}]" for x, y in zip(i, j)]) for q in samples}
    return combine(parts, WIDTHS, m, seed, 0.0, 0.01, {}), (i, j), samples, parts


def decompose(parts, i, j):
    """Per kind (NNGP, NTK): relative bias δ_N ± se per width along the prediction, its two fits, and the
    extrapolated relative bias of the mean diagonal and mean off-diagonal entry."""
    lines = []
    for kind, (t, samples, _) in parts.items():
        d = np.array([((Y - t) @ t) / (t @ t) for Y in samples])        # (widths, inits)
        m, se = d.mean(1), d.std(1, ddof=1) / np.sqrt(d.shape[1])
        (a2, s2), (a3, s3) = fits(WIDTHS, m, se)
        per = ", ".join(f"N={n}: {mm:+.4f} ± {ss:.4f}" for n, mm, ss in zip(WIDTHS, m, se))
        lines.append(f"  {kind.upper()}: δ_N {per}; a + b/N → δ∞ = {a2:+.4f} ± {s2:.4f}; "
                     f"a + b/N + c/N² → {a3:+.4f} ± {s3:.4f}")
        for lab, sel in (("diagonal", i == j), ("off-diagonal", i != j)):
            e = np.array([Y[:, sel].mean(1) for Y in samples]) / t[sel].mean() - 1.0
            (b2, u2), _ = fits(WIDTHS, e.mean(1), e.std(1, ddof=1) / np.sqrt(e.shape[1]))
            lines.append(f"    {lab} mean entry: extrapolated relative bias {b2:+.4f} ± {u2:.4f}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, default=4)
    ap.add_argument("--side", type=int, default=8, help="images resampled to side × side (nearest)")
    ap.add_argument("--inits", type=int, default=None, help="fixed initialisations (default: for power 0.5 %%)")
    ap.add_argument("--target", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=("stride1", "strided"), default=None, help="one of the two networks")
    a = ap.parse_args(argv)
    from limits.blas import blas_threads

    X = digits(a.P, a.side)
    for name, m in networks().items():
        if a.only and (name == "stride 1") != (a.only == "stride1"):
            continue
        k = limits.kernels.kernel(m, X)
        c0, w0 = time.process_time(), time.perf_counter()
        with blas_threads(1):
            n = a.inits
            if not n:   # a pilot at 64 inits, then inits for the target (power ∝ 1/√inits), as check(target_power=)
                n = int(np.ceil(64 * (check(k, X, 64, a.seed + 1)[0].power / a.target) ** 2 * 1.3))  # pilot ±15 %
            c, (i, j), _, parts = check(k, X, n, a.seed)
            lines = decompose(parts, i, j)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        print(f"{name} (P = {a.P} digits {a.side}×{a.side}, widths {WIDTHS}, {c.inits} inits): {'pass' if c.passed else 'FAIL'} "
              f"{list(c.reasons)}; power {c.power:.4f}; relative bias δ∞ = {c.scale_bias:+.4f} ± {c.scale_bias_se:.4f}; "
              f"{cpu:.0f} s CPU ({wall:.0f} s wall)", flush=True)
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
