"""Learning curve of a CNN-GP on the full 8×8 digits set bundled with scikit-learn (1797 images, the README's data:
:func:`limits.gallery.cnn_digits.digits`): test error and test MSE against the number of training images for the
NNGP posterior mean (output scale and noise fitted, ``noise="auto"``) and the CNTK gradient-flow ensemble mean
(t finite and t = ∞) of 3 × [Conv 3×3 SAME, ReLU] → Flatten → Dense, the same with GlobalAvgPool, and an MLP
NNGP baseline, on one fixed held-out test set with error bars over random training subsets.

Each kernel (NNGP and NTK) is computed once on all the images (:func:`limits.kernels.kernel`) and sliced for every
training subset: the posterior of a subset is :func:`limits.predict.posterior_from_kernels` (what
:func:`limits.predict.nngp_posterior` computes from the same kernels), the flow ensemble mean the
eigendecomposition of :class:`limits.predict.GDCore` (what :func:`limits.predict.gradient_descent` computes), with
t = ∞ the converged flow, Θ_*X Θ_XX⁺ Y. Subsets are nested: repeat r draws one permutation of the training pool
and takes its first P_train images. ``limits.check`` of a posterior and of a gradient-flow prediction on a few
images against finite CNNs of the same composition is in the figure, with the CPU time of the whole computation.
"""
from __future__ import annotations

import time

import numpy as np

from ..blas import limit_blas
from . import register
from .cnn_digits import digits

NAME = "layers_cnn_digits_full_set"


def cnn(readout):
    """3 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.05), ReLU] → ``readout`` ("flatten" | "gap") → Dense."""
    import limits

    L = limits.layers
    convs = [layer for _ in range(3) for layer in (L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05),
                                                   L.Activation("relu"))]
    pool = {"flatten": L.Flatten, "gap": L.GlobalAvgPool}[readout]()
    return limits.serial(*convs, pool, L.Dense(sigma_w2=1.0, sigma_b2=0.05))


def mlp():
    """The baseline: an MLP on the 64 pixels, 3 ReLU hidden layers, the same σ_w² = 2, σ_b² = 0.05, 10 outputs."""
    import limits

    return limits.mlp(64, 3, d_out=10, activation="relu", sigma_w2=2.0, sigma_b2=0.05)


def splits(n_total, n_images, P_test, P_max, repeats, rng):
    """Image indices (n_images,) drawn from the ``n_total`` images; the first ``P_test`` of them are the fixed test
    set, the rest the training pool; and (repeats, P_max) pool positions: row r a permutation's first P_max, so the
    training subset of size P in repeat r is ``rows[r, :P]`` (nested subsets)."""
    idx = rng.permutation(n_total)[:n_images]
    pool = n_images - P_test
    if P_max > pool:
        raise ValueError(f"{NAME}: P_train = {P_max} exceeds the training pool of {pool} images")
    rows = np.stack([P_test + rng.permutation(pool)[:P_max] for _ in range(repeats)])
    return idx, rows


def used_images(P_test, rows, P_max):
    """The positions a kernel needs (the test set and every subset of size ≤ ``P_max``, sorted: the test set stays
    first) and the subsets' rows as indices into them."""
    used = np.union1d(np.arange(P_test), rows[:, :P_max])
    return used, np.searchsorted(used, rows[:, :P_max])


def timed_kernel(net, X, get):
    """``limits.kernels.kernel(net, X)`` (one symmetric call) with its CPU (process) and wall seconds."""
    import limits

    c0, w0 = time.process_time(), time.perf_counter()
    k = limits.kernels.kernel(net, X, None, get)
    return k, time.process_time() - c0, time.perf_counter() - w0


def _scores(mean, Y, labels):
    """(test error, test MSE (1/P_test) Σ_μ ‖f(x_μ) − y_μ‖²) of predicted means (…, P_test, 10)."""
    err = np.mean(np.argmax(mean, axis=-1) != labels, axis=-1)
    mse = np.mean(np.sum((mean - Y) ** 2, axis=-1), axis=-1)
    return err, mse


def posterior_curve(K, net, X, Y, labels, P_test, rows, Ps):
    """(err, mse, noise, scale) arrays (len(Ps), repeats) of the ``noise="auto"`` NNGP posterior mean."""
    from ..predict import posterior_from_kernels

    te = np.arange(P_test)
    out = np.full((4, len(Ps), rows.shape[0]), np.nan)
    for i, P in enumerate(Ps):
        for r in range(rows.shape[0]):
            tr = rows[r, :P]
            k = {"K": K[np.ix_(tr, tr)], "K_sx": K[np.ix_(te, tr)], "K_ss": K[np.ix_(te, te)]}
            p = posterior_from_kernels(k, net, X[tr], Y[tr], X[te], "auto", None, NAME)
            out[:2, i, r] = _scores(p.mean, Y[te], labels[te])
            out[2, i, r], out[3, i, r] = p.noise, p.output_scale
    return out


