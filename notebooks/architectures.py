# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Architectures: CNN-GP / CNTK learning curves on the digits
#
# `limits.serial(*layers)` composes `limits.layers` (Dense, Conv, Activation, Flatten, GlobalAvgPool,
# AvgPool, LayerNorm, Attention, Residual, Identity). Every layer carries its infinite-width kernel rule
# (NNGP $K$ and NTK $\Theta$), its finite forward/backward at width $N$ and its serialisation, so one
# composition gives both the theory (`limits.kernels.kernel`, `limits.predict.*`) and the finite
# networks that test it (`model.finite(N)`).
#
# **This notebook** takes a small CNN on the 8×8 digits bundled with scikit-learn and draws its learning
# curves — test loss and test error against the training-set size $P$ — from
# * the CNN-GP posterior mean (NNGP kernel regression, `limits.predict.nngp_posterior`),
# * the CNTK gradient-descent ensemble (`limits.predict.gradient_descent`: the infinite-width network trained
#   by the same discrete GD steps, mean over initialisations),
#
# beside GD-trained finite CNNs of the same composition at three widths (mean ± 2 SE over initialisations).
# The finite curves should approach the CNTK line as $N$ grows, with a gap shrinking like $1/N$.

# %%
import os, time
QUICK = os.environ.get("LIMITS_QUICK", "1") == "1"
_T0, _C0 = time.perf_counter(), time.process_time()
# %matplotlib inline
import numpy as np
import limits
from limits.style import paper_style, pyplot, PALETTE, show
plt = pyplot()

print("quick mode" if QUICK else "full mode", "| limits", getattr(limits, "__version__", ""))

# %% [markdown]
# ## 1. Data and composition
#
# Images $(P, 8, 8, 1)$: pixels centred over the data set, each image scaled to norm 8; targets one-hot
# minus 1/10 (10 outputs). The composition: Conv 3×3 "SAME" ($\sigma_w^2 = 2$, $\sigma_b^2 = 0.05$) → ReLU →
# Flatten → Dense. Without pooling only equal positions meet in the kernel (the *diagonal* representation,
# $P^2 \cdot 64$ floats per block instead of $P^2 \cdot 64^2$) — `diagnostics["structure"]` says so per layer.

# %%
from sklearn.datasets import load_digits

d = load_digits()
Xall = d.images.reshape(len(d.images), -1).astype(float)
Xall -= Xall.mean(0)
Xall *= np.sqrt(Xall.shape[1]) / np.linalg.norm(Xall, axis=1, keepdims=True)
Xall = Xall.reshape(-1, 8, 8, 1)
Yall = np.eye(10)[d.target] - 0.1
order = np.random.default_rng(0).permutation(len(Xall))

P_test = 100 if QUICK else 300
test = order[-P_test:]
Xs, Ys = Xall[test], Yall[test]

def train_set(P):
    return Xall[order[:P]], Yall[order[:P]]

L = limits.layers
cnn = limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"),
                    L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.05))
print(cnn.describe())
k = limits.kernels.kernel(cnn, Xs[:4])
for s in k.diagnostics["structure"]:
    print(f"  layer {s['layer']:>2} {s['name']:<10} {s['representation']:<9} spatial {s['spatial']}")

# %% [markdown]
# ## 2. Theory: CNN-GP and CNTK learning curves
#
# Loss $\tfrac12\sum_o (f_o - y_o)^2$ averaged over the test set; error = fraction of test digits whose
# largest output is not the label. The CNTK ensemble is evaluated after `steps` GD steps of learning rate
# `lr` on the mean loss (the finite networks below use the same steps); its mean prediction gives the
# error column.

# %%
steps, lr = (100, 2.0) if QUICK else (1000, 2.0)
Ps = [20, 40, 80, 160] if QUICK else [25, 50, 100, 200, 400, 800]

def loss(F, Y):
    return 0.5 * np.sum((F - Y) ** 2, axis=-1).mean(-1)

def error(F, Y):
    return np.mean(np.argmax(F, -1) != np.argmax(Y, -1), axis=-1)

theory = {"nngp_loss": [], "nngp_err": [], "ntk_loss": [], "ntk_err": []}
for P in Ps:
    X, Y = train_set(P)
    post = limits.predict.nngp_posterior(cnn, X, Y, Xs, noise=1e-3)
    theory["nngp_loss"].append(loss(post.mean, Ys))
    theory["nngp_err"].append(error(post.mean, Ys))
    gd = limits.predict.gradient_descent(cnn, X, Y, Xs, t=[steps], flow=False, learning_rate=lr,
                                         reduction="mean", cov=False)
    theory["ntk_loss"].append(gd.test_loss(Ys)[0])          # includes the initial-function variance
    theory["ntk_err"].append(error(gd.mean[0], Ys))
