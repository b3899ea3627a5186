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
# # Seed 003 — μP for predictive coding and target propagation
#
# **What the paper claims** (anonymous submission; our summary). Local-loss algorithms — predictive coding (PC, targets from
# inference dynamics) and target propagation (TP/DTP, targets from feedback maps) — have their own maximal-update
# parameterisations. For PC with inference step size $\gamma_L = \gamma' M^{-\bar\gamma_L}$ on the last layer, μP exists for
# $-1\le\bar\gamma_L\le0$ (Table 1, Thm. 4.1); its linear fixed point has a closed form (Thm. 4.2, Eq. 15–16) showing that PC's
# gradient interpolates between the first-order (BP) gradient ($\bar\gamma_L = 0$) and a Gauss–Newton-like one ($\bar\gamma_L=-1$);
# in standard settings at infinite width it behaves like BP (Fig. 2). For TP, μP keeps the *standard* last-layer scaling
# $b_L=1/2$ and still learns features (Thm. 5.1). The paper also lists NTK-type exponents for PC (Eq. S.71–S.74).
#
# **This notebook**: the table derived by `limits.params`; the closed-form fixed point from `limits.pc` against the literal
# theorem and against iterative inference; PC–BP–GN gradient cosines; and width sweeps of finite networks
# (`limits.finite.coordcheck`) against the predicted update exponents.

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
# ## 1. The parameterisation table (seed 003 Table 1), derived
#
# Std convention (TP4: $W = N^{-a}w$, $w\sim\mathcal N(0,N^{-2b})$, $\eta = \eta' N^{-c}$) in the gauge $a = 0$. The single-shot PC column keeps
# $\bar\gamma_L$ symbolic and states its validity interval.

# %%
from limits.params.tables import make_column_table
cols = [("BP μP", "muP", "bp", {}), ("GNT μP", "muP", "gnt", {}),
        ("PC μP", "muP", "pc", {"pc_model": "single-shot"}), ("TP μP", "muP", "tp", {})]
t1 = make_column_table(cols, convention="std", gauge="a0")
display(Markdown(t1.to_markdown()))

# %% [markdown]
# ## 2. The linear PC fixed point in closed form (Thm. 4.2, Eq. 15–16)
#
# `limits.pc.seed003_fixed_point` implements the theorem literally (products $W_{L:i}$, layer weights $\gamma_l$);
# `limits.pc.equilibrium` solves the same problem through the telescoped rescaling $S$; `limits.pc.infer` runs the actual
# iterative inference (GD on the activities). All three must agree.

# %%
rng = np.random.default_rng(3)
dims = [4, 16, 16, 16, 2]
W = [rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i]) for i in range(4)]
gam = [1.0, 1.0, 1.0, 0.5]
x, y = rng.standard_normal(4), rng.standard_normal(2)
fp = limits.pc.seed003_fixed_point(W, x, y, gam)
eq = limits.pc.equilibrium(W, x[None], y[None], layer_weights=gam)
err_e = max(np.abs(fp.e[l][:, 0] - eq.errors[l][0]).max() for l in range(4))
err_v = max(np.abs(fp.v[l][:, 0] - eq.z[l][0]).max() for l in range(3))
lm = limits.pc.extreme_eigenvalues(W, layer_weights=gam).lambda_max
inf = limits.pc.infer(W, x[None], y[None], beta=1.5 / lm, steps=20000, layer_weights=gam, tol=1e-11, warn=False)
print(f"Thm 4.2 literal vs telescoped equilibrium: max |Δe*| = {err_e:.1e}, max |Δv*| = {err_v:.1e}")
print(f"iterative inference: relative distance to z* = {inf.distance[-1]:.1e} after {inf.steps} steps")
# Eq. 16 as printed sums i = 2..l-1; for l = 2 that sum is empty:
u = np.linalg.solve(np.eye(2) + fp.C, y - W[3] @ W[2] @ W[1] @ W[0] @ x)
printed = W[1] @ W[0] @ x + (W[3] @ W[2]).T @ u
print(f"Eq. 16 with the printed upper limit, l = 2: max |v − z*| = {np.abs(printed - eq.z[1][0]).max():.3f}")
# sign of Eq. 15: with e_l = v_l − W_l v_{l−1}, e*_L = (I + C)^{-1}(y − f), the opposite of the printed (W x − y)
f = W[3] @ W[2] @ W[1] @ W[0] @ x
print("e*_L = (I + C_γ)^{-1}(y − f):", np.allclose(fp.e[-1][:, 0], np.linalg.solve(eq.S * gam[-1], y - f)),
      "| equals the printed sign (f − y):", np.allclose(fp.e[-1][:, 0], np.linalg.solve(eq.S * gam[-1], f - y)))

