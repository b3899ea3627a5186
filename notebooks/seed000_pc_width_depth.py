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
# # Seed 000 — infinite width and depth limits of predictive coding networks
#
# **What the paper claims** (Innocenti, Achour & Bogacz; our summary).
# 1. For linear (residual) networks, the width- and depth-stable feature-learning parameterisations of predictive
#    coding (PC) are exactly those of backprop (BP): the abcd tables coincide (Table 2) and the depth exponent
#    analysis (branch $L^{-\alpha}$, §A.5) is the same.
# 2. With equilibrated activities the PC energy is $F^* = \text{MSE}/s(\theta)$ with a rescaling $s(\theta)\ge 1$ (Eq. 5–6);
#    under the stable parameterisations $s(\theta)-1 = \Theta(1/N)$ for MLPs (Eq. 16) and $\Theta(L/N)$ for ResNets with
#    $\alpha=1/2$ (Eq. 19), so when $N\gg L$, $F^*\to$ MSE and PC computes BP's gradients.
# 3. The infinite-width training curve of such a network is given by dynamical mean-field theory (Fig. 2).
#
# **This notebook**: the tables from `limits.params`, $s(\theta)$ from `limits.pc` sampled over random finite
# networks against its exact initialisation mean, PC vs BP training of finite networks (`limits.pc.train`), and the
# $N=\infty$ loss from `limits.dmft`.

# %%
import os, time
QUICK = os.environ.get("LIMITS_QUICK", "1") == "1"
_T0 = time.perf_counter()
# %matplotlib inline
import numpy as np
import limits
import limits.finite as F
from limits.style import paper_style, pyplot, theory_vs_finite, PALETTE, int_xticks, power_law, show
from IPython.display import Markdown, display
plt = pyplot()

print("quick mode" if QUICK else "full mode", "| limits", getattr(limits, "__version__", ""))

# %% [markdown]
# ## 1. PC and BP share the same parameterisation table (seed 000 Table 2)
#
# `limits.params.table` derives the exponents from the desiderata for each algorithm separately;
# `algorithm="pc"` uses PC's equilibrated energy $F^*$. We print the PC table and check it equals the BP one.

# %%
names = ["SP", "NTK", "MF", "muP"]
t_pc = limits.params.table(names, algorithm="pc", convention="variance")
t_bp = limits.params.table(names, algorithm="bp", convention="variance")
display(Markdown(t_pc.to_markdown()))
dp, db = t_pc.to_dict(), t_bp.to_dict()
print("PC table == BP table (exponent rows and regimes):", dp["columns"] == db["columns"] and dp["rows"] == db["rows"])
aa = limits.params.alpha_analysis(alpha="1/2")
print("depth analysis at α = 1/2 (§A.5):", {k: str(v) for k, v in aa.items()})

# %% [markdown]
# ### Depth: the branch multiplier $L^{-\alpha}$ (seed 000 §A.5)
#
# `limits.params.alpha_analysis` gives the depth exponents of a residual network with branches scaled by $L^{-\alpha}$:
# the feature update after one step scales as $L^{1-2\alpha}$ — flat for $\alpha = 1/2$ (Depth-μP), vanishing like $1/L$ for $\alpha = 1$.
# Finite check: `limits.finite.coordcheck.depth_check` (mean-field width, one GD step, read-in frozen) over depth.

