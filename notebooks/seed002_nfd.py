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
# # Seed 002 — Neural Feature Dynamics (NFD) of deep ResNets
#
# **What the paper claims** (our summary). For a pre-activation ResNet with single-layer blocks
# $h^{l+1} = h^l + \sqrt{T/L}\,n^{-1/2}W^l\phi(h^l)$ under Depth-μP, the joint limit $n, L\to\infty$ of features
# and gradients is a coupled forward–backward McKean–Vlasov SDE system (NFD). At initialisation the
# kernel solves the ODE $d\Sigma/dt = \mathbb E_{\mathcal N(0,\Sigma)}[\phi\phi^\top]$, reached by the depth-$L$ network with an
# Euler error $O(1/L)$. During training the forward and backward SDEs are driven by *independent* Brownian
# motions: the correlation from reusing $W$ in backprop is claimed to vanish as $L\to\infty$, so the
# gradient-independence assumption (GIA) "is restored" (Cor. 1, Fig. 4). With two-layer blocks the first
# internal layer's feature learning collapses like $L^{-1/2}$, and a depth-aware learning rate
# $\eta_1 = \bar\eta n\sqrt{L/T}$ restores it (§5, App. H).
#
# **This notebook** checks each statement with `limits.nfd` (kernel ODE, Euler recursion, particle
# Euler–Maruyama solver of the training SDEs) against finite ResNets (`limits.finite`,
# `limits.finite.gia`), and reports where the measurement disagrees.

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
# ## 1. Kernel ODE vs its Euler scheme (seed 002 Prop. 2–5)
#
# `limits.nfd.residual_recursion` is the depth-$L$ (infinite-width) kernel, the Euler scheme with step $T/L$;
# `limits.nfd.kernel_ode` solves the ODE adaptively. The error of $\Sigma_T$ and of the backward kernel $\Gamma_0$
# should fall like $1/L$.

# %%
from limits.stats import loglog_fit
rng = np.random.default_rng(2)
Z = rng.standard_normal((5, 3)); X = Z / np.linalg.norm(Z, axis=1, keepdims=True) * np.sqrt(3)
Ls = np.array([4, 8, 16, 32] if QUICK else [4, 8, 16, 32, 64, 128])
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for act in ("erf", "relu"):
        k = limits.nfd.kernel_ode(X, T=1.0, activation=act)
        eS = [np.abs(limits.nfd.residual_recursion(X, int(L), 1.0, act).Sigma[-1] - k.Sigma).max() for L in Ls]
        eG = [np.abs(limits.nfd.residual_recursion(X, int(L), 1.0, act).Gamma[0] - k.Gamma0).max() for L in Ls]
        ax.loglog(Ls, eS, "o-", label=f"{act}: Σ_T"); ax.loglog(Ls, eG, "s--", label=f"{act}: Γ_0")
        int_xticks(ax, Ls)
        print(f"{act}: slope Σ_T {loglog_fit(Ls, eS)} | slope Γ_0 {loglog_fit(Ls, eG)}")
    ax.set(xlabel="depth L", ylabel="max |Euler − ODE|", title="Euler error ∝ 1/L")
    ax.legend()
    show(fig)

# %% [markdown]
# ## 2. Finite ResNets vs the forward SDE at initialisation
#
# Finite ResNets of width $n$ (`limits.finite.resnet` with $\rho=\sqrt{T/L}$) sampled over initialisations: the mean
# Gram $h^Lh^{L\top}/n$ against the depth-$L$ theory (Euler) and the $L=\infty$ ODE value.

# %%
Xf = rng.standard_normal((3, 4))
kf = limits.nfd.kernel_ode(Xf, T=1.0, activation="erf")
Lf = [2, 4, 8] if QUICK else [2, 4, 8, 16, 32]
nf, Sf = (256, 60) if QUICK else (1024, 200)
est, se, th = [], [], []
for L in Lf:
    ek = F.empirical_kernels(F.resnet(4, nf, L, activation="erf", rho=np.sqrt(1.0 / L)), Xf, Sf, seed=10 + L)
    est.append(ek.mean[L][0, 0]); se.append(ek.se[L][0, 0])
    th.append(limits.nfd.residual_recursion(Xf, L, 1.0, "erf").Sigma[L][0, 0])
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    theory_vs_finite(ax, Lf, th, est, se, label="Euler (n = ∞, depth L)", finite_label=f"finite n={nf}, {Sf} nets")
    ax.axhline(kf.Sigma[0, 0], color="k", ls="--", label="kernel ODE (L = ∞)")
    ax.set(xscale="log", xlabel="depth L", ylabel=r"$\Sigma^L_{11}$", title="forward kernel, erf, T = 1")
    int_xticks(ax, Lf)
    ax.legend(loc="lower right")
    show(fig)
