"""Validation of the O(1/N) correction K1 of compositions with Residual blocks (``limits.kernels.finite_width`` of a
``limits.serial`` with residual sections; docs/theory/finite_width.rst §8) against finite compositions: per case,
the theory, the theory without the self-interaction term (each channel's own past seen through the skips), and
``limits.check``'s sampler (``limits.finite.serial`` networks with its control variates) at widths 8, 16, 32, 64, a
+ b/N + c/N² per entry; the verdicts for K1 × (1, 1.05, 0.95, 1.1, 0.9, 0), for the K1 without self-interaction, and
the slope with the limit fixed at the exact K (b + c/N). A validation report, not a timing::

    nice python benchmarks/finite_width_residual_validation.py --inits 40000 --seeds 3      # ≈ 30 CPU-min
    nice python benchmarks/finite_width_residual_validation.py --case E --inits 40000 --seeds 5   # added to the file
    nice python benchmarks/finite_width_residual_validation.py --case F G --inits 40000 --seeds 3

writes ``benchmarks/results/calibration/finite_width_residual.json`` (one entry per case and seed);
``--table`` prints the table of docs/theory/finite_width.rst §8 from it, ``--figure docs/_static/finite_width_residual.png``
draws its figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "calibration" / "finite_width_residual.json"
WIDTHS = (8, 16, 32, 64)
FACTORS = (1.0, 1.05, 0.95, 1.1, 0.9, 0.0)


def cases():
    """{name: (description, composition, inputs)}: 1-D inputs of length 3 with 2 channels (two of them), or 3-vectors."""
    import limits

    L = limits.layers
    X = np.array([[1.0, 0.2, -0.5], [0.3, -0.9, 0.4]])
    XC = np.random.default_rng(0).normal(size=(2, 3, 2))

    def conv(s, b=0.0):
        return L.Conv(filter_shape=(3,), padding="SAME", sigma_w2=s, sigma_b2=b)

    def res(act, *layers, rho):
        return L.Residual(limits.serial(L.Activation(act), *layers), rho=rho)

    erf, relu = L.Activation("erf"), L.Activation("relu")
    return {
        "A": ("erf 1-D conv ResNet, one block, Flatten",
              limits.serial(conv(2.0, 0.1), res("erf", conv(1.0, 0.05), rho=0.8), erf, L.Flatten(), L.Dense(1.0, 0.05)),
              XC),
        "B": ("erf fully connected, a two-layer branch",
              limits.serial(L.Dense(1.5, 0.1), res("erf", L.Dense(1.5, 0.05), erf, L.Dense(1.0), rho=0.9), erf,
                            L.Dense(1.0, 0.05)), X),
        "C": ("erf fully connected, the stream starts after a random layer",
              limits.serial(L.Dense(1.5, 0.1), erf, L.Dense(2.0, 0.05), res("erf", L.Dense(1.5, 0.05), rho=1.0), erf,
                            L.Dense(1.0, 0.05)), X),
        "D": ("relu 1-D conv ResNet, two blocks, GlobalAvgPool",
              limits.serial(conv(2.0, 0.1), *[res("relu", conv(1.0, 0.05), rho=0.7)] * 2, relu, L.GlobalAvgPool(),
                            L.Dense(1.0, 0.05)), XC),
        "E": ("erf 1-D conv, random stream start and a two-layer branch, GlobalAvgPool",
              limits.serial(conv(2.0, 0.1), erf, conv(2.0, 0.05), res("erf", conv(1.5, 0.05), erf, conv(1.0), rho=0.8),
                            erf, L.GlobalAvgPool(), L.Dense(1.0, 0.05)), XC),
        "F": ("E's two-layer branch alone (stream after the first conv)",
              limits.serial(conv(2.0, 0.1), res("erf", conv(1.5, 0.05), erf, conv(1.0), rho=0.8), erf,
                            L.GlobalAvgPool(), L.Dense(1.0, 0.05)), XC),
        "G": ("E's random stream start alone (one-layer branch)",
              limits.serial(conv(2.0, 0.1), erf, conv(2.0, 0.05), res("erf", conv(1.0, 0.05), rho=0.8), erf,
                            L.GlobalAvgPool(), L.Dense(1.0, 0.05)), XC),
    }


def _without_self_interaction(s, X):
    import limits
    import limits.kernels.finite_width_residual as fr

    keep = fr._self_interaction
    fr._self_interaction = lambda blocks, outputs, Kin, Minv, sl, l, bar=None: np.zeros(blocks[l].L.shape[0])
    try:
        return limits.kernels.finite_width(s, X, ntk=False).K1
    finally:
        fr._self_interaction = keep


def _fixed_limit_slope(mean, se, K):
    """b ± se of N (mean − K) = b + c/N by weighted least squares (the limit fixed at the exact K)."""
    N = np.asarray(WIDTHS, dtype=float)
    A = np.stack([np.ones_like(N), 1.0 / N], axis=1)
    out = []
    for j in range(mean.shape[1]):
        w = 1.0 / (N * se[:, j])
        Aw = A * w[:, None]
        coef = np.linalg.lstsq(Aw, N * (mean[:, j] - K[j]) * w, rcond=None)[0]
        out.append((coef[0], float(np.sqrt(np.linalg.inv(Aw.T @ Aw)[0, 0]))))
    return np.array(out)


def run_case(name, inits, seed):
    import limits
    from limits.checking.finite_width import _serial_measure, _verdict

    text, s, X = cases()[name]
    t0 = time.process_time()
    r = limits.kernels.finite_width(s, X, ntk=False)
    plain = _without_self_interaction(s, X)
    t1 = time.process_time()
    labels, samples = _serial_measure(s, X, None, WIDTHS, inits, seed)
    t2 = time.process_time()
    iu = np.triu_indices(X.shape[0])
    K, K1 = r.K[iu], r.K1[iu]
    args = (WIDTHS, inits, seed, 0.01, 0.01, 0.05, True, {}, {}, 0.0)
    ok = _verdict(labels, samples, K, K1, *args)
    verdicts = {}
    for f in FACTORS:
        v = _verdict(labels, samples, K, f * K1, *args)
        verdicts[f"{f:g}"] = {"passed": v.passed, "z_b": v.z_b.round(2).tolist()}
    nos = _verdict(labels, samples, K, plain[iu], *args)
    mean = np.stack([q.mean(0) for q in samples])
    se = np.stack([q.std(0, ddof=1) / np.sqrt(q.shape[0]) for q in samples])
    fixed = _fixed_limit_slope(mean, se, K)
    return {"case": name, "composition": text, "serial": s.to_dict(), "inits": inits, "seed": seed,
            "widths": list(WIDTHS), "labels": list(labels), "K": K.tolist(), "K1": K1.tolist(),
            "K1_without_self_interaction": plain[iu].tolist(), "b": ok.b.tolist(), "b_se": ok.b_se.tolist(),
            "z_b": ok.z_b.round(2).tolist(), "z_a": ok.z_a.round(2).tolist(), "z_crit": ok.z_crit,
            "passed": ok.passed, "detectable": ok.detectable, "verdicts": verdicts,
            "without_self_interaction": {"passed": nos.passed, "z_b": nos.z_b.round(1).tolist()},
            "limit_fixed": {"b": fixed[:, 0].tolist(), "b_se": fixed[:, 1].tolist(),
                            "z_b": ((fixed[:, 0] - K1) / fixed[:, 1]).round(2).tolist()},
            "mean": mean.tolist(), "se": se.tolist(),
            "cpu_seconds": {"theory": round(t1 - t0, 1), "monte_carlo": round(t2 - t1, 1)}}


def table(data) -> str:
    """The rst table of docs/theory/finite_width.rst §8 from the file's runs."""
    head = ("case", "seed", "entry", "K1", "b ± SE (a + b/N + c/N²)", "z", "z, limit fixed", "z without self-int.",
            "K1 ×1.05 / ×0.95 / ×1.1 / ×0.9", "detectable")
    from limits.stats import signed

    rows = []
    flag = lambda v: "flagged" if not v["passed"] else "passes"        # noqa: E731
    for r in sorted(data["runs"], key=lambda r: (r["case"], r["seed"])):
        for j, lab in enumerate(r["labels"]):
            first = j == 0
            rows.append((r["case"] if first else "", str(r["seed"]) if first else "", lab.replace("K_out", ""),
                         signed(r["K1"][j], 5), f"{signed(r['b'][j], 5)} ± {r['b_se'][j]:.5f}", signed(r["z_b"][j]),
                         signed(r["limit_fixed"]["z_b"][j]), signed(r["without_self_interaction"]["z_b"][j], 1),
                         " / ".join(flag(r["verdicts"][k]) for k in ("1.05", "0.95", "1.1", "0.9")) if first else "",
                         f"{100 * r['detectable']:.1f} %" if first else ""))
    w = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    line = "  ".join("=" * n for n in w)
    fmt = lambda cells: "  ".join(c.ljust(n) for c, n in zip(cells, w)).rstrip()   # noqa: E731
    return "\n".join([line, fmt(head), line, *(fmt(x) for x in rows), line])


