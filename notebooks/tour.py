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
# # A 15-minute tour of `limits`
#
# `limits` computes infinite-width and infinite-depth limits of neural networks and checks every
# prediction against small finite networks. This tour walks the pipeline once:
#
# 1. **tables** — width parameterisations derived symbolically (`limits.params`);
# 2. **kernels** — NNGP kernels of a residual network vs Monte Carlo over finite networks (`limits.kernels`, `limits.finite`);
# 3. **predictive coding** — closed-form equilibria and the activity Hessian (`limits.pc`);
# 4. **DMFT** — the infinite-width training dynamics of a mean-field network vs finite networks (`limits.dmft`);
# 5. **NFD** — the infinite-depth kernel ODE of a ResNet vs finite deep ResNets (`limits.nfd`).
#
# Every theory curve is drawn as a line and every finite-network estimate as points with ±1 standard
# error bars (`limits.style.theory_vs_finite`). Set `LIMITS_QUICK=0` for larger sizes.

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
# ## 1. Parameterisation tables
#
# `limits.params.table` *derives* the abcd exponents of SP, NTK, mean-field (MF) and μP from their
# desiderata with an exact piecewise-linear solver (variance convention of seed 000:
# $h_l = N^{-a_l} W_l h_{l-1}$, $W_{ij}\sim\mathcal N(0, N^{-b_l})$, $\eta = \eta_0\gamma^2 N^{-c}$, $f = h_L/\gamma$, $\gamma=\gamma_0 N^d$).
# The last rows classify each one: $r$ is the exponent of the feature update $\Delta h = \Theta(N^{-r})$.

# %%
tab = limits.params.table(["SP", "NTK", "MF", "muP"], algorithm="bp", convention="variance")
display(Markdown(tab.to_markdown()))
p = limits.params.named("muP", convention="std", algorithm="bp")
print("μP in the std convention (Tensor Programs IV): hidden b =", p.exponent("hidden", "b"),
      "| output a =", p.exponent("output", "a"), "| regime:", limits.params.classify(p).regime)
dr = limits.params.depth_regime("1/2", "1/2")
print("Depth-μP (α = γ = 1/2):", dict(stable_init=dr.stable_init, stable_training=dr.stable_training,
                                    nontrivial=dr.nontrivial, faithful=dr.faithful))

# %% [markdown]
# ## 2. Kernels: NNGP of a residual network vs finite networks
#
# `limits.kernels.nngp` runs the residual NNGP recursion (seed 004 Eq. 29–30)
# $K^{l} = K^{l-1} + \rho^2(\sigma_w^2\,\mathbb E[\phi\phi] + \sigma_b^2)$. `limits.finite.empirical_kernels`
# draws many finite ResNets of width $N$ and returns the mean and standard error of $h^l h^{l\top}/N$.

# %%
L, N, S = (6, 128, 150) if QUICK else (12, 500, 1000)
X = F.data.sphere_inputs(3, 10, seed=0)
pars = dict(activation="erf", sigma_w2=1.2, sigma_b2=0.2)
r = limits.kernels.nngp(X, depth=L, residual=True, rho=1.0, **pars)
ek = F.empirical_kernels(F.resnet(10, N, L, rho=1.0, **pars), X, S, seed=1)
z = (ek.mean - r.K) / ek.se
print(f"N = {N}, {S} networks: max |z| over all layers and entries = {np.abs(z).max():.2f}")
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    ls = np.arange(L + 1)
    theory_vs_finite(ax, ls, r.K[:, 0, 0], ek.mean[:, 0, 0], ek.se[:, 0, 0], label="$K^l_{11}$ theory",
                     finite_label=f"finite N={N}")
    theory_vs_finite(ax, ls, r.K[:, 0, 1], ek.mean[:, 0, 1], ek.se[:, 0, 1], label="$K^l_{12}$ theory",
                     finite_label=f"finite N={N}", marker="s")
    ax.set(xlabel="layer l", ylabel="kernel", title="residual NNGP (erf, ρ = 1)")
    ax.legend()
    show(fig)

# %% [markdown]
# ## 3. Predictive coding in closed form
#
# For a *linear* PC network the inference equilibrium is a linear solve; `limits.pc.equilibrium`
# returns it in closed form (telescoped rescaling $S$, seed 001 Eq. 31) and `limits.pc.infer` runs the
# ordinary iterative inference for comparison. At equilibrium the energy is
# $F^* = \frac1B\sum_i \tfrac12 r_i^\top S^{-1} r_i$, and its ratio to the MSE tends to 1 when $L/N\to0$.

# %%
rng = np.random.default_rng(0)
Npc, H, B = (32, 4, 16) if QUICK else (64, 8, 64)
W, mult = limits.pc.init_weights(Npc, H, "mupc", d_in=8, d_out=2, rng=rng)
Xp, Yp = rng.standard_normal((B, 8)), rng.standard_normal((B, 2))
e = limits.pc.equilibrium(W, Xp, Yp, mult, "1-skip")
inf = limits.pc.infer(W, Xp, Yp, beta=0.1, steps=4000, multipliers=mult, skips="1-skip", tol=1e-9)
print(f"closed-form energy F* = {e.energy:.6f};  iterative inference energy = {inf.energy[-1]:.6f} "
      f"(relative distance to z* {inf.distance[-1]:.1e}, {inf.steps} steps)")