# %% [markdown]
# ## 3. PC gradients vs BP and Gauss–Newton (seed 003 Fig. 2)
#
# Three-layer linear μP network ($W_1\sim\mathcal N(0,1/d)$, $W_2\sim\mathcal N(0,1/M)$, $W_3\sim\mathcal N(0,1/M^2)$, output width $M_L = 8$), one sample,
# layer weights $\gamma_{1,2} = 1$ and $\gamma_L = M^{-\bar\gamma_L}$: per-layer cosine of the PC weight gradient at the fixed point
# (`limits.pc.pc_gradients`) with BP (`bp_gradients`) and with Gauss–Newton targets (`gn_gradients`, damping 1e-6).
# The paper: with $M_L = 1$ PC's gradient *is* BP's (exact; first panel checks it), and as the hidden width grows PC approaches BP
# for $\bar\gamma_L = 0$ (dashed line: the $M\to\infty$ value 1), less so for $\bar\gamma_L=-1$. Points: finite networks, mean ± SE over draws.

# %%
d_in, ML = 16, 8
Ms = [16, 64, 256] if QUICK else [16, 64, 256, 1024]
reps = 4 if QUICK else 10

def cosines(M, gbar, ML=ML):
    cb, cg = [], []
    for _ in range(reps):
        Wc = [rng.standard_normal((M, d_in)) / np.sqrt(d_in), rng.standard_normal((M, M)) / np.sqrt(M),
              rng.standard_normal((ML, M)) / M]
        Xc, Yc = rng.standard_normal((1, d_in)), rng.standard_normal((1, ML))
        gp = limits.pc.pc_gradients(Wc, Xc, Yc, layer_weights=[1.0, 1.0, float(M) ** (-gbar)])
        cb.append(limits.pc.layer_cosines(gp, limits.pc.bp_gradients(Wc, Xc, Yc)))
        cg.append(limits.pc.layer_cosines(gp, limits.pc.gn_gradients(Wc, Xc, Yc, damping=1e-6)))
    return np.array(cb), np.array(cg)                      # (reps, 3 layers)

for gbar in (0, -1):      # M_L = 1: the paper says PC's gradient then corresponds to BP's
    c1 = np.array([cosines(M, gbar, ML=1)[0].mean(0) for M in Ms])
    print(f"M_L = 1, γ̄_L = {gbar:+d}: per-layer cos(PC, BP), rows M = {Ms}:", np.round(c1, 4).tolist())
# ... the PC *errors* are exactly parallel to BP's backward signals when M_L = 1:
M1 = 64
W1 = [rng.standard_normal((M1, d_in)) / np.sqrt(d_in), rng.standard_normal((M1, M1)) / np.sqrt(M1), rng.standard_normal((1, M1)) / M1]
x1, y1 = rng.standard_normal(d_in), rng.standard_normal(1)
fp1 = limits.pc.seed003_fixed_point(W1, x1, y1, [1.0, 1.0, float(M1)])
delta = [(W1[2] @ W1[1]).T @ (y1 - W1[2] @ W1[1] @ W1[0] @ x1), W1[2].T @ (y1 - W1[2] @ W1[1] @ W1[0] @ x1)]
print("M_L = 1, γ̄_L = −1: cos(e*_l, BP signal δ_l), l = 1, 2:",
      [round(float(abs(fp1.e[l][:, 0] @ delta[l]) / np.linalg.norm(fp1.e[l]) / np.linalg.norm(delta[l])), 12) for l in range(2)])