def figure(data, path):
    """Per case (its first seed), entry [0,0]: N·(mean − K) ± 2 SE against 1/N, with K1 (the theory) and the K1
    without self-interaction — the picture of the table in docs/theory/finite_width.rst §8."""
    from limits.stats import signed
    from limits.style import PALETTE, plot_target

    runs = {}
    for r in sorted(data["runs"], key=lambda r: (r["case"], r["seed"])):
        runs.setdefault(r["case"], r)
    pt = plot_target(path, len(runs), figsize=(2.1 * len(runs), 2.6), what="finite_width_residual_validation")
    for ax, (name, r) in zip(pt.axes, runs.items()):
        N = np.asarray(r["widths"], dtype=float)
        y = N * (np.asarray(r["mean"])[:, 0] - r["K"][0])
        e = 2 * N * np.asarray(r["se"])[:, 0]
        ax.errorbar(1 / N, y, e, fmt="o", ms=3, color="k", label="finite nets, ±2 SE")
        ax.axhline(r["K1"][0], color=PALETTE[0], label="K1")
        ax.axhline(r["K1_without_self_interaction"][0], color=PALETTE[1], ls="--", label="K1 without self-int.")
        ax.set_title(f"{name}: z = {signed(r['z_b'][0], 1)}", fontsize=8)
        ax.set_xlabel("1/N", fontsize=8)
        ax.tick_params(labelsize=6)
    pt.axes[0].set_ylabel("N (E[K_N] − K), entry [0,0]", fontsize=8)
    pt.axes[0].legend(fontsize=6, loc="best")
    return pt.finish()