theory = {key: np.array(v) for key, v in theory.items()}
for i, P in enumerate(Ps):
    print(f"P = {P:>4}: CNN-GP loss {theory['nngp_loss'][i]:.3f} error {theory['nngp_err'][i]:.2f} | "
          f"CNTK-GD loss {theory['ntk_loss'][i]:.3f} error (mean function) {theory['ntk_err'][i]:.2f}")

# %% [markdown]
# ## 3. Finite CNNs at three widths
#
# `cnn.finite(N).train_gd` trains `inits` independent CNNs of width $N$ (channels of the conv layer) by
# full-batch GD on the raw weights (NTK parameterisation, the same `steps` and `lr`). Per width and $P$:
# the mean test loss and its standard error over initialisations.

# %%
widths = [32, 64, 128] if QUICK else [64, 256, 1024]
P_points = [20, 80] if QUICK else [50, 100, 200]
inits = 4 if QUICK else 8
fin = np.zeros((len(widths), len(P_points)))
fin_se = np.zeros_like(fin)
fin_err = np.zeros_like(fin)
for a, N in enumerate(widths):
    for b, P in enumerate(P_points):
        X, Y = train_set(P)
        _, _, f = cnn.finite(N).train_gd(X, Y, [steps], lr, inits, seed=100 * a + b, X_test=Xs, reduction="mean")
        per = loss(f[0], Ys)                                 # one test loss per initialisation
        fin[a, b], fin_se[a, b] = per.mean(), per.std(ddof=1) / np.sqrt(per.size)
        fin_err[a, b] = error(f[0], Ys).mean()

ntk_at = np.interp(P_points, Ps, theory["ntk_loss"]) if not set(P_points) <= set(Ps) else \
    theory["ntk_loss"][[Ps.index(P) for P in P_points]]
print("finite − CNTK theory, in standard errors (the finite-width bias should shrink ∝ 1/N):")
for a, N in enumerate(widths):
    gap = fin[a] - ntk_at
    print(f"  N = {N:>4}: " + ", ".join(f"P = {P}: {g:+.3f} ({g / s:+.1f} SE), error {e:.2f}"
                                      for P, g, s, e in zip(P_points, gap, fin_se[a], fin_err[a])))
print("gap × N (constant if the gap is O(1/N)):")
for b, P in enumerate(P_points):
    print(f"  P = {P}: " + ", ".join(f"N = {N}: {(fin[a, b] - ntk_at[b]) * N:+.1f}" for a, N in enumerate(widths)))

# %%
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.3))
    ax.plot(Ps, theory["ntk_loss"], "-", color="k", label=f"CNTK: GD ensemble, {steps} steps")
    ax.plot(Ps, theory["nngp_loss"], "--", color="k", label="CNN-GP posterior mean")
    for a, N in enumerate(widths):
        ax.errorbar(np.array(P_points) * (1 + 0.04 * (a - 1)), fin[a], yerr=2 * fin_se[a], fmt="o", ms=3,
                    color=PALETTE[a % len(PALETTE)], label=f"finite CNN, N = {N} (±2 SE)")
    ax.set(xscale="log", yscale="log", xlabel="training-set size P", ylabel="test loss",
           title="digits 8×8: Conv 3×3 → ReLU → Flatten → Dense")
    ax.legend(fontsize=6)
    show(fig)

# %% [markdown]
# ## Where the measurement disagrees with the theory
#
# At these small widths the finite CNNs sit *below* the CNTK line (lower test loss) by an amount that
# shrinks as $N$ doubles — the $O(1/N)$ finite-width correction (at the quick sizes only 4 initialisations
# per point, so the standard errors are wide). The CNN-GP posterior mean (no initial-function variance,
# trained to convergence) has the lowest loss of all: the CNTK-GD line includes the variance of the random
# initial function that GD for `steps` steps does not remove, which is also what the finite networks carry.
# The test *error* printed for the finite networks is that of single networks (averaged over
# initialisations), higher than the error of the ensemble's mean function in the theory table: each
# network's random initial function perturbs its argmax.
# A global-average-pooling CNN (every pair of positions: $P^2\cdot 64^2$ floats per block) follows the same
# route; `python benchmarks/run.py layers` times its kernels against neural-tangents.

# %%
print(f"notebook wall time: {time.perf_counter() - _T0:.1f} s, CPU {time.process_time() - _C0:.1f} s "
      f"({'quick' if QUICK else 'full'} mode)")