print("z-scores finite vs Euler:", np.round((np.array(est) - th) / np.array(se), 2))

# %% [markdown]
# ## 3. Training: NFD particles vs finite networks (seed 002 §4, Fig. 3)
#
# `limits.nfd.training.train_particles` integrates the NFD training dynamics (online SGD, tanh, $d=10$, $T=1$,
# $\bar\eta=1$) with $M$ particles; with $M=n$ it has exactly the law of the *decoupled* finite network
# (backward pass through an independent copy $\tilde W$ that receives the same updates). The theory line is
# the particle mean at large $M$; points are finite networks (`limits.finite.gia.online_sgd`).

# %%
from limits.finite.gia import gia_task, online_sgd
from limits.nfd.training import train_particles
K = 3
Xtr, ytr, Xte = gia_task(K=K, P_test=3)
n, L, S, M, Sp = (64, 8, 12, 1024, 3) if QUICK else (256, 16, 32, 8192, 6)
fp = np.array([train_particles(Xtr, ytr, Xte, L=L, M=M, seed=100 + s).f_test for s in range(Sp)])  # (Sp, K+1, P)
fdec = np.array([online_sgd(Xtr, ytr, Xte, n=n, L=L, mode="decoupled", seed=500 + s).f_test for s in range(S)])
fcou = np.array([online_sgd(Xtr, ytr, Xte, n=n, L=L, mode="coupled", seed=500 + s).f_test for s in range(S)])
steps = np.arange(K + 1)
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    pm = fp.mean(0)
    theory_vs_finite(ax, steps, pm[:, 0], fdec.mean(0)[:, 0], fdec.std(0, ddof=1)[:, 0] / np.sqrt(S),
                     label=f"NFD particles (M={M})", finite_label=f"decoupled n={n}")
    ax.errorbar(steps + 0.05, fcou.mean(0)[:, 0], fcou.std(0, ddof=1)[:, 0] / np.sqrt(S), fmt="s", mfc="none",
                color=PALETTE[1], label=f"coupled (ordinary backprop) n={n}")
    ax.set(xlabel="SGD step", ylabel="test output $f(x_1)$", title=f"NFD training, L = {L}")
    ax.legend()
    show(fig)
pse = fp.std(0, ddof=1)[-1] / np.sqrt(Sp)
for name, f in (("decoupled", fdec), ("coupled", fcou)):
    z = (f.mean(0)[-1] - pm[-1]) / np.sqrt(f.var(0, ddof=1)[-1] / S + pse ** 2)
    print(f"{name:9s} finite − particles after {K} steps, z per test point: {np.round(z, 2)}")
gap = (fcou - fdec)[:, -1]              # same seed = same U_0, v_0, W_0 in both modes (paired)
print(f"paired finite gap coupled − decoupled after {K} steps: {np.round(gap.mean(0), 4)} "
      f"± {np.round(gap.std(0, ddof=1) / np.sqrt(S), 4)}")

# %% [markdown]
# ## 4. Is GIA restored at infinite depth? (seed 002 Cor. 1) — our measurement
#
# Going beyond the seed, `train_particles(mode="coupled")` keeps the reused-weight response terms (the exact
# law of ordinary backprop at $M=n$). With $M$ large this is the *infinite-width, finite-depth* dynamics of ordinary
# training; `mode="decoupled"` is NFD. Cor. 1 predicts their gap vanishes like $1/L$ (log–log slope −1).
# `limits.gallery.nfd.gia_limit_study` runs both on the same seeds over $L$.