with paper_style():
    fig, ax = plt.subplots(1, 2, figsize=(8, 3))
    for k, gbar in enumerate([0, -1]):
        res = [cosines(M, gbar) for M in Ms]
        for l in range(3):
            for j, (lab, mk) in enumerate((("BP", "o"), ("GN", "x"))):
                v = np.array([r[j][:, l] for r in res])            # (len(Ms), reps)
                m, se = v.mean(1), v.std(1, ddof=1) / np.sqrt(reps)
                ax[k].errorbar(Ms, m, se, fmt=mk + ("-" if j == 0 else ":"), mfc="none", color=PALETTE[l],
                               label=f"layer {l + 1} vs {lab}")
                print(f"γ̄_L = {gbar:+d}, layer {l + 1}: cos(PC, {lab}) = {np.round(m, 3)} at M = {Ms}")
        ax[k].axhline(1.0, color="k", ls="--", lw=1)
        ax[k].set(xscale="log", xlabel="hidden width M", ylabel="cosine", title=f"γ̄_L = {gbar}, M_L = {ML}")
        int_xticks(ax[k], Ms)
    ax[0].legend(fontsize=5); show(fig)

# %% [markdown]
# ## 4. Width sweeps: updates stay $\Theta(1)$ under μP (seed 003 Thm. 4.1, 5.1)
#
# `limits.finite.coordcheck.pc_width_check` runs one forward-initialised sequential inference sweep and one weight step of
# single-shot PC on tanh networks ($L=3$) across widths; `width_check` does the same for TP. Lines: the exponent predicted by
# `limits.params.update_exponents` (prefactor fitted); points: finite networks (mean ± SE over seeds); the fitted
# tail slope has a 95% CI.

# %%
import sympy as sp
from limits.params import update_exponents, Parameterisation
from limits.finite.coordcheck import pc_width_check, width_check
widths = [64, 128, 256, 512] if QUICK else [64, 128, 256, 512, 1024]
seeds = 4 if QUICK else 8
h = sp.Rational(1, 2)

def sweep(p, q="dWh:out"):
    u = update_exponents(p)
    pred = {"dWh:out": -u["r_output"], "dh:hidden": -u["r"]}
    return pc_width_check(p, widths=widths, seeds=seeds, predicted=pred, seed=0).fit(q)

cases_w = {
    "PC μP, γ̄_L = 0": sweep(limits.params.named("muP", convention="std", algorithm="pc", gamma_bar_L=0, gauge="a0"), "dh:hidden"),
    "PC μP, γ̄_L = −1": sweep(limits.params.named("muP", convention="std", algorithm="pc", gamma_bar_L=-1, gauge="a0"), "dh:hidden"),
    "TP μP (b_L = 1/2)": width_check(limits.params.named("muP", convention="std", algorithm="tp"), widths=widths, seeds=seeds,
                                     quantities=("dh:hidden",), eta0=0.05, seed=0).fit("dh:hidden"),
}
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for i, (lab, f) in enumerate(cases_w.items()):
        pred = 0.0 if f.predicted is None else float(f.predicted)
        theory_vs_finite(ax, f.x, power_law(f.x, f.mean, pred), f.mean, f.se, label=f"N^{pred:g}", finite_label=lab,
                         color=PALETTE[i])
        print(f"{lab:20s} hidden feature update slope {f.tail_slope:+.3f} [{f.tail_ci_low:+.3f}, {f.tail_ci_high:+.3f}], predicted {pred:+.1f}")
    ax.set(xscale="log", yscale="log", xlabel="width N", ylabel="|Δh| (hidden, one step)", title="μP: Θ(1) updates")
    int_xticks(ax, widths)
    ax.legend(fontsize=6); show(fig)

# %% [markdown]
# ## Verdict table (`limits.validate`)
#
# The comparisons of this notebook as `limits.validate.Case` objects: statistical cases pass when |z| ≤ 4 and, where a
# rate is fitted, the expected rate lies in its 95% CI; exact cases compare within a tolerance. Rows that test the paper's
# statement *as printed* are expected to fail where the next section says so. `limits validate <component>` runs the
# component's full registered cases.

# %%
from limits.validate import Case, Report
cases = [Case.exact("pc", "Thm 4.2 literal = telescoped equilibrium (errors e*)", np.concatenate([fp.e[l][:, 0] for l in range(4)]),
                    np.concatenate([eq.errors[l][0] for l in range(4)]), tol=1e-10),
         Case.exact("pc", "iterative inference → closed-form z* (relative distance)", 0.0, inf.distance[-1], tol=1e-8),
         Case.exact("pc", "Eq. 16 with the printed upper limit (l = 2)", eq.z[1][0], printed, tol=1e-6)]