def flow_curve(T, Y, labels, P_test, rows, Ps, ts):
    """(err, mse) arrays (len(Ps), repeats, len(ts)) of the CNTK gradient-flow ensemble mean (η = 1, mean
    reduction: df/dt = −Θ(f − Y)/P) at times ``ts`` (np.inf: converged)."""
    from ..predict import GDCore

    te = np.arange(P_test)
    ts = np.asarray(ts, float)
    out = np.full((2, len(Ps), rows.shape[0], ts.size), np.nan)
    for i, P in enumerate(Ps):
        for r in range(rows.shape[0]):
            tr = rows[r, :P]
            k = {"T": T[np.ix_(tr, tr)], "T_sx": T[np.ix_(te, tr)], "K": None, "K_sx": None, "K_ss": None}
            mean, _ = GDCore(k, 1.0 / P, True, NAME, c=1.0 / P).means(ts, Y[tr])
            e, m = _scores(mean, Y[te][None], labels[te][None])
            out[0, i, r], out[1, i, r] = e, m
    return out


def _checks(params, net, X, Y):
    """``limits.check`` of a posterior (at the output scale and noise fitted on ``P_fit`` images) and of a gradient
    flow prediction at t = ``check_t`` on ``P_check`` training and ``P_test_check`` test images."""
    import limits

    Pc, Pt, Pf = params["P_check"], params["P_test_check"], params["P_fit"]
    tr, te = slice(0, Pc), slice(len(X) - Pt, len(X))
    fit = limits.predict.max_likelihood(net, X[:Pf], Y[:Pf])
    post = limits.predict.nngp_posterior(net, X[tr], Y[tr], X[te], noise=fit[1], output_scale=fit[0])
    w, n = params["check_widths"], params["check_inits"]
    c_post = limits.check(post, widths=w, inits=n, seed=params["check_seed"])
    Pg = params["check_flow_P"]
    g = limits.predict.gradient_descent(net, X[:Pg], Y[:Pg], X[te], t=[params["check_t"]], reduction="mean")
    c_flow = limits.check(g, widths=params["check_flow_widths"], inits=params["check_flow_inits"],
                          seed=params["check_seed"] + 1)
    return c_post, c_flow