# %%
import sympy as sp
from limits.finite.coordcheck import depth_check
from limits.stats import loglog_fit
depths = [4, 8, 16, 32] if QUICK else [4, 8, 16, 32, 64, 128]
depth_fits = {}
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for i, (alpha, a_num) in enumerate((("1/2", 0.5), ("1", 1.0))):
        fu = sp.sympify(limits.params.alpha_analysis(alpha=alpha)["feature_update"])      # L^{1−2α} (Eq. 123)
        pred = float(sp.log(fu.subs({q: 2 ** 20 for q in fu.free_symbols})) / sp.log(2 ** 20)) if fu.free_symbols else 0.0
        c = depth_check(limits.params.named("MF", convention="std"), depths=depths, N=(64 if QUICK else 256), alpha=a_num,
                        seeds=(4 if QUICK else 8), quantities=("dh:last",), predicted={"dh:last": pred}, seed=0)
        f = depth_fits[alpha] = c.fit("dh:last")
        theory_vs_finite(ax, f.x, power_law(f.x, f.mean, pred), f.mean, f.se, label=f"L^{pred:g} (α = {alpha})",
                         finite_label=f"finite, α = {alpha}", color=PALETTE[i])
        print(f"α = {alpha}: slope {f.tail_slope:+.3f} [{f.tail_ci_low:+.3f}, {f.tail_ci_high:+.3f}], predicted {pred:+g}")
    ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="|Δh| (last residual layer)", title="depth exponent α")
    int_xticks(ax, depths)
    ax.legend(fontsize=6); show(fig)

# %% [markdown]
# ## 2. $s(\theta)-1 = \Theta(1/N)$ for mean-field MLPs (seed 000 Eq. 16)
#
# Mean-field linear MLP, $L=5$ weight layers, $D=40$, $\gamma_0=1$ (raw weights $\mathcal N(0,1)$, multipliers
# $1/\sqrt D$, $N^{-1/2}$, $1/(\gamma_0 N)$). At initialisation each term of $s-1$ has mean $1/(\gamma_0^2N)$, so
# $\mathbb E[s-1] = (L-1)/(\gamma_0^2N)$ exactly. Points: `limits.pc.s_theta` over random networks (mean ± SE).

# %%
from limits.stats import loglog_fit, mean_se
rng = np.random.default_rng(0)
L, D, g0 = 5, 40, 1.0

def mf_mlp(N, L=L, D=D):
    W = [rng.standard_normal((N, D))] + [rng.standard_normal((N, N)) for _ in range(L - 2)] + [rng.standard_normal((1, N))]
    return W, [1 / np.sqrt(D)] + [N ** -0.5] * (L - 2) + [1 / (g0 * N)]

Ns = [16, 32, 64, 128] if QUICK else [16, 32, 64, 128, 256, 512]
reps = 30 if QUICK else 100
ms, ss = np.array([mean_se([limits.pc.s_theta(*mf_mlp(N)) - 1 for _ in range(reps)]) for N in Ns]).T
th = (L - 1) / (g0 ** 2 * np.array(Ns))
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    theory_vs_finite(ax, Ns, th, ms, ss, label="(L−1)/(γ0² N)", finite_label=f"finite nets, {reps} inits")
    ax.set(xscale="log", yscale="log", xlabel="width N", ylabel="s(θ) − 1", title="MF linear MLP at init")
    int_xticks(ax, Ns)
    ax.legend(); show(fig)
print("z:", np.round((ms - th) / ss, 2), "| fitted slope", loglog_fit(Ns, ms, ss), "(expected −1)")

# %% [markdown]
# ## 3. $s(\theta)-1 = \Theta(L/N)$ for linear ResNets, $\alpha = 1/2$ (seed 000 Eq. 19, 104; Fig. 3)
#
# `limits.pc.s_seed000_eq104` evaluates the paper's ResNet form. The exact initialisation mean is
# $L\big((1+1/L)^{L-1}-1\big)/(\gamma_0^2N)$, which tends to $(e-1)L/N$ only as $L\to\infty$.

# %%
grid = [(32, L_) for L_ in (4, 8, 16, 32)] if QUICK else [(128, L_) for L_ in (4, 8, 16, 32, 64, 128)]   # fixed N, L varies
reps_r = 10 if QUICK else 30
Dr = 10
rows = []
for N, Lr in grid:
    vals = []
    for _ in range(reps_r):
        W = [rng.standard_normal((N, Dr))] + [rng.standard_normal((N, N)) for _ in range(Lr - 2)] + [rng.standard_normal((1, N))]
        vals.append(limits.pc.s_seed000_eq104(W, N, 0.5, g0) - 1)
    m, s = mean_se(vals)
    rows.append((Lr / N, m, s, Lr * ((1 + 1 / Lr) ** (Lr - 1) - 1) / (g0 ** 2 * N), (np.e - 1) * Lr / N))