print(f"MSE / F* = {e.ratio:.4f}  (μPC, N = {Npc}, H = {H})")
Hz = limits.pc.activity_hessian(W, mult, "1-skip")
print("activity Hessian:", Hz.shape, "sparse" if hasattr(Hz, "nnz") else "dense",
      f"κ = {limits.pc.condition_number(W, mult, '1-skip'):.2f}")

# %% [markdown]
# ## 4. DMFT: feature-learning dynamics at infinite width
#
# `limits.dmft.solve` integrates the dynamical mean-field theory of a mean-field network
# ($f = w\cdot\phi(h^L)/(\gamma_0 N)$) trained by full-batch gradient descent. Finite networks of the
# same parameterisation (`limits.finite.concretise` at the MF point, centred outputs) approach it as $N$ grows.

# %%
Xd, yd = limits.dmft.toy_task(P=4, D=6, seed=7)
depth, dt, steps = 2, 0.05, (20 if QUICK else 60)
d = limits.dmft.solve(Xd, yd, depth=depth, activation="linear", gamma0=1.0, dt=dt, steps=steps)
MF = {"convention": "variance", "input": {"a": 0, "b": 0, "c": 0}, "hidden": {"a": 0.5, "b": 0, "c": 0},
      "output": {"a": 0.5, "b": 0, "c": 0}, "d": 0.5}
Nd, Sd = (256, 6) if QUICK else (1024, 16)
net = F.concretise(MF, N=Nd, L=depth + 1, d_in=Xd.shape[1], activation="linear", eta0=dt, gamma0=1.0)
tr = F.train(net, Xd, yd, steps, n_inits=Sd, seed=3, optimizer="gd", reduction="sum", center=True,
             record_features=False, keep_weights=False)
fN = tr.f[:, :, :, 0]                       # (steps+1, S, P)
m, se = fN.mean(1), fN.std(1, ddof=1) / np.sqrt(Sd)
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for mu in range(2):
        theory_vs_finite(ax, np.arange(steps + 1), d.f[:, mu], m[:, mu], se[:, mu],
                         label=f"DMFT $f_{mu}$", finite_label=f"N={Nd}, {Sd} nets", color=PALETTE[mu])
    ax.set(xlabel="GD step", ylabel="output (centred)", title="deep linear MF net, depth 2")
    ax.legend()
    show(fig)
print("max |z| of the finite mean against the DMFT:", np.round(np.abs((m - d.f)[1:] / se[1:]).max(), 2))

# %% [markdown]
# ## 5. NFD: the infinite-depth limit of a ResNet
#
# With branch multiplier $\sqrt{T/L}$, a pre-activation ResNet's kernel obeys, as $L\to\infty$, the ODE
# $d\Sigma/dt = \mathbb E_{\mathcal N(0,\Sigma)}[\phi\phi^\top]$ (seed 002). `limits.nfd.kernel_ode` solves it; finite
# ResNets at growing depth approach it (at large width) with an $O(1/L)$ error.

# %%
Xn = F.data.sphere_inputs(3, 4, seed=2)
Ln = 16 if QUICK else 64
nN, Sn = (256, 120) if QUICK else (1024, 300)
k = limits.nfd.kernel_ode(Xn, T=1.0, activation="erf", t_eval=np.linspace(0.0, 1.0, 101))
ekn = F.empirical_kernels(F.resnet(4, nN, Ln, activation="erf", rho=np.sqrt(1.0 / Ln)), Xn, Sn, seed=5)
tl = np.arange(Ln + 1) / Ln                 # layer l of the depth-L net sits at time t = lT/L
with paper_style():
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    for (i, j), col in (((0, 0), PALETTE[0]), ((0, 1), PALETTE[1])):
        ax.plot(k.t, k.Sigma_t[:, i, j], "-", color=col, label=f"kernel ODE Σ_t[{i + 1},{j + 1}]")
        ax.errorbar(tl, ekn.mean[:, i, j], ekn.se[:, i, j], fmt="o", mfc="none", color=col,
                    label=f"ResNet L={Ln}, n={nN}")
    ax.set(xlabel="t = layer · T / L", ylabel="kernel", title="deep ResNet → kernel ODE (erf, T = 1)")
    ax.legend(fontsize=6)
    show(fig)
zn = (ekn.mean[Ln] - k.Sigma) / ekn.se[Ln]
print(f"output layer vs Σ_T: max |z| = {np.abs(zn).max():.2f} (includes the O(1/L) Euler bias; the points of one"
      " entry are correlated across layers — they come from the same networks)")

# %% [markdown]
# ## Where next
#
# * `limits --help` — the same computations from the command line (`limits table`, `limits nngp`, `limits pc`,
#   `limits dmft`, `limits nfd`, `limits figure NAME`, `limits validate`).
# * `limits.gallery.figures()` — every reproducible paper figure; `limits.validate.run([...])` — the
#   theory-vs-finite verdict tables.
# * The `seed00*_*.py` notebooks (jupytext sources in `notebooks/`) reproduce each seed paper, and say where our measurements disagree with it.

# %%
print(f"notebook wall time: {time.perf_counter() - _T0:.1f} s ({'quick' if QUICK else 'full'} mode)")