def main(argv=None):
    from joblib import Parallel, delayed

    from limits.results import atomic_write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inits", type=int, default=40000, help="networks per width")
    ap.add_argument("--seeds", type=int, nargs="+", default=[3])
    ap.add_argument("--case", nargs="+", default=None, help="cases (default: all): " + ", ".join(cases()))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=OUT)
    ap.add_argument("--table", action="store_true", help="print the docs table from the file and stop")
    ap.add_argument("--figure", type=Path, metavar="PATH", help="draw the docs figure from the file and stop")
    a = ap.parse_args(argv)
    if a.table:
        print(table(json.loads(a.json.read_text())))
        return
    if a.figure:
        figure(json.loads(a.json.read_text()), a.figure)
        print(a.figure)
        return
    names = a.case or list(cases())
    bad = [n for n in names if n not in cases()]
    if bad:
        ap.error(f"unknown case {bad[0]!r}; the cases are {', '.join(cases())}")
    work = [(n, sd) for sd in a.seeds for n in names]
    print(f"{len(work)} case runs, {a.inits} networks per width; one line per finished run", file=sys.stderr, flush=True)
    data = json.loads(a.json.read_text()) if a.json.is_file() else {"runs": []}
    for res in Parallel(n_jobs=a.jobs, return_as="generator")(delayed(run_case)(n, a.inits, sd) for n, sd in work):
        print(f"{res['case']} seed {res['seed']}: passed={res['passed']} z_b={res['z_b']} "
              f"without self-interaction z_b={res['without_self_interaction']['z_b']}", file=sys.stderr, flush=True)
        data["runs"] = [r for r in data["runs"] if (r["case"], r["seed"], r["inits"]) !=
                        (res["case"], res["seed"], res["inits"])] + [res]
        atomic_write_text(a.json, json.dumps(data, indent=1, ensure_ascii=False))
    print(a.json)


if __name__ == "__main__":
    main()