x, mr, sr, exact, asym = np.array(rows).T
o = np.argsort(x)
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    theory_vs_finite(ax, x[o], exact[o], mr[o], sr[o], label="exact init mean", finite_label=f"finite ResNets, N={grid[0][0]}, {reps_r} inits")
    ax.plot(x[o], asym[o], "k--", label="(e−1) L/N (Eq. 19, L → ∞)")
    ax.set(xscale="log", yscale="log", xlabel="L / N", ylabel="s(θ) − 1", title="MF linear ResNet, α = 1/2")
    ax.legend(); show(fig)
print("z against the exact mean:", np.round((mr - exact) / sr, 2))
print("(e−1)L/N over the exact mean:", np.round(asym / exact, 3), "at L =", [g[1] for g in grid])

# %% [markdown]
# ## 4. Training: PC on $F^*$ vs BP, and the $N=\infty$ curve (seed 000 Fig. 2)
#
# Toy task (x ~ N(0, I_40), y = ±1), $L = 5$ linear mean-field MLP, $\eta = \eta_0\gamma_0^2N$, $\eta_0 = 0.025$, full-batch GD.
# `limits.pc.train` trains the same initial weights on $F^*$ (PC) and on the MSE (BP). The DMFT curve
# (`limits.dmft.seed000`) is the $N=\infty$ loss; the points are the BP loss of finite networks (mean ± SE over inits).

# %%
P = 10 if QUICK else 20
steps, every = (100, 10) if QUICK else (150, 10)   # DMFT memory ≈ 32(L−1)(steps·P)² bytes
Xt, yt = limits.dmft.toy_task(P=P, D=40, seed=0)
dm = limits.dmft.seed000(Xt, yt, steps, L=5, eta0=0.025, gamma0=g0)
k_dm = np.rint(dm.t / dm.dt).astype(int)
widths = [16, 64, 256] if QUICK else [16, 64, 256, 1024]
n_init = 3 if QUICK else 6
rec = {}
for N in widths:
    runs = []
    for _ in range(n_init):
        W, mult = mf_mlp(N)
        tp = limits.pc.train(W, Xt, yt[:, None], objective="pc", lr=0.025 * g0 ** 2 * N, steps=steps, multipliers=mult, record_every=every)
        tb = limits.pc.train(W, Xt, yt[:, None], objective="bp", lr=0.025 * g0 ** 2 * N, steps=steps, multipliers=mult, record_every=every)
        runs.append((tb.mse, tp.mse / tp.energy, tp.cos_total, tp.s))
    rec[N] = [np.array(r) for r in zip(*runs)]
kk = np.arange(0, steps + 1, every)[: rec[widths[0]][0].shape[1]]
with paper_style():
    fig, ax = plt.subplots(1, 3, figsize=(11, 3.2))
    ax[0].plot(k_dm, dm.loss_mean, "k-", label="DMFT (N = ∞)")
    for i, N in enumerate(widths):
        bp, ratio, cos, s = rec[N]
        ax[0].errorbar(kk, bp.mean(0), bp.std(0, ddof=1) / np.sqrt(n_init), fmt="o", mfc="none", color=PALETTE[i + 1], label=f"BP, N={N}")
        ax[1].plot(kk, ratio.mean(0), color=PALETTE[i + 1], label=f"N={N}")
        ax[2].plot(kk, cos.mean(0), color=PALETTE[i + 1], label=f"N={N}")
    ax[0].set(yscale="log", xlabel="GD step", ylabel="loss (1/2P)Σ(f−y)²", title="finite BP → DMFT")
    ax[1].set(xlabel="GD step", ylabel="MSE / F*", title="PC energy → MSE")
    ax[2].set(xlabel="GD step", ylabel="cos(∇F*, ∇MSE)", title="PC gradient → BP gradient")
    ax[0].legend(); ax[1].legend(); show(fig)