@limit_blas
def compute(params, rng):
    c0, w0 = time.process_time(), time.perf_counter()
    X0, Y0, lab0 = digits()
    Ps = [int(p) for p in params["Ps"]]
    idx, rows = splits(len(X0), params["images"], params["P_test"], max(Ps), params["repeats"], rng)
    X, Y, labels = X0[idx], Y0[idx], lab0[idx]
    P_test, ts = params["P_test"], np.asarray(params["flow_t"] + [np.inf], float)
    out = {"Ps": np.asarray(Ps, float), "flow_t": ts, "test_index": idx[:P_test], "subsets": idx[rows],
           "kernel_cpu_s": {}, "kernel_wall_s": {}, "kernel_images": {},
           "model_text": {}}
    for name in params["readouts"]:
        net = cnn(name)
        Pg = [p for p in Ps if p <= params["gap_P_max"]] if name == "gap" else Ps
        used, local = used_images(P_test, rows, max(Pg))
        k, cpu, wall = timed_kernel(net, X[used], ("nngp", "ntk"))
        out["kernel_cpu_s"][name], out["kernel_wall_s"][name] = cpu, wall
        out["kernel_images"][name] = int(used.size)
        out["model_text"][name] = net.describe()
        post = posterior_curve(k.nngp, net, X[used], Y[used], labels[used], P_test, local, Pg)
        flow = flow_curve(k.ntk, Y[used], labels[used], P_test, local, Pg, ts)
        out[f"{name}|Ps"] = np.asarray(Pg, float)
        out[f"{name}|posterior_err"], out[f"{name}|posterior_mse"] = post[0], post[1]
        out[f"{name}|noise"], out[f"{name}|output_scale"] = post[2], post[3]
        out[f"{name}|flow_err"], out[f"{name}|flow_mse"] = flow[0], flow[1]
    m = mlp()
    k, cpu, wall = timed_kernel(m, X.reshape(len(X), -1), ("nngp",))
    out["kernel_cpu_s"]["mlp"], out["kernel_wall_s"]["mlp"] = cpu, wall
    out["kernel_images"]["mlp"] = len(X)
    out["model_text"]["mlp"] = m.describe()
    post = posterior_curve(k.nngp, m, X.reshape(len(X), -1), Y, labels, P_test, rows, Ps)
    out["mlp|posterior_err"], out["mlp|posterior_mse"] = post[0], post[1]
    out["mlp|noise"], out["mlp|output_scale"] = post[2], post[3]
    out["curve_cpu_s"], out["curve_wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    c_post, c_flow = _checks(params, cnn(params["check_readout"]), X0, Y0)
    out["check_posterior"], out["check_flow"] = c_post, c_flow
    out["cpu_s"], out["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    return out


def mean_se(a, same):
    """Mean and standard error over the repeats (last axis of ``a``: (len(Ps), repeats)); no SE where ``same``:
    every repeat draws the same subset (P_train = the whole pool): NaN there."""
    a = np.asarray(a, float)
    se = np.std(a, axis=-1, ddof=1) / np.sqrt(a.shape[-1])
    return a.mean(-1), np.where(same, np.nan, se)


def same_subsets(data, Ps):
    """Per P_train: whether every repeat's training subset is the same set of images."""
    S = np.asarray(data["subsets"])
    return np.array([all(set(S[r, :int(P)]) == set(S[0, :int(P)]) for r in range(S.shape[0])) for P in Ps])


def lines(data):
    """(label, Ps, err, mse) of every curve: (err, mse) are (mean, SE) pairs over the repeats."""
    out = []
    ts = np.asarray(data["flow_t"], float)
    for name, tag in (("flatten", "Flatten"), ("gap", "GAP")):
        if f"{name}|Ps" not in data:
            continue
        Ps = np.asarray(data[f"{name}|Ps"], float)
        same = same_subsets(data, Ps)
        out.append((f"CNN-GP ({tag}) posterior, noise fitted", Ps, mean_se(data[f"{name}|posterior_err"], same),
                    mean_se(data[f"{name}|posterior_mse"], same)))
        for j, t in enumerate(ts):
            tt = "∞" if np.isinf(t) else f"{t:g}"
            err, mse = (np.asarray(data[f"{name}|flow_{q}"])[..., j] for q in ("err", "mse"))
            out.append((f"CNTK ({tag}) flow, t = {tt}", Ps, mean_se(err, same), mean_se(mse, same)))
    Ps = np.asarray(data["Ps"], float)
    same = same_subsets(data, Ps)
    out.append(("MLP NNGP posterior, noise fitted", Ps, mean_se(data["mlp|posterior_err"], same),
                mean_se(data["mlp|posterior_mse"], same)))
    return out


def cpu_text(data):
    """'CPU … min (wall … min)' of the whole computation, curves and checks."""
    return f"CPU {data['cpu_s'] / 60:.1f} min (wall {data['wall_s'] / 60:.1f} min)"


def plot(data, params):
    from ..style import PALETTE, pyplot
    from ._util import data_ticks

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 4.3), layout="constrained")
    for label, Ps, err, mse in lines(data):
        arch = 0 if "Flatten" in label else 1 if "GAP" in label else 2
        ls = "-" if "posterior" in label else "--" if "t = ∞" in label else ":"
        style = dict(color=PALETTE[arch], ls=ls, marker="os^"[arch], ms=3, lw=1.2, capsize=2, label=label)
        for ax, (m, se) in zip(axes, (err, mse)):
            ax.errorbar(Ps, np.maximum(m, 1e-4), yerr=se, **style)
    for ax, lab in zip(axes, ("test error (fraction misclassified)", "test MSE (1/P_test) Σ ‖f − y‖²")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        data_ticks(ax, data["Ps"])
        ax.set_xlabel("training images P_train")
        ax.set_ylabel(lab)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=6)
    cp, cf = data["check_posterior"], data["check_flow"]
    pools = "/".join({"flatten": "Flatten", "gap": "GAP"}[r] for r in params["readouts"])
    fig.suptitle(f"8×8 digits, {params['images']} images: 3 × [Conv 3×3, ReLU] → {pools} → Dense; "
                 f"{params['P_test']} fixed test images, ±1 SE over {params['repeats']} nested training subsets; "
                 f"{cpu_text(data)}\n"
                 f"check of the posterior on {params['P_check']} images: {cp.verdict_text()}\n"
                 f"check of the flow at t = {params['check_t']:g} on {params['check_flow_P']} images: {cf.verdict_text()}",
                 fontsize=7)
    return fig


PARAMS = dict(images=1797, P_test=397, Ps=[50, 100, 200, 400, 800, 1400], repeats=8, flow_t=[100.0],
              readouts=["flatten", "gap"], gap_P_max=1400, P_check=20, P_test_check=3, P_fit=400,
              check_readout="flatten", check_widths=[128, 256, 512], check_flow_widths=[64, 128, 256],
              check_inits=32, check_flow_inits=16, check_flow_P=12, check_t=10.0, check_seed=0)