for lab, f in cases_w.items():
    cases.append(Case.statistical("params", f"{lab}: hidden update slope = 0", float(f.predicted or 0.0), f.tail_slope, f.tail_slope_se))
display(Markdown(Report(tuple(cases)).to_markdown("Seed 003: checks of this notebook")))

# %% [markdown]
# ## Where our measurement disagrees with the paper
#
# * **NTK-type exponents for PC (Eq. S.71–S.74).** Taken literally at $\bar\gamma_L = -1/2$ ($c_L = 1$) they are not stable: the constraint
#   solver predicts a read-out update growing like $N^{1/2}$, and the finite networks below follow that slope (fitted slope and
#   95% CI printed; the CI is wide in quick mode). The solver's own NTK-type
#   parameterisation has $c_L = 1-\bar\gamma_L = 3/2$ and keeps the read-out update bounded.
# * **Eq. 16 upper limit.** As printed, the sum in Eq. 16 runs over $i = 2..l-1$; it must run to $l$. With the printed limit the
#   hidden activity at $l = 2$ misses a term (section 2 prints the error), while the corrected sum matches the equilibrium to rounding.
# * **$M_L = 1$ does not make PC's weight gradient equal BP's at $\bar\gamma_L=-1$.** The paper states that for $M_L=1$ the PC gradient
#   direction always corresponds to GD. With one output the fixed-point *errors* $e^*_l$ are indeed exactly parallel to BP's backward
#   signals (printed in section 3), but the weight gradient $e^*_l v^{*\top}_{l-1}$ uses the *equilibrated* activities $v^*_{l-1}$, not the
#   forward ones. At $\bar\gamma_L = 0$ the difference vanishes with width (cosines → 1); at $\bar\gamma_L = -1$ it does not: the cosine
#   of layers 2–3 with BP stays below 1 and does not improve with $M$ (section 3 prints the values; layer 3 about 0.7–0.8 at the widths used).
# * **γ̄_L = −1 does not approach BP (nor GN) with width.** Consistent with Fig. 2(c) (γ̄_L = 0 is closer to BP), but sharper: at
#   $\bar\gamma_L=-1$, $M_L=8$ the per-layer cosines of layers 2 and 3 with BP — and with GN, which itself approaches BP at large
#   width — stay well below 1 as $M$ grows (values printed in section 3), while layer 1 tends to 1. We do not see a GN-like
#   gradient emerge in this setting.
# * **Sign in Eq. 15.** The proof (with $e_l = v_l - W_l v_{l-1}$) gives $e^*_L = (I + C_\gamma)^{-1}(y - f)$; the printed Eq. 15 writes
#   $(W_{L:1}x - y)$, the opposite sign. The toolkit pins the proof's convention (checked in section 2).

# %%
lit = Parameterisation.make(a=0, b=[0, h, h], c=[h, 1 + h, 1], algorithm="pc", gamma_bar_L=-h)
der = limits.params.named("NTK", convention="std", algorithm="pc", gamma_bar_L=-h, gauge="a0")
print("c_L: literal S.73 =", lit.exponent("output", "c"), "| derived =", der.exponent("output", "c"))
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for i, (lab, p) in enumerate((("S.73 literal (c_L = 1)", lit), ("derived (c_L = 3/2)", der))):
        f = sweep(p, "dWh:out")
        theory_vs_finite(ax, f.x, power_law(f.x, f.mean, float(f.predicted)), f.mean, f.se,
                         label=f"predicted N^{float(f.predicted):+g}", finite_label=lab, color=PALETTE[i])
        print(f"{lab:24s} read-out update slope {f.tail_slope:+.3f} [{f.tail_ci_low:+.3f}, {f.tail_ci_high:+.3f}], predicted {float(f.predicted):+.2f}")
    ax.set(xscale="log", yscale="log", xlabel="width N", ylabel="|ΔW_L h|", title="PC NTK-type, γ̄_L = −1/2")
    int_xticks(ax, widths)
    ax.legend(fontsize=6); show(fig)

# %%
print(f"notebook wall time: {time.perf_counter() - _T0:.1f} s ({'quick' if QUICK else 'full'} mode)")