# %%
from limits.gallery.nfd import gia_limit_study
Lg = [4, 16, 64] if QUICK else [4, 16, 64, 256]
gl = gia_limit_study(Ls=Lg, M=(1024 if QUICK else 4096), n_seeds=(3 if QUICK else 6), K=3, seed=0)
gm, gs = gl["gap_mean"], gl["gap_se"]
rms = gl["gap_rms"]
rms_se = np.sqrt(np.sum((gm * gs) ** 2, axis=1)) / (gm.shape[1] * rms)
fit = loglog_fit(Lg, rms, rms_se)
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    ax.errorbar(Lg, rms, rms_se, fmt="o", mfc="none", label="measured rms gap (coupled − NFD)")
    ax.plot(Lg, rms[0] * (np.array(Lg) / Lg[0]) ** -1.0, "k--", label="Cor. 1: ∝ 1/L")
    ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="rms test-output gap", title="GIA at infinite width")
    int_xticks(ax, Lg)
    ax.legend()
    show(fig)
print("rms gap per L:", np.round(rms, 4), "| fitted slope", fit, "| slope −1 inside CI:", fit.contains(-1.0))
print("a + b/L extrapolated L → ∞ gap per test point:", np.round(gl["gap_Linf"], 4), "±", np.round(gl["gap_Linf_se"], 4))
# the same study with the input layer U frozen (the reused-weight correction is carried by the input-layer update)
gf = gia_limit_study(Ls=Lg, M=(1024 if QUICK else 4096), n_seeds=(3 if QUICK else 6), K=3, seed=0, train_input_layer=False)
print("U frozen: rms gap per L:", np.round(gf["gap_rms"], 4), "| ratio trained/frozen:", np.round(rms / gf["gap_rms"], 1),
      "| slope", loglog_fit(Lg, gf["gap_rms"]))

# %% [markdown]
# **Which infinite-width dynamics do trained ResNets follow?** The coupled particles are the toolkit's
# infinite-width, finite-depth dynamics of *ordinary* backprop: each layer's weights are reused by the backward
# pass, and the response terms this creates are kept. They, not the NFD, are the large-width limit of
# trained ResNets (with $M = n$ particles they have exactly the law of the finite networks). The NFD drops those
# terms (gradient independence). To first order in $\bar\eta$ the difference is a computed prediction,
# `limits.nfd.gia_first_order` ($O(dt)$ per layer, $O(1)$ in total), and `limits.check` tests it against finite
# ResNets of the same depth trained both ways from the same initialisation (Richardson extrapolation in $\bar\eta$,
# then $N\to\infty$):

# %%
from limits.finite.gia import gia_task
Xg, yg, Xgt = gia_task(K=1)
pred = limits.nfd.gia_first_order(Xg, yg, Xgt, L=2)
chk = limits.check(pred, widths=(32, 64, 128, 256), inits=(150 if QUICK else 1200), seed=0, progress=False)
print("first-order gap/η̄ at L = 2:", np.round(pred.gap, 4))
print("finite ResNets, N → ∞:      ", np.round(chk.extrapolated, 4), "±", np.round(chk.extrapolated_se, 4))
print(f"worst |z∞| = {chk.worst_z:.2f}, power {chk.power:.1%}, passed: {chk.passed}")

# %% [markdown]
# ## 5. Two-layer blocks: first-layer collapse and the depth-aware rate (seed 002 §5, App. H)
#
# One SGD step with the frozen-weight baselines of App. H (`limits.finite.gia.collapse_study`): the first internal
# layer's update $\Delta u$ under $\eta=\bar\eta n$ shrinks like $L^{-1/2}$; with $\eta_1=\bar\eta n\sqrt{L/T}$ it is flat in $L$. The exponent
# comes from the symbolic depth rules in `limits.params.two_layer_block`.

# %%
from limits.finite.gia import collapse_study
Lc = [4, 16, 64] if QUICK else [4, 16, 64, 256]
c = collapse_study(Lc, n=(64 if QUICK else 256), eta_bar=0.5, n_seeds=(3 if QUICK else 8), seed=0)
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for key, expo, lab, col in (("du_rms", -0.5, "η = η̄n", PALETTE[0]), ("du_rms_corrected", 0.0, "η₁ = η̄n√(L/T)", PALETTE[1])):
        v = getattr(c, key); m, s = v.mean(1), v.std(1, ddof=1) / np.sqrt(v.shape[1])
        theory_vs_finite(ax, Lc, power_law(Lc, m, expo), m, s, label=f"L^{expo:g} ({lab})",
                         finite_label=f"finite, {lab}", color=col)
        print(f"{lab}: Δu rms {np.round(m, 4)} | slope {loglog_fit(Lc, m, s)} (predicted {expo})")
    ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="first-layer |Δu| (rms)", title="two-layer blocks")
    int_xticks(ax, Lc)
    ax.legend()
    show(fig)