QUICK = dict(images=240, P_test=80, Ps=[20, 40, 80, 160], repeats=3, readouts=["flatten"], P_check=8,
             P_test_check=2, P_fit=100, check_widths=[32, 64, 128], check_flow_widths=[32, 64, 128], check_inits=8,
             check_flow_inits=8, check_flow_P=8)
register(NAME, component="predict", compute=compute, plot=plot, params=PARAMS, quick=QUICK,
         caption="Learning curve of the CNN-GP 3 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.05), ReLU] → Flatten → Dense "
                 "(and → GlobalAvgPool → Dense) on the full 8×8 digits set bundled with scikit-learn (pixels / 16 − "
                 "0.3, one-hot targets − 0.1): test error and test MSE on a fixed held-out test set against the "
                 "number of training images, mean ± 1 SE over random nested training subsets (an explicit seeded "
                 "Generator), for the NNGP posterior mean with output scale and noise fitted by maximum marginal "
                 "likelihood (noise=\"auto\", per subset), the CNTK gradient-flow ensemble mean (mean reduction, "
                 "η = 1) at a finite t and at t = ∞, and an MLP NNGP baseline (3 ReLU layers on the 64 pixels). "
                 "Each kernel is computed once on all images and sliced per subset; the title gives limits.check of "
                 "a posterior and of a gradient-flow prediction on a few images against finite CNNs of the same "
                 "composition, and the CPU time of the whole computation.",
         seed_ref="docs/theory/predict.rst §5")


PAGE = "docs/architectures.rst"             # the page whose marked block holds the table
BEGIN = "<!-- cnn-digits-full-set:begin (python -m limits.gallery.cnn_digits_curve --write) -->"
END = "<!-- cnn-digits-full-set:end -->"


def stored_payload(figdir):
    """The committed data: paper size (``figdir/full``) where stored, else the quick variant."""
    from pathlib import Path

    from . import load_data

    try:
        return load_data(NAME, Path(figdir) / "full")
    except ValueError:
        return load_data(NAME, figdir)


def _pct(m, se):
    return f"{100 * m:.1f}" if np.isnan(se) else f"{100 * m:.1f} ± {100 * se:.1f}"


def readme_lines(payload) -> list[str]:
    """The table (docs/architectures.rst) of test errors (%) per training-set size and method, and its sentence on the sizes, the
    checks and the CPU time — every number from the figure's data."""
    d, p = payload["data"], payload["params"]
    ls = lines(d)
    Ps = [int(v) for v in d["Ps"]]
    out = ["| P_train | " + " | ".join(lab for lab, *_ in ls) + " |", "|---" * (len(ls) + 1) + "|"]
    for P in Ps:
        cells = []
        for _, LP, (m, se), _ in ls:
            i = [int(v) for v in LP].index(P) if P in [int(v) for v in LP] else None
            cells.append("—" if i is None else _pct(m[i], se[i]))
        out.append(f"| {P} | " + " | ".join(cells) + " |")
    kc = d["kernel_cpu_s"]
    what = {"flatten": "Flatten CNN-GP + CNTK", "gap": "GAP CNN-GP + CNTK", "mlp": "MLP NNGP"}
    kern = ", ".join(f"{what[name]} {float(kc[name]):.3g} s on {int(d['kernel_images'][name])} images" for name in kc)
    out += ["", f"Test error in % on {p['P_test']} fixed held-out images, mean ± SE over {p['repeats']} nested random "
            f"training subsets (none at P_train = {Ps[-1]}: every subset is the whole pool of "
            f"{p['images'] - p['P_test']}); CNTK: gradient-flow ensemble mean, η = 1, mean reduction. "
            f"`limits.check` of the posterior on {p['P_check']} images: {d['check_posterior'].verdict_text()}; "
            f"of the flow at t = {p['check_t']:g} on {p['check_flow_P']} images: {d['check_flow'].verdict_text()}. "
            f"The whole computation took {d['cpu_s'] / 60:.1f} CPU-minutes (wall {d['wall_s'] / 60:.1f} min, one BLAS "
            f"thread, shared machine; kernels: {kern}) — the gallery's "
            f"{'quick' if payload.get('quick') else 'paper-size'} data, `limits figure {NAME}`."]
    return out


if __name__ == "__main__":                  # python -m limits.gallery.cnn_digits_curve [--write]
    import sys
    from pathlib import Path

    from ..results import replace_marked_block

    root = Path(__file__).resolve().parents[2]
    text = readme_lines(stored_payload(root / "figures"))
    if "--write" in sys.argv[1:]:
        replace_marked_block(root / PAGE, BEGIN, END, text)
    print("\n".join(text))