for N in widths:
    bp, ratio, cos, s = rec[N]
    j = np.searchsorted(k_dm, kk)
    gap = np.abs(bp.mean(0) - dm.loss_mean[j])[1:].max()
    print(f"N={N:5d}: max |BP loss − DMFT| = {gap:.4f};  s(θ) at init {s[:, 0].mean():.4f} (theory 1 + {(L - 1) / N:.4f});  "
          f"min cos over training {cos.min():.5f}")

# %% [markdown]
# ## Verdict table (`limits.validate`)
#
# The comparisons of this notebook as `limits.validate.Case` objects: statistical cases pass when |z| ≤ 4 and, where a
# rate is fitted, the expected rate lies in its 95% CI; exact cases compare within a tolerance. Rows that test the paper's
# statement *as printed* are expected to fail where the next section says so. `limits validate <component>` runs the
# component's full registered cases.

# %%
from limits.validate import Case, Report
cases = [Case.exact("params", "PC table = BP table (seed 000 Table 2)", 1.0, float(dp["columns"] == db["columns"] and dp["rows"] == db["rows"]), tol=0),
         Case.statistical("pc", "s(θ) − 1 = (L−1)/(γ0²N), MF linear MLP at init", th, ms, ss, rate=loglog_fit(Ns, ms, ss), rate_expected=-1.0),
         Case.statistical("pc", "s(θ) − 1 = L((1+1/L)^{L−1} − 1)/(γ0²N), linear ResNet α = 1/2", exact, mr, sr),
         Case.statistical("pc", "s(θ) − 1 = (e−1)L/N (Eq. 19 as stated)", asym, mr, sr)]
gaps, gses = [], []
for N in widths:
    bp = rec[N][0][:, -1]                                     # final BP loss per init
    gaps.append(abs(bp.mean() - dm.loss_mean[-1])); gses.append(bp.std(ddof=1) / np.sqrt(n_init))
for alpha, f in depth_fits.items():
    cases.append(Case.statistical("params", f"feature update ∝ L^(1−2α), α = {alpha}", float(f.predicted), f.tail_slope, f.tail_slope_se))
cases.append(Case.statistical("dmft", f"final BP loss at N={widths[-1]} vs DMFT (N = ∞)", dm.loss_mean[-1], rec[widths[-1]][0][:, -1].mean(), gses[-1]))
display(Markdown(Report(tuple(cases)).to_markdown("Seed 000: theory vs finite networks (this notebook)")))
print("|final BP loss − DMFT| per width:", np.round(gaps, 4), "±", np.round(gses, 4))

# %% [markdown]
# ## Where our measurement disagrees with the paper
#
# We found no disagreement with the paper's qualitative claims: the PC and BP tables coincide, $s(\theta)-1$ follows
# $1/N$ (MLP) and $L/N$ (ResNet, $\alpha=1/2$), $F^*\to$ MSE and $\cos(\nabla F^*,\nabla\text{MSE})\to1$ with width, and finite BP
# runs approach the DMFT loss. Two quantitative points differ from how the paper states them:
#
# * **Eq. 19's constant is asymptotic.** $(e-1)L/N$ overstates the initial $s(\theta)-1$ of a depth-$L$ ResNet at moderate depth;
#   the exact initialisation mean $L((1+1/L)^{L-1}-1)/(\gamma_0^2N)$ fits the finite networks (z-scores above), and the ratio
#   printed in section 3 shows how far the asymptotic form is off at each depth ($\approx 1.8\times$ at $L=4$).
# * **A pitfall rather than a disagreement: the N = ∞ curve depends on the loss normalisation.** Seed 000 Eq. 1 averages the loss over the $P$ samples; the DMFT
#   literature sums it. `limits.dmft.seed000` maps one GD step to $dt = \eta_0/P$ (`limits.dmft.grid.gd_time_step`); using the
#   summed convention instead would stretch the time axis by $P$. In section 4 the finite BP losses approach the curve
#   of the mean-normalised map as N grows (printed gaps).

# %%
print(f"notebook wall time: {time.perf_counter() - _T0:.1f} s ({'quick' if QUICK else 'full'} mode)")