# %% [markdown]
# ## Verdict table (`limits.validate`)
#
# The comparisons of this notebook as `limits.validate.Case` objects: statistical cases pass when |z| ≤ 4 and, where a
# rate is fitted, the expected rate lies in its 95% CI; exact cases compare within a tolerance. Rows that test the paper's
# statement *as printed* are expected to fail where the next section says so. `limits validate <component>` runs the
# component's full registered cases.

# %%
from limits.validate import Case, Report
cases = []
for act in ("erf", "relu"):
    k = limits.nfd.kernel_ode(X, T=1.0, activation=act)
    eS = [np.abs(limits.nfd.residual_recursion(X, int(L), 1.0, act).Sigma[-1] - k.Sigma).max() for L in Ls]
    cases.append(Case.exact("nfd", f"Euler → kernel ODE, log-log slope of the Σ_T error = −1 ({act}, tol 0.05)", -1.0,
                            loglog_fit(Ls, eS).slope, tol=0.05))
cases.append(Case.statistical("nfd", f"finite ResNets (n={nf}) vs depth-L theory, Σ^L_11", th, est, se))
pse_all = fp.std(0, ddof=1)[-1] / np.sqrt(Sp)
cases.append(Case.statistical("nfd", f"decoupled finite nets (n={n}) = NFD particles after {K} SGD steps", pm[-1], fdec.mean(0)[-1],
                              np.sqrt(fdec.var(0, ddof=1)[-1] / S + pse_all ** 2)))
cases.append(Case.statistical("nfd", "GIA: coupled − NFD gap vs L, measured slope 0", rms[0], rms[-1],
                              np.hypot(rms_se[0], rms_se[-1]), rate=fit, rate_expected=0.0))
cases.append(Case.statistical("nfd", "GIA: coupled − NFD gap vs L, seed 002 Cor. 1 (slope −1)", rms[0] * (Lg[-1] / Lg[0]) ** -1.0,
                              rms[-1], rms_se[-1], rate=fit, rate_expected=-1.0))
for key, expo, lab in (("du_rms", -0.5, "η = η̄n"), ("du_rms_corrected", 0.0, "η₁ = η̄n√(L/T)")):
    v = getattr(c, key); m, s = v.mean(1), v.std(1, ddof=1) / np.sqrt(v.shape[1])
    pl = power_law(Lc, m, expo)
    cases.append(Case.statistical("nfd", f"two-layer blocks, first-layer Δu ∝ L^{expo:g} ({lab})", pl[-1], m[-1], s[-1],
                                  z_crit=1e9, rate=loglog_fit(Lc, m, s), rate_expected=expo))
display(Markdown(Report(tuple(cases)).to_markdown("Seed 002: theory vs finite networks (this notebook)")))

# %% [markdown]
# ## Where our measurement disagrees with the paper
#
# **GIA is not restored by depth in our measurement.** With infinite width (particles, $M\to\infty$) and finite depth,
# the test-output gap between ordinary backprop (coupled, with the reused-weight response terms) and NFD (decoupled)
# does **not** shrink from $L=4$ to $L=64$ (or 256 in full mode): the fitted log–log slope above is near 0 and
# Cor. 1's slope −1 is outside its confidence interval, and the $a+b/L$ extrapolation to $L=\infty$ leaves a gap
# many standard errors from 0. The first-order prediction agrees: the reused-weight correction is $O(T/L)$ per layer
# but adds up over $L$ layers, and finite ResNets trained with ordinary backprop follow it (section 4). In section 3 the decoupled finite networks match the NFD particles, and the paired
# (common-random-number) gap between coupled and decoupled finite networks is printed at one depth, for comparison
# with the infinite-width gap of section 4 (the sharper test: no finite-width noise). The validation case `limits validate nfd` ("GIA at infinite width") and the
# figure `nfd_gia_limit` record the full-size numbers; freezing the input layer (`train_input_layer=False`)
# shrinks the gap by the factor printed in section 4, again without a clear decay in $L$.
#
# The remaining claims — the kernel ODE and its $O(1/L)$ Euler error, finite networks → forward SDE, NFD particles
# = decoupled networks in law, and the $L^{-1/2}$ first-layer collapse with its $\sqrt{L}$ correction — are reproduced above.

# %%
print(f"notebook wall time: {time.perf_counter() - _T0:.1f} s ({'quick' if QUICK else 'full'} mode)")
