"""Predictions of infinite-width networks on the user's own data.

    p = limits.predict.nngp_posterior(m, X_train, Y_train, X_test, noise="auto")   # p.output_scale, p.noise
    g = limits.predict.gradient_descent(m, X_train, Y_train, X_test, t=[0, 10, 100, np.inf])
    r = limits.predict.kernel_regression(m, X_train, Y_train, X_test, kernel="nngp")   # large P, in place
    k = limits.kernels.kernel(m, np.concatenate([X_train, X_test]))       # the kernels once, then reused:
    p = limits.predict.nngp_posterior(m, X_train, Y_train, X_test, kernel=k)      # (limits.precomputed)

**NNGP posterior** (Bayesian inference with the network prior f ~ GP(0, s²K), K the read-out NNGP
of ``m``, s² = ``output_scale`` (1 unless fitted); observations y = f(X) + ε, ε ~ N(0, σ² I) with
σ² = ``noise``; independent outputs sharing the kernel; λ = σ²/s²)::

    mean = K_*X (K_XX + λI)⁻¹ Y,   cov = s² [K_** − K_*X (K_XX + λI)⁻¹ K_X*]
    log p(Y) = Σ_o [−y_oᵀ (K_XX + λI)⁻¹ y_o/(2s²) − ½ log det(K_XX + λI) − (P/2) log s² − (P/2) log 2π]

(cov is that of the latent f(X_test), without observation noise), all by one Cholesky factor.
``noise="auto"`` fits the output scale and the noise together by type-II maximum likelihood
(:mod:`limits.likelihood`): with one eigendecomposition of K_XX the profile likelihood in the ratio λ
(s² in closed form, ŝ² = Σ_o y_oᵀ(K + λI)⁻¹y_o/(d P)) is maximised over log λ; both fitted values are
reported (``output_scale``, ``noise``). A fixed ``output_scale`` with ``noise="auto"`` fits the noise
alone (the behaviour before the scale was fitted; :func:`max_likelihood_noise` at s² = 1). When to fix
the noise by hand: docs/theory/predict.rst §2.

**Gradient descent** of the NTK-parameterised network in the kernel regime (Jacot et al. 2018;
Lee et al. 2019 Eq. 9–16): the network stays linear in its parameters, so on the MSE loss
ℓ = c Σ_μ ½‖f(x_μ) − y_μ‖² (c = 1 for ``reduction="sum"``, 1/P for "mean") with GD step η on every
trained parameter θ (the raw w, β of the NTK parameterisation, the ``lr`` of ``limits.finite``)::

    f_{k+1}(x) = f_k(x) − η c Θ(x, X) (f_k(X) − Y)                        (discrete GD, step k)
    df_t(x)/dt = −η c Θ(x, X) (f_t(X) − Y)                                 (gradient flow, time t)

with Θ the read-out NTK. Writing Θ_XX = V Λ Vᵀ and, per eigenvalue λ,
``g_t(λ) = (1 − (1 − ηcλ)^k)/λ`` (GD, t = k steps) or ``(1 − e^{−ηcλt})/λ`` (flow; both → ηct as
λ → 0, the exact limit used for singular directions), the solution from f_0 ~ GP(0, K) is::

    f_t(x*) = f_0(x*) − A_t f_0(X) + A_t Y,      A_t = Θ_*X V diag(g_t(λ)) Vᵀ
    μ_t = A_t Y,     Σ_t = K_** + A_t K_XX A_tᵀ − A_t K_X* − K_*X A_tᵀ

(on the training inputs A_t reduces to I − e^{−ηcΘt}, resp. I − (I − ηcΘ)^k). In time units of the
finite trainer: t counts GD steps (``limits.finite.train(net, X, Y, steps=t, optimizer="gd",
reduction=...)``) or flow time (``optimizer="flow"``, t = steps·dt); η is the model's ``lr``.
When K_XX is positive definite (R Rᵀ = Vᵀ K_XX V), Σ_t = Σ_NNGP + W_t W_tᵀ with
W_t = Θ_*X V diag(g_t) R − K_*X V R⁻ᵀ (PSD by construction; Σ_NNGP the noise-free posterior).
One eigendecomposition of Θ_XX serves every t.

**t = ∞** (``t=np.inf``, alone or among finite times): g_∞(λ) = 1/λ on the eigenvalues λ > P ε λ_max(Θ_XX)
and 0 on the others, i.e. A_∞ = Θ_*X Θ_XX⁺ with Θ⁺ the spectral pseudo-inverse taken from the same
eigendecomposition (no inverse is formed)::

    μ_∞ = Θ_*X Θ_XX⁺ Y,     Σ_∞ = K_** + A_∞ K_XX A_∞ᵀ − A_∞ K_X* − K_*X A_∞ᵀ

This is the limit of finite t, for the flow and for GD (0 < ηcλ < 2, enforced): on a null direction v of
Θ_XX, Θ_*X v = 0 (the joint NTK Gram is PSD), so g_t(0) = ηt multiplies nothing at any t, and every other
direction has converged once ηcλt ≫ 1. With Θ_XX positive definite, μ_∞ = Θ_*X Θ_XX⁻¹ Y is NTK kernel
regression (:func:`kernel_regression` with ``kernel="ntk"``). Repeated or collinear training inputs make
Θ_XX singular: the pseudo-inverse then fits the targets in the least-squares sense, as the flow does.

**Outputs.** ``Y_train`` may have any number k of columns ((P,) is k = 1) whatever the model's
``d_out``: the outputs are independent and share the read-out kernel, so mean is P_test×k and cov one
P_test×P_test matrix for all of them; the result records the model with d_out = k.

**neural-tangents' normalisation.** ``nt.predict.gradient_descent_mse_ensemble(kernel_fn, X, Y,
learning_rate=η_NT)`` evolves by e^{−η_NT Θ t / Y.size} with ``Y.size`` = P·k (its loss is
½‖f(X) − Y‖²/(P·k); ``neural_tangents/_src/predict.py``, ``_make_expm1_fn(y_train.size)``), while
``reduction="mean"`` here is c = 1/P: NT at (η_NT, t) is ``gradient_descent(..., learning_rate=η_NT/k,
reduction="mean", t=t)`` — the same η for one output (benchmarks/bench_predict.py compares both on
the 10-output digits task). Cores: ``n_jobs`` (:mod:`limits.parallel`; default ``$LIMITS_NUM_THREADS``, else every
core) — the kernels on threads over row blocks (bit for bit the one-thread numbers), the factorisation and
solves of P ≥ 256 training points on that many BLAS threads (to rounding); otherwise BLAS runs with
``$LIMITS_BLAS_THREADS`` (default 1) threads (:mod:`limits.blas`: multi-threaded OpenBLAS spin-waits on small
products on shared machines).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from . import parallel
from .blas import limit_blas
from .checks import finite_array, real_number
from .results import Result, model_label

__all__ = ["nngp_posterior", "gradient_descent", "max_likelihood_noise", "max_likelihood", "PosteriorResult", "GDResult",
           "SingularKernelError", "suggest_jitter", "kernel_regression", "RegressionResult", "regression_memory",
           "predict_memory"]


class SingularKernelError(ValueError):
    """The training kernel (plus noise) is numerically singular; ``suggested_noise`` makes it factorise."""

    def __init__(self, msg, suggested_noise):
        super().__init__(msg)
        self.suggested_noise = float(suggested_noise)


@dataclass(frozen=True)
class PosteriorResult(Result):
    """NNGP posterior (module docstring): ``mean`` (P_test×d_out), ``cov`` (P_test×P_test, shared by the
    outputs), ``var`` = diag(cov), ``log_marginal_likelihood`` (summed over outputs), ``noise`` σ²,
    ``output_scale`` s² (the prior is s²K; 1 unless fitted), ``fitted`` (the hyper-parameters fitted by
    maximum marginal likelihood: ``("output_scale", "noise")`` for ``noise="auto"``), and the model dict
    and inputs (so ``limits.check`` rebuilds the finite networks)."""

    mean: np.ndarray
    cov: np.ndarray
    var: np.ndarray
    log_marginal_likelihood: float
    noise: float
    model: dict
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    output_scale: float = 1.0
    fitted: tuple = ()

    def hyperparameters_text(self) -> str:
        """'noise σ² = …, output scale s² = … (both fitted by maximum marginal likelihood)'."""
        how = {("output_scale", "noise"): " (both fitted by maximum marginal likelihood)",
               ("noise",): " (noise fitted by maximum marginal likelihood, scale fixed)"}.get(tuple(self.fitted), "")
        return f"noise σ² = {self.noise:.4g}, output scale s² = {self.output_scale:.4g}{how}"

    def __str__(self):
        sd = np.sqrt(np.clip(self.var, 0.0, None))
        return (f"NNGP posterior of {model_label(self.model)}: {self.X_train.shape[0]} training, "
                f"{self.X_test.shape[0]} test points, {self.mean.shape[1]} output(s); {self.hyperparameters_text()}; "
                f"log marginal likelihood {self.log_marginal_likelihood:.6g}; posterior sd {sd.min():.3g}–{sd.max():.3g}")

    def plot(self, target=None, output=0, points=50):
        """Posterior mean ± 2 sd of output ``output`` at the first ``points`` test points (a path, an Axes
        or None: :func:`limits.style.plot_target`); returns the Figure."""
        from .style import plot_target

        pt = plot_target(target, 1, figsize=(6.0, 3.2), what="PosteriorResult.plot")
        ax = pt.axes[0]
        n = min(int(points), self.mean.shape[0])
        i = np.arange(n)
        sd = np.sqrt(np.clip(self.var[:n], 0.0, None))
        ax.errorbar(i, self.mean[:n, output], yerr=2 * sd, fmt="o", ms=3, label="posterior mean ± 2 sd (latent f)")
        ax.set_xlabel("test point")
        ax.set_ylabel(f"output {output}")
        ax.set_title(self.hyperparameters_text(), fontsize=7)
        ax.legend(fontsize=7)
        return pt.finish()


@dataclass(frozen=True)
class GDResult(Result):
    """Infinite-width ensemble of GD-trained networks (module docstring): ``t`` (T,), ``mean``
    (T×P_test×d_out), ``cov`` (T×P_test×P_test, shared by the outputs), ``var`` (T×P_test),
    ``mean_train`` (T×P×d_out), ``learning_rate`` η, ``reduction``, ``flow``; model and inputs."""

    t: np.ndarray
    mean: np.ndarray
    cov: np.ndarray | None
    var: np.ndarray
    mean_train: np.ndarray
    learning_rate: float
    reduction: str
    flow: bool
    model: dict
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray

    def __str__(self):
        rms = np.sqrt(np.mean((self.mean_train[-1] - self.Y_train) ** 2))
        sd = np.sqrt(np.clip(self.var[-1], 0.0, None))
        t0, t1 = time_text(self.t[0]), time_text(self.t[-1])
        return (f"NTK ensemble of {model_label(self.model)} trained by {'gradient flow' if self.flow else 'discrete GD'} "
                f"(η = {self.learning_rate:g}, reduction {self.reduction}): {self.X_train.shape[0]} training, "
                f"{self.X_test.shape[0]} test points, {self.mean.shape[2]} output(s); {self.t.size} time(s) "
                f"t = {t0}…{t1}; at t = {t1}: RMS training residual {rms:.4g}, "
                f"test sd {sd.min():.3g}–{sd.max():.3g}")

    def plot(self, target=None, output=0, points=4):
        """Ensemble mean ± 2 sd of output ``output`` at the first ``points`` test points against t (a path,
        an Axes or None: :func:`limits.style.plot_target`); returns the Figure."""
        from .style import PALETTE, plot_target

        pt = plot_target(target, 1, figsize=(5.0, 3.2), what="GDResult.plot")
        ax = pt.axes[0]
        fin, inf = np.isfinite(self.t), np.isposinf(self.t)
        t = self.t[fin]
        for i in range(min(int(points), self.mean.shape[1])):
            c = PALETTE[i % len(PALETTE)]
            m, sd = self.mean[:, i, output], np.sqrt(np.clip(self.var[:, i], 0.0, None))
            if fin.any():
                ax.plot(t, m[fin], color=c, label=f"test point {i}")
                ax.fill_between(t, m[fin] - 2 * sd[fin], m[fin] + 2 * sd[fin], color=c, alpha=0.2, lw=0)
            if inf.any():                 # t = ∞: the converged mean ± 2 sd as dashed lines across the plot
                k = int(np.flatnonzero(inf)[0])
                for y, ls in ((m[k], "--"), (m[k] - 2 * sd[k], ":"), (m[k] + 2 * sd[k], ":")):
                    ax.axhline(y, color=c, ls=ls, lw=1.0, label=f"test point {i}, t = ∞" if ls == "--" else None)
        if t.size > 2 and t[1] > 0 and t[-1] / t[1] >= 100:
            ax.set_xscale("symlog", linthresh=float(t[1]))
        ax.set_xlabel("training time t" if self.flow else "GD steps")
        ax.set_ylabel(f"output {output}: mean ± 2 sd")
        ax.legend(fontsize=7)
        return pt.finish()

    def test_loss(self, Y_test) -> np.ndarray:
        """Expected test loss over the ensemble, E ½Σ‖f − y‖² /P_test = ½(‖μ − Y‖² + d_out tr Σ)/P_test, per t."""
        Y = _targets(Y_test, self.X_test.shape[0], self.mean.shape[2], "Y_test")
        r = self.mean - Y[None]
        return 0.5 * (np.einsum("tpo,tpo->t", r, r) + Y.shape[1] * self.var.sum(1)) / Y.shape[0]


def time_text(t) -> str:
    """A training time for people: ``10``, ``1e+06``, ``∞``."""
    return "∞" if np.isposinf(t) else f"{float(t):g}"


# ---------------------------------------------------------------------------------------------- inputs
def _model(model, what, ntk):
    from .layers import as_serial
    from .model import as_model

    s = as_serial(model)                  # a composition (limits.serial): NTK-parameterised layers, kernel regime
    if s is not None:
        return s
    m = as_model(model)
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    if ntk and m.param_name != "NTK":
        from .model import ModelError

        raise ModelError(f"{what} cannot treat this model: gradient descent in the kernel regime needs "
                         f"parameterisation='NTK' (got {m.param_name!r}; the SP NTK grows ∝ N, and MF/μP "
                         "networks learn features: use limits.dmft.solve(..., X_test=...))")
    return m


def _X(X, name, d_in):
    X = finite_array(X, name)
    if d_in is None:                      # compositions: (P, d) or (P, *spatial, C), checked by their kernel
        if X.ndim < 2 or X.shape[0] < 1:
            raise ValueError(f"{name} must be (P, d) or (P, *spatial, C) with P >= 1, got shape {X.shape}")
        return X
    if X.ndim == 1 and d_in == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"{name} must be a P×d_in array with P >= 1, got shape {X.shape}")
    if X.shape[1] != d_in:
        raise ValueError(f"{name} has {X.shape[1]} columns but the model has d_in = {d_in}")
    return X


def _targets(Y, P, d_out, name="Y_train"):
    Y = finite_array(Y, name)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != P:
        raise ValueError(f"{name} must have shape ({P},) or ({P}, d_out) matching the inputs' rows, got {Y.shape}")
    if d_out is not None and Y.shape[1] != d_out:
        raise ValueError(f"{name} has {Y.shape[1]} output column(s) but the model has d_out = {d_out} "
                         f"(use model.with_(d_out={Y.shape[1]}); the kernel is shared by the outputs)")
    return Y


def _train_targets(Y_train, P, m):
    """Training targets (P, k) for any number k of outputs, and the model with ``d_out = k``: the read-out
    kernel does not depend on d_out (the outputs are independent and share it), so a Model built with
    another d_out is applied as ``m.with_(d_out=k)`` (what the result records, so ``limits.check`` builds
    finite networks with k outputs)."""
    Y = _targets(Y_train, P, None)
    if getattr(m, "d_out", None) not in (None, Y.shape[1]):
        m = m.with_(d_out=Y.shape[1])
    return Y, m


# float64 P'×P' arrays alive at the peak of one joint NNGP/NTK recursion of P' = P + P_test inputs (tracemalloc
# on P' = 1000, depth 3: 10.9–16.4 P'² without the NTK, 16.9–21.7 with it; tanh, the Mehler path, is the largest)
_JOINT_UNITS = 22


def _kernels(m, X, Xs, ntk, test_cov=True, memory_limit=None):
    """K_XX, K_*X, K_** (NNGP) and Θ_XX, Θ_*X (NTK when ``ntk``); refuses overflowed kernels.

    A Model's kernels come from one joint recursion on the P + P_test stacked inputs (the symmetric
    path, which computes each of the P(P+1)/2 + P·P_test + P_test(P_test+1)/2 needed entries once,
    K_** included, and no spectral diagnostics) when its :data:`_JOINT_UNITS`·(P + P_test)² floats fit
    in ``memory_limit`` (default half the available memory); otherwise, and for compositions, three
    calls of :func:`limits.kernels.kernel` (train, test × train, test)."""
    P, Pt = X.shape[0], Xs.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(m, "kernel_kwargs") and (test_cov or Pt <= P) and _joint_fits(P + Pt, memory_limit):
            from .kernels.modelview import kernel_arguments
            from .kernels.nngp import nngp

            r = nngp(np.concatenate([X, Xs]), ntk=ntk, keep="last", on_explode="ignore",
                     **kernel_arguments(m, "limits.predict"))
            K, T = r.K_out, (r.Theta_out if ntk else None)
            del r
            cut = lambda A: parallel.copyto(np.empty(A.shape), A)     # noqa: E731  (contiguous, on the threads)
            out = {"K": cut(K[:P, :P]), "K_sx": cut(K[P:, :P]), "K_ss": cut(K[P:, P:]) if test_cov else None,
                   "T": None if T is None else cut(T[:P, :P]), "T_sx": None if T is None else cut(T[P:, :P])}
            del K, T
        else:
            from .kernels.cross import kernel

            get = ("nngp", "ntk") if ntk else ("nngp",)
            r = kernel(m, X, None, get)
            c = kernel(m, Xs, X, get)
            s = kernel(m, Xs, None, ("nngp",)) if test_cov else None
            out = {"K": r.nngp, "K_sx": c.nngp, "K_ss": None if s is None else s.nngp,
                   "T": r.ntk if ntk else None, "T_sx": c.ntk if ntk else None}
    for k, v in out.items():
        if v is not None and not np.all(np.isfinite(v)):
            raise ValueError(f"the {'NTK' if k.startswith('T') else 'NNGP'} of this model overflows on these inputs "
                             "(chaotic/deep regime); use smaller sigma_w2 or depth")
    return out


def _joint_fits(n, memory_limit):
    need = 8.0 * _JOINT_UNITS * float(n) ** 2
    if memory_limit is not None:
        return need <= float(memory_limit)
    from .memory import available_memory

    avail = available_memory()
    return avail is None or need <= 0.5 * avail


def suggest_jitter(K, noise=0.0) -> float:
    """Smallest diagonal noise σ² (from the spectrum, then confirmed by a Cholesky) that makes
    ``K + σ²I`` factorise with pivots above P·ε·max diag: max(0, −λ_min) + 10 P ε λ_max, raised ×10 until it works."""
    from scipy.linalg import cho_factor, LinAlgError

    K = 0.5 * (K + K.T)
    lam = np.linalg.eigvalsh(K)
    P = K.shape[0]
    top = max(float(lam[-1]), float(np.max(np.abs(np.diag(K)))), 1e-300)
    s = max(0.0, -float(lam[0])) + 10.0 * P * np.finfo(float).eps * top
    s = max(s, float(noise))
    for _ in range(30):
        try:
            c, _ = cho_factor(K + s * np.eye(P), lower=True, check_finite=False)
            if _pivots_ok(c, K, s):
                return float(s)
        except LinAlgError:
            pass
        s *= 10.0
    return float(s)     # pragma: no cover


def _pivots_ok(c, K, s):
    d = np.diag(c) ** 2
    return bool(np.all(np.isfinite(d)) and d.min() > K.shape[0] * np.finfo(float).eps * (np.max(np.diag(K)) + s))


def _cholesky(K, noise, what):
    """Lower Cholesky factor of K + σ²I; a clear error with the jitter that works when singular."""
    from scipy.linalg import cho_factor, LinAlgError

    P = K.shape[0]
    A = K.copy()
    A.flat[:: P + 1] += noise
    try:
        c, _ = cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
        if _pivots_ok(c, K, noise):
            return c
    except LinAlgError:
        pass
    s = suggest_jitter(K, noise)
    raise SingularKernelError(
        f"{what}: the training kernel K_XX + noise·I (noise = {noise:g}) is numerically singular (repeated or "
        f"collinear inputs, or a degenerate kernel); pass noise >= {s:.3g} (the smallest diagonal jitter that "
        "makes the Cholesky factorisation succeed, estimated from the spectrum)", s)


# ---------------------------------------------------------------------------------------------- memory
# float64 arrays alive at the peak, in units of P², P_test² and P·P_test (measured with ru_maxrss on
# P = 2000 / P_test = 1500, rounded up: the kernel recursions' layer slots, the Cholesky or
# eigendecomposition of the P×P kernel and their products)
_MEMORY_UNITS = {"posterior": (11, 12, 4), "gd": (15, 12, 4)}


def predict_memory(P, P_test, method="posterior", n_times=0) -> float:
    """Bytes :func:`nngp_posterior` (``method="posterior"``) or :func:`gradient_descent` ("gd", with
    ``n_times`` stored P_test×P_test covariances) needs at its peak: 8·(a P² + b P_test² + c P·P_test
    + n_times P_test²)."""
    a, b, c = _MEMORY_UNITS[method]
    P, Pt = float(P), float(P_test)
    return 8.0 * (a * P * P + (b + n_times) * Pt * Pt + c * P * Pt)


def check_memory(what, P, P_test, method, n_times=0, memory_limit=None):
    """Refuse (``ValueError`` naming X_train, and X_test when the test set alone is too large) before
    allocating anything, when :func:`predict_memory` exceeds ``memory_limit`` bytes (default: half the
    available memory; no check where the platform does not say). Returns the estimate."""
    from .checks import positive_float

    need = predict_memory(P, P_test, method, n_times)
    if memory_limit is None:
        from .memory import available_memory

        avail = available_memory()
        if avail is None:
            return need
        limit, src = 0.5 * avail, f"half the available memory, {avail / 2**31:.3g} GiB"
    else:
        limit = positive_float(memory_limit, "memory_limit")
        src = f"memory_limit = {limit:.6g} bytes"
    if need <= limit:
        return need
    a, b, c = _MEMORY_UNITS[method]
    rest = limit / 8.0 - (b + n_times) * float(P_test) ** 2        # what the test set leaves for the P terms
    if rest <= a:
        raise ValueError(f"{what}: X_test with P_test = {P_test} test points needs about {need / 2**30:.3g} GiB "
                         f"with P = {P} training points, more than {src}; use fewer test points")
    fit = int((-c * P_test + math.sqrt((c * P_test) ** 2 + 4 * a * rest)) / (2 * a))
    hint = "" if method != "posterior" else " (or limits.predict.kernel_regression, one P×P array in place)"
    raise ValueError(f"{what}: X_train with P = {P} training points needs about {need / 2**30:.3g} GiB "
                     f"({a} P×P float64 arrays of {8.0 * P * P / 2**30:.3g} GiB at the peak), more than {src}; "
                     f"at most P = {fit} training points fit{hint}")


# ---------------------------------------------------------------------------------------------- posterior
def _train_kernel(m, X, kernel, what):
    """K_XX of the training inputs: computed, or read from a reusable ``kernel`` (:mod:`limits.precomputed`)."""
    if kernel is None:
        return _kernels(m, X, X[:1], ntk=False, test_cov=False)["K"]
    from .precomputed import split_kernel

    return split_kernel(kernel, _model_dict(m), X, None, what, ntk=False, test_cov=False)["K"]


def kernels_for(m, X, Xs, ntk, kernel, what, test_cov=True, memory_limit=None):
    """:func:`_kernels` of validated inputs, or the same blocks read from a reusable ``kernel``
    (``limits.kernels.kernel(model, X_all)``, verified to belong to ``m`` and to hold every row of ``X`` and
    ``Xs``: :mod:`limits.precomputed`)."""
    if kernel is None:
        return _kernels(m, X, Xs, ntk=ntk, test_cov=test_cov, memory_limit=memory_limit)
    from .precomputed import split_kernel

    return split_kernel(kernel, _model_dict(m), X, Xs, what, ntk=ntk, test_cov=test_cov)


@limit_blas
def max_likelihood_noise(model, X_train, Y_train, *, kernel=None) -> float:
    """The observation noise σ² that maximises the NNGP log marginal likelihood of ``Y_train`` at output
    scale s² = 1 (the noise alone; :func:`max_likelihood` fits both — what ``noise="auto"`` uses).
    ``kernel``: a reusable kernel, as for :func:`nngp_posterior`."""
    from .likelihood import ml_noise

    what = "limits.predict.max_likelihood_noise"
    m = _model(model, what, ntk=False)
    X = _X(X_train, "X_train", _dim(m, "d_in"))
    Y, m = _train_targets(Y_train, X.shape[0], m)
    return ml_noise(_train_kernel(m, X, kernel, what), Y)


@limit_blas
def max_likelihood(model, X_train, Y_train, *, kernel=None) -> tuple:
    """``(output_scale, noise)``: the s² and σ² that maximise the NNGP log marginal likelihood of ``Y_train``
    under the prior s²K and noise σ² (type-II maximum likelihood, :mod:`limits.likelihood`). ``kernel``: a
    reusable kernel, as for :func:`nngp_posterior`."""
    from .likelihood import ml_scale_noise

    what = "limits.predict.max_likelihood"
    m = _model(model, what, ntk=False)
    X = _X(X_train, "X_train", _dim(m, "d_in"))
    Y, m = _train_targets(Y_train, X.shape[0], m)
    return ml_scale_noise(_train_kernel(m, X, kernel, what), Y)


def _hyperparameters(K, Y, noise, output_scale):
    """(s², σ², fitted names) from the arguments of :func:`nngp_posterior` (its docstring)."""
    from .checks import positive_float
    from .likelihood import ml_noise, ml_scale_noise

    auto = isinstance(noise, str) and noise == "auto"
    if not auto:
        noise = real_number(noise, "noise")
    if output_scale is not None:
        output_scale = positive_float(output_scale, "output_scale")
    if not auto:
        return (1.0 if output_scale is None else output_scale), noise, ()
    if output_scale is None:
        return (*ml_scale_noise(K, Y), ("output_scale", "noise"))
    return output_scale, ml_noise(K, Y, output_scale), ("noise",)


@parallel.n_jobs_option
@limit_blas
def nngp_posterior(model, X_train, Y_train, X_test, noise=0.0, *, output_scale=None,
                   memory_limit=None, kernel=None) -> PosteriorResult:
    """GP posterior of the read-out NNGP of ``model`` (module docstring): mean, covariance, variance
    and log marginal likelihood by one Cholesky of K_XX + λI, λ = σ²/s².

    ``noise`` σ² ≥ 0, or ``"auto"``: the output scale s² and the noise σ² that maximise the marginal
    likelihood together (:func:`max_likelihood`; the prior is then s²K). ``output_scale`` s² > 0 fixes the
    scale (default 1 for a given noise; with ``noise="auto"`` only the noise is fitted). Both values are in
    the result (``noise``, ``output_scale``, ``fitted``). ``Y_train`` (P,) or (P, k), any number k of
    outputs sharing the kernel (module docstring). Raises :class:`SingularKernelError` (a ValueError)
    with the suggested ``noise`` when the factorisation fails. Sizes needing more than ``memory_limit``
    bytes (default half the available memory, :func:`predict_memory`) are refused before anything is
    allocated (large P: :func:`kernel_regression`). ``kernel``: the kernel computed once,
    ``limits.kernels.kernel(model, X_all)`` with every training and test row in ``X_all`` (e.g. the two
    stacked), verified to belong to this model and these inputs and then read instead of recomputed
    (:mod:`limits.precomputed`)."""
    what = "limits.predict.nngp_posterior"
    m = _model(model, what, ntk=False)
    X = _X(X_train, "X_train", _dim(m, "d_in"))
    Xs = _X(X_test, "X_test", _dim(m, "d_in"))
    Y, m = _train_targets(Y_train, X.shape[0], m)
    if not (isinstance(noise, str) and noise == "auto"):
        noise = real_number(noise, "noise")
    check_memory(what, X.shape[0], Xs.shape[0], "posterior", memory_limit=memory_limit)
    k = kernels_for(m, X, Xs, False, kernel, what, memory_limit=memory_limit)
    return _posterior(k, m, X, Y, Xs, noise, output_scale, what)


def _posterior(k, m, X, Y, Xs, noise, output_scale, what):
    """The posterior of :func:`nngp_posterior` from its kernels ``k`` (``K``, ``K_sx``, ``K_ss``: NNGP of the
    training inputs, test × training, test), validated inputs and model."""
    from scipy.linalg import cho_solve, solve_triangular

    s2, noise, fitted = _hyperparameters(k["K"], Y, noise, output_scale)
    ratio = noise / s2
    with parallel.dense_blas(X.shape[0]):             # the factorisation and solves: BLAS on n_jobs cores
        try:
            c = _cholesky(k["K"], ratio, what)
        except SingularKernelError as exc:
            if s2 == 1.0:
                raise
            need = exc.suggested_noise * s2
            raise SingularKernelError(f"{what}: the training kernel s²K_XX + σ²I (s² = {s2:.4g}, σ² = {noise:.4g}) "
                                      f"is numerically singular; pass noise >= {need:.3g}", need) from None
        alpha = cho_solve((c, True), Y, check_finite=False)
        mean = k["K_sx"] @ alpha
        V = solve_triangular(c, k["K_sx"].T, lower=True, check_finite=False)
        cov = k["K_ss"] - V.T @ V
    cov = 0.5 * (cov + cov.T)
    if s2 != 1.0:
        cov *= s2
    P, d = X.shape[0], Y.shape[1]
    # log p(Y) under s²(K + λI): quadratic form / s², log det + P log s²
    lml = float(-0.5 * np.einsum("po,po->", Y, alpha) / s2 - d * np.sum(np.log(np.diag(c)))
                - 0.5 * d * P * math.log(2 * math.pi) - 0.5 * d * P * math.log(s2))
    _finite_outputs(what, mean=mean, cov=cov, log_marginal_likelihood=lml)
    return PosteriorResult(mean, cov, np.diag(cov).copy(), lml, float(noise), _model_dict(m), X, Y, Xs,
                           float(s2), fitted)


def _finite_outputs(what, **outputs):
    """Never return an overflowed posterior/predictor: ``ValueError`` naming the output and the likely cause."""
    for name, v in outputs.items():
        if v is not None and not np.all(np.isfinite(v)):
            raise ValueError(f"{what}: the {name} overflows float64 (targets Y_train too large, or a near-"
                             f"singular kernel amplifies them); rescale Y_train or pass noise > 0")


def _dim(m, name):
    """``m.d_in`` / ``m.d_out`` of a Model; None for a composition (any input shape / number of outputs)."""
    return getattr(m, name, None)


def _model_dict(m):
    if not hasattr(m, "activation"):      # a composition
        return m.to_dict()
    return m.to_dict() if isinstance(m.activation, str) else {"activation": m.activation_name}


# ---------------------------------------------------------------------------------------------- gradient descent
def _times(t, flow):
    """``t`` as a 1-d float array of times ≥ 0 (integer step counts for discrete GD); ``np.inf`` is the
    converged ensemble, t → ∞."""
    raw = np.atleast_1d(t)
    if raw.dtype.kind == "f" and np.any(np.isnan(raw)):
        raise ValueError("t contains NaN (times are numbers >= 0, or np.inf for t → ∞)")
    if raw.dtype.kind == "f" and np.any(np.isneginf(raw)):
        raise ValueError("t must be >= 0 (got -inf)")
    inf = np.isposinf(raw) if raw.dtype.kind == "f" else np.zeros(raw.shape, bool)
    t = finite_array(np.where(inf, 0.0, raw) if inf.any() else raw, "t")
    t[inf] = np.inf
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"t must be a non-empty 1-d array of times, got shape {t.shape}")
    if np.any(t < 0):
        raise ValueError("t must be >= 0")
    if not flow and np.any(t != np.round(t)):
        raise ValueError("t: discrete gradient descent (flow=False) needs integer step counts")
    return t


def _gfun(lam, t, eta, flow):
    """(T, P) g_t(λ) = (1 − e^{−ηλt})/λ (flow) or (1 − (1 − ηλ)^t)/λ (GD), exact ηt at λ = 0; at t = ∞,
    1/λ (λ > 0; for GD 0 < ηλ < 2, which :class:`_GDCore` enforces) and ∞ at λ = 0 (a null direction,
    which carries nothing: :meth:`_GDCore._G` sets it to 0).

    Flow: with z = ηλt, g = −expm1(−z)/λ for z > 1 and g = ηt·(−expm1(−z)/z) for z ≤ 1 (ηt ≤ 1/λ is
    finite there), so an overflowing ηλ or ηλt (η = 1e308) gives the converged 1/λ, never inf·0."""
    lam = np.asarray(lam, dtype=float)
    t = np.asarray(t, dtype=float)[:, None]
    pos = lam > 0
    lam_s = np.where(pos, lam, 1.0)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        x = eta * lam_s[None, :]                                  # ηλ, may overflow to inf
        eta_t = eta * t                                           # ηt, may overflow to inf (λ = 0 only)
        if flow:
            z = np.where(t == 0, 0.0, x * t)                      # ηλt ∈ [0, inf]
            zs = np.where(z > 1.0, 1.0, np.where(z == 0, 1.0, z))
            small = np.where(z == 0, eta_t, eta_t * (-np.expm1(-zs) / zs))     # z ≤ 1
            val = np.where(z > 1.0, -np.expm1(-np.minimum(z, 1e300)) / lam_s[None, :], small)
        else:
            # 1 − (1 − x)^t = −expm1(t log1p(−x)) for x < 1; direct power otherwise (x in [1, 2))
            tiny = x < 1e-300
            xs = np.where(tiny, 1.0, x)
            lg = np.log1p(-np.minimum(xs, 1.0 - 1e-300))
            v1 = -np.expm1(t * lg) / xs
            v2 = (1.0 - (1.0 - xs) ** t) / xs
            val = np.where(tiny, eta_t, eta * np.where(xs < 1.0, v1, v2))
        inf = np.isposinf(t[:, 0])
        if inf.any():                                             # t = ∞: the converged 1/λ (any ηλ > 0)
            val[inf] = 1.0 / lam_s[None, :]
    return np.where(pos[None, :], val, eta_t)


@parallel.n_jobs_option
@limit_blas
def gradient_descent(model, X_train, Y_train, X_test, t, learning_rate=None, flow=True, reduction="sum",
                     cov=True, *, memory_limit=None, kernel=None) -> GDResult:
    """Infinite-width ensemble (mean and covariance over initialisations) of the outputs of the NTK-
    parameterised ``model`` trained on (X_train, Y_train) by gradient flow (``flow=True``, times ``t``)
    or discrete GD (``flow=False``, ``t`` = integer step counts), equations in the module docstring.

    ``learning_rate`` η defaults to the model's ``lr``; ``reduction`` "sum" (ℓ = ½Σ_μ‖f_μ − y_μ‖²) or
    "mean" (ℓ/P) — the same conventions as ``limits.finite.train(..., reduction=)``, so that a finite
    ensemble trained with the same η and step count converges to this; neural-tangents divides by
    P·k instead (k outputs): its ``learning_rate`` η_NT is ``learning_rate=η_NT/k, reduction="mean"``
    here (module docstring). ``Y_train`` (P,) or (P, k), any number k of outputs. ``cov=False`` skips the
    P_test×P_test covariance per time (``var`` is still returned). Discrete GD refuses η c λ_max(Θ) ≥ 2
    (divergent). MF/μP models learn features: use ``limits.dmft.solve(..., X_test=...)``. Sizes needing
    more than ``memory_limit`` bytes (default half the available memory, :func:`predict_memory`) are
    refused before anything is allocated. A learning rate so large that ηλt overflows is the converged
    flow (kernel regression, g_t(λ) = 1/λ), computed without overflow. ``t`` may contain ``np.inf``: the
    converged ensemble (t → ∞), Θ_XX pseudo-inverted on its eigenvalues above P ε λ_max (module docstring).
    ``kernel``: the NNGP and NTK computed once, ``limits.kernels.kernel(model, X_all)`` (as for
    :func:`nngp_posterior`; it must hold the NTK).
    """
    what = "limits.predict.gradient_descent"
    m = _model(model, what, ntk=True)
    X = _X(X_train, "X_train", _dim(m, "d_in"))
    Xs = _X(X_test, "X_test", _dim(m, "d_in"))
    Y, m = _train_targets(Y_train, X.shape[0], m)
    if not isinstance(flow, (bool, np.bool_)):
        raise ValueError(f"flow must be True or False, got {flow!r}")
    flow = bool(flow)
    ts = _times(t, flow)
    eta = getattr(m, "lr", 1.0) if learning_rate is None else learning_rate     # compositions: η = 1 by default
    if isinstance(eta, (bool, np.bool_, str, bytes)):
        raise ValueError(f"learning_rate must be a positive number, got {eta!r}")
    try:
        eta = float(eta)
    except (TypeError, ValueError):
        raise ValueError(f"learning_rate must be a positive number, got {learning_rate!r}") from None
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f"learning_rate must be a positive finite number, got {eta}")
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    P = X.shape[0]
    c = 1.0 / P if reduction == "mean" else 1.0          # ℓ = c Σ ½‖f − y‖²
    check_memory(what, P, Xs.shape[0], "gd", n_times=ts.size if cov else 0, memory_limit=memory_limit)
    k = kernels_for(m, X, Xs, True, kernel, what, memory_limit=memory_limit)
    with parallel.dense_blas(P):                      # eigendecomposition and products: BLAS on n_jobs cores
        core = _GDCore(k, eta * c, flow, what, c=c)
        mean, mean_train = core.means(ts, Y)
        C, var = core.covariance(ts, want_cov=bool(cov))
    _finite_outputs(what, mean=mean, mean_train=mean_train, cov=C, var=var)
    return GDResult(ts, mean, C, var, mean_train, eta, reduction, flow, _model_dict(m), X, Y, Xs)


class _GDCore:
    """The time-independent factorisations of the GD solution (one eigendecomposition of Θ_XX)."""

    def __init__(self, k, eta, flow, what, c=1.0):
        from scipy.linalg import eigh

        T = k["T"] + k["T"].T
        T *= 0.5
        lam, V = eigh(T, overwrite_a=True, check_finite=False, driver="evd")     # LAPACK dsyevd, as numpy's
        top = max(float(lam[-1]), 1e-300)
        tol = T.shape[0] * np.finfo(float).eps * top
        if lam[0] < -100 * tol:
            raise ValueError(f"{what}: the NTK of the training inputs is not positive semi-definite "
                             f"(smallest eigenvalue {lam[0]:.3g}); the kernel is numerically broken")
        lam = np.where(lam <= tol, 0.0, lam)      # round-off (incl. tiny negative) → exact zeros: g → ηt
        if not flow and eta * lam[-1] >= 2.0:
            # eta = η·c (c = 1/P for reduction "mean"): the user's learning rate must stay below 2/(c λ_max)
            with np.errstate(over="ignore"):
                ratio = eta * lam[-1]
            raise ValueError(f"learning_rate: discrete GD diverges, η·c·λ_max(Θ) = {ratio:.4g} >= 2 (c = "
                             f"{'1/P' if c != 1.0 else '1'}; take learning_rate < {2.0 / (c * lam[-1]):.4g}, "
                             "or flow=True)")
        self.lam, self.V, self.eta, self.flow = lam, V, eta, flow
        self.B = k["T_sx"] @ V                          # Θ_*X V      (P_test × P)
        # Θ_XX v = 0 ⇒ Θ_*X v = 0 (the joint NTK Gram is PSD). In floating point Θ_*X v is round-off
        # (~ε|Θ|), and g_t(0) = ηt multiplies it, so without this the test outputs of repeated inputs would
        # grow ∝ t (e.g. mean 243 instead of −0.557 at t = 1e18): the null directions carry nothing.
        self.B[:, lam == 0.0] = 0.0
        self.K, self.K_sx, self.K_ss = k["K"], k["K_sx"], k["K_ss"]

    def g(self, ts):
        return _gfun(self.lam, ts, self.eta, self.flow)   # (T, P)

    def _G(self, ts):
        """g_t for the products: the null directions (λ = 0, B's columns zeroed) carry nothing, so their
        ηt — inf when ηt overflows — is replaced by 0 (it would only make inf·0 = nan)."""
        G = self.g(ts)
        G[:, self.lam == 0.0] = 0.0
        return G

    def means(self, ts, Y):
        G = self._G(ts)
        c = self.V.T @ Y                                   # (P, d)
        mean = np.einsum("ip,tp,pd->tid", self.B, G, c, optimize=True)
        mean_train = np.einsum("ip,tp,pd->tid", self.V, G * self.lam[None, :], c, optimize=True)
        return mean, mean_train

    def A(self, ts):
        """(T, P_test, P) A_t = Θ_*X V diag(g_t) Vᵀ (for checks; memory T·P_test·P)."""
        G = self._G(ts)
        return np.einsum("ip,tp,qp->tiq", self.B, G, self.V, optimize=True)

    def E_train(self, ts):
        """(T, P, P) I − Θ V diag(g_t) Vᵀ = e^{−ηΘt} resp. (I − ηΘ)^k on the training inputs."""
        G = self._G(ts)
        return np.einsum("ip,tp,qp->tiq", self.V, 1.0 - G * self.lam[None, :], self.V, optimize=True)

    def covariance(self, ts, want_cov=True):
        from scipy.linalg import LinAlgError, cholesky, solve_triangular
        from scipy.linalg.blas import dsyrk, dtrmm

        V = self.V
        D = None
        try:                                               # Vᵀ K_XX V = SᵀS, S = Lᵀ V (K_XX = L Lᵀ): 2.3 P³ flops, not 4 P³
            L = cholesky(self.K, lower=True, check_finite=False)
            if np.min(np.diag(L)) ** 2 > self.K.shape[0] * np.finfo(float).eps * np.max(np.diag(self.K)):
                D = dsyrk(1.0, dtrmm(1.0, L, V, side=0, lower=1, trans_a=1), trans=1, lower=1)   # lower triangle
            del L
        except LinAlgError:
            pass
        if D is None:                                      # K_XX singular: the direct product
            D = V.T @ self.K @ V
            D = 0.5 * (D + D.T)
        C = V.T @ self.K_sx.T                              # Vᵀ K_X*     (P × P_test)
        G = self._G(ts)
        nT, Pt = G.shape[0], self.B.shape[0]
        try:
            R = cholesky(D, lower=True, check_finite=False)          # reads the lower triangle only
            ok = np.min(np.diag(R)) ** 2 > D.shape[0] * np.finfo(float).eps * np.max(np.diag(D))
        except LinAlgError:
            ok = False
        if not ok:
            D = np.tril(D) + np.tril(D, -1).T                        # the full symmetric D for the direct form
        if ok:
            # Σ_t = Σ_NNGP + W_t W_tᵀ,  W_t = B diag(g_t) R − Z,  Z = (R⁻¹ C)ᵀ
            Zt = np.asfortranarray(solve_triangular(R, C, lower=True, check_finite=False))   # (P × P_test) = R⁻¹ C
            base = self.K_ss - Zt.T @ Zt
            base = 0.5 * (base + base.T)
            out = np.empty((nT, Pt, Pt)) if want_cov else None
            var = np.empty((nT, Pt))
            iu = np.triu_indices(Pt, 1)
            BT = self.B.T                                                    # (P × P_test), Fortran-ordered view
            for i in range(nT):
                # Wᵀ = Rᵀ diag(g_t) Bᵀ − Zᵀᵀ: the triangular multiply from the left on a Fortran-ordered
                # operand runs without copies (1.5× faster than M R from the right, OpenBLAS, P = 1200)
                Wt = dtrmm(1.0, R, BT * G[i][:, None], side=0, lower=1, trans_a=1, overwrite_b=1)
                Wt -= Zt
                W = Wt.T
                if want_cov:
                    S = dsyrk(1.0, W, beta=1.0, c=base, lower=0)                # upper triangle of base + W Wᵀ
                    S[(iu[1], iu[0])] = S[iu]
                    out[i] = S
                    var[i] = np.diag(S)
                else:
                    var[i] = np.diag(base) + np.einsum("ij,ij->i", W, W)
            return out, var
        # K_XX singular: direct form Σ = K_** + M D Mᵀ − M C − (M C)ᵀ
        out = np.empty((nT, Pt, Pt)) if want_cov else None
        var = np.empty((nT, Pt))
        for i in range(nT):
            M = self.B * G[i][None, :]
            MD = M @ D
            MC = M @ C
            if want_cov:
                S = self.K_ss + MD @ M.T - MC - MC.T
                out[i] = 0.5 * (S + S.T)
                var[i] = np.diag(out[i])
            else:
                var[i] = np.diag(self.K_ss) + np.einsum("ij,ij->i", MD, M) - 2 * np.diag(MC)
        return out, var


# public within the package: limits.checking.predict checks these predictions against finite networks
# with the same kernels, the same time-independent GD factorisation and the same spectral filter
train_test_kernels = _kernels
GDCore = _GDCore
posterior_from_kernels = _posterior          # many training subsets of one precomputed kernel (limits.gallery)
model_dict = _model_dict                     # what a prediction records of its model (limits.cli.predict --kernel)
flow_filter = _gfun


# ---------------------------------------------------------------------------------------------- large P
@dataclass(frozen=True)
class RegressionResult(Result):
    """Kernel-regression predictor at large P (:func:`kernel_regression`): ``mean`` (P_test×d_out),
    ``var`` (P_test,) per test point (diagonal only; None with ``var=False``), ``kernel`` "nngp" | "ntk",
    ``noise`` σ², ``log_marginal_likelihood`` (NNGP only, else nan), ``memory_bytes`` (the estimate the
    limit was checked against), ``diagnostics`` (block, seconds per stage), model dict and inputs."""

    mean: np.ndarray
    var: np.ndarray | None
    kernel: str
    noise: float
    log_marginal_likelihood: float
    memory_bytes: float
    diagnostics: dict
    model: dict
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray

    def __str__(self):
        what = "NNGP posterior mean" if self.kernel == "nngp" else "NTK gradient-flow limit"
        lml = "" if not np.isfinite(self.log_marginal_likelihood) else \
            f"; log marginal likelihood {self.log_marginal_likelihood:.6g}"
        return (f"kernel regression ({what}) of {model_label(self.model)}: {self.X_train.shape[0]} training, "
                f"{self.X_test.shape[0]} test points, {self.mean.shape[1]} output(s); noise σ² = {self.noise:g}{lml}; "
                f"memory estimate {self.memory_bytes / 2**30:.3g} GiB")


def regression_memory(P, P_test, kernel="nngp", var=True, block=256, d_out=1) -> float:
    """Bytes :func:`kernel_regression` allocates at most: the P×P float64 kernel(s) factored in place (one;
    two for the NTK variance, which also needs K_XX), test chunks of ``_test_chunk(P)`` rows (2–4
    P×chunk blocks), the tile scratch (7·block²) and O(L·P) vectors."""
    n_pp = 2 if (kernel == "ntk" and var) else 1
    tb = min(P_test, _test_chunk(P))
    block = min(block, max(P, tb))
    n_ct = (2 + 2 * (kernel == "ntk")) if var else 1
    return 8.0 * (n_pp * P * P + n_ct * P * tb + 7 * block * block + 2 * P * d_out + 32 * (P + P_test))


def _test_chunk(P):
    return max(1, (1 << 25) // max(P, 1))      # P×chunk float64 blocks of at most 256 MiB


@parallel.n_jobs_option
@limit_blas
def kernel_regression(model, X_train, Y_train, X_test, kernel="nngp", noise=0.0, *, var=True, block=256,
                      memory_limit=None, progress=None, solver="cholesky", backend="serial", scheduler=None,
                      store=None, tol=1e-10, rank=None, maxiter=1000, n_workers=None, worker_memory="2GiB",
                      probes=16, seed=0, precomputed=None) -> RegressionResult:
    """Kernel-regression predictor for large training sets without P×P copies.

    ``kernel="nngp"``: the NNGP posterior mean K_*X (K_XX + σ²I)⁻¹ Y and latent variance
    K_** − K_*X (K_XX + σ²I)⁻¹ K_X* per test point (= :func:`nngp_posterior` ``mean``/``var``), and the
    log marginal likelihood. ``kernel="ntk"``: the infinite-time gradient-flow ensemble of
    :func:`gradient_descent` (t → ∞, Θ_XX positive definite): μ_∞ = Θ_*X Θ_XX⁻¹ Y and
    Σ_∞ = K_** + A K_XX Aᵀ − A K_X* − K_*X Aᵀ, A = Θ_*X Θ_XX⁻¹ (diagonal only); ``noise`` σ² > 0
    replaces Θ_XX by Θ_XX + σ²I (kernel ridge regression, a regulariser, no longer the flow limit).

    The training kernel is filled tile by tile (:func:`limits.kernels.kernel_blocked`, ``block``) in one
    triangle of a C-ordered array whose transpose is factored in place (``cho_factor(..., lower=True,
    overwrite_a=True)``); test points are processed in chunks. Memory: one P×P float64 (two for the NTK
    variance) plus O(P·chunk) (:func:`regression_memory`); more than ``memory_limit`` bytes (default
    half the available physical memory) raises ValueError before anything is allocated. A failed
    factorisation raises :class:`SingularKernelError` with a suggested ``noise``.

    Measured (benchmarks/bench_bigp.py, erf MLP L = 10, 1000 test points, one BLAS thread): P = 20,000
    NNGP mean + variance 150 s CPU, peak RSS 3.39 GiB; NTK flow limit with variance 185 s CPU, 6.67 GiB.

    ``solver="cg"`` (training sets whose P×P kernel does not fit in memory; :mod:`limits.largep.regression`):
    the training kernel is stored as tiles in the directory ``store`` (a temporary one when None; a given store
    is locked while in use, its tiles verified against the kernel they belong to and their own digest — those of
    another kernel or damaged are recomputed and counted — then reused and resumed; :mod:`limits.kernels.tilestore`),
    computed serially or on dask.distributed (``backend="dask"``,
    ``scheduler`` None → a LocalCluster of ``n_workers`` workers with ``worker_memory`` each, or an address
    ``tcp://host:8786``); A = K + σ²I is solved by block preconditioned CG (pivoted-Cholesky preconditioner
    of ``rank``, default ⌈8√P⌉ ≤ 2048; 0 = the diagonal (Jacobi) preconditioner alone, stopping at relative residual ``tol``, at most ``maxiter`` iterations) with matrix–vector
    products streaming the tiles. Needs ``noise`` > 0. ``var``: True (every test point), False, or an index
    array of test points (each is one more CG right-hand side); ``var`` then holds those points only, in
    that order (``diagnostics["var_points"]``). Mean and variance are exact to ``tol``; the log marginal
    likelihood is estimated by stochastic Lanczos quadrature (``probes`` Rademacher vectors from ``seed``),
    its standard error in ``diagnostics["log_marginal_likelihood_se"]``. ``block`` is then the tile edge
    (default 2048 when left at 256). Diagnostics: CG ``iterations``, ``history``, ``true_relative_residual``,
    preconditioner ``rank``, tile counts (computed / reused / recomputed), seconds per stage, and the ``estimate``
    made before anything was allocated (driver memory, disk for the tiles, tile CPU time): a driver needing more
    than ``memory_limit`` (default half the available memory), or tiles needing more disk than the store's file
    system has free, is refused with the estimate.

    ``precomputed`` (Cholesky solver): the kernels computed once, ``limits.kernels.kernel(model, X_all)`` with
    every training and test row in ``X_all``, verified to belong to this model and these inputs
    (:mod:`limits.precomputed`) and read instead of recomputed (``kernel`` still names which one to regress
    with). The cg solver reuses its tiles instead (``store``).
    """
    if solver not in ("cholesky", "cg"):
        raise ValueError(f"solver must be 'cholesky' or 'cg', got {solver!r}")
    if not isinstance(kernel, str):
        raise ValueError("kernel names the kernel to regress with, 'nngp' or 'ntk'; a kernel computed once "
                         "(limits.kernels.kernel(model, X_all)) goes to precomputed=")
    if solver == "cg":
        if precomputed is not None:
            raise ValueError("precomputed= is for solver='cholesky'; the cg solver reuses the tiles in store=")
        return _cg_regression(model, X_train, Y_train, X_test, kernel, noise, var=var, block=block, progress=progress,
                              backend=backend, scheduler=scheduler, store=store, tol=tol, rank=rank, maxiter=maxiter,
                              n_workers=n_workers, worker_memory=worker_memory, probes=probes, seed=seed,
                              memory_limit=memory_limit)
    if backend != "serial" or store is not None or scheduler is not None:
        raise ValueError("backend, scheduler and store belong to solver='cg' (the Cholesky path runs in this process)")
    import time

    from .checks import positive_int

    what = "limits.predict.kernel_regression"
    if kernel not in ("nngp", "ntk"):
        raise ValueError(f"kernel must be 'nngp' or 'ntk', got {kernel!r}")
    ntk = kernel == "ntk"
    m = _model(model, what, ntk=ntk)
    X = _X(X_train, "X_train", _dim(m, "d_in"))
    Xs = _X(X_test, "X_test", _dim(m, "d_in"))
    Y, m = _train_targets(Y_train, X.shape[0], m)
    noise = real_number(noise, "noise")
    block = positive_int(block, "block")
    if not isinstance(var, (bool, np.bool_)):
        raise ValueError(f"var must be True or False, got {var!r}")
    P, Pt = X.shape[0], Xs.shape[0]
    need = regression_memory(P, Pt, kernel, bool(var), block, Y.shape[1])
    _regression_memory_check(what, need, memory_limit, P, ntk and var)
    pre = None if precomputed is None else \
        kernels_for(m, X, Xs, ntk, precomputed, what, test_cov="diag" if var else False)
    sec = {}
    t0 = time.perf_counter()
    A, K = _regression_train_kernels(m, X, kernel, var, block, progress, pre)
    sec["kernel"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with parallel.dense_blas(P):                      # the factorisation: BLAS on n_jobs cores
        c = _factor_in_place(A, noise, kernel, what)
        alpha = _cho_solve(c, Y)
    sec["cholesky"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mean, vs, tb = _regression_test(m, X, Xs, c, alpha, K, ntk, var, block, pre)
    sec["predict"] = time.perf_counter() - t0
    lml = float("nan")
    if not ntk:
        lml = float(-0.5 * np.einsum("po,po->", Y, alpha) - Y.shape[1] * np.sum(np.log(np.diag(c)))
                    - 0.5 * Y.shape[1] * P * math.log(2 * math.pi))
    diag = {"block": int(block), "seconds": sec, "test_chunk": int(tb), "precomputed": pre is not None}
    return RegressionResult(mean, vs, kernel, noise, lml, float(need), diag, _model_dict(m), X, Y, Xs)


def _regression_memory_check(what, need, memory_limit, P, two):
    """Refuse (ValueError) before allocating when :func:`regression_memory` exceeds ``memory_limit`` (default
    half the available memory)."""
    from .checks import positive_float

    if memory_limit is None:
        from .memory import available_memory

        avail = available_memory()
        limit, src = (None, "") if avail is None else (0.5 * avail, f"half the available memory ({avail / 2**30:.3g} GiB)")
    else:
        limit, src = positive_float(memory_limit, "memory_limit"), f"memory_limit = {memory_limit:.6g} bytes"
    if limit is not None and need > limit:
        raise ValueError(f"{what}: P = {P} training points need about {need / 2**30:.3g} GiB "
                         f"({2 if two else 1} P×P float64 kernel(s) of {8.0 * P * P / 2**30:.3g} GiB each, "
                         f"factored in place), more than {src}; use fewer training points or raise memory_limit")


def _regression_train_kernels(m, X, kernel, var, block, progress, pre):
    """(A, K): the regressed training kernel, F-ordered with its lower triangle filled (factored in place next),
    and K_XX for the NTK variance (else None) — tile by tile, a composition's in one piece, or copied from the
    precomputed blocks ``pre``."""
    ntk = kernel == "ntk"
    if pre is not None:
        A = np.array(pre["T"] if ntk else pre["K"], dtype=float, order="F")      # a copy: factored in place
        K = np.asfortranarray(pre["K"]) if (ntk and var) else None
    else:
        get = ("nngp", "ntk") if (ntk and var) else ((kernel,))
        if _dim(m, "d_in") is None:           # a composition: its kernel in one piece (no tiled engine)
            from types import SimpleNamespace

            from .kernels.composed import kernel as _composed

            r = _composed(m, X, None, get)
            kb = SimpleNamespace(**{g: None if getattr(r, g) is None else np.asfortranarray(getattr(r, g).T)
                                    for g in ("nngp", "ntk")})
            del r
        else:
            from .kernels.blocked import kernel_blocked

            kb = kernel_blocked(m, X, block=block, get=get, fill="upper", progress=progress)
        A = (kb.ntk if ntk else kb.nngp).T               # F-ordered, lower triangle filled
        K = kb.nngp.T if (ntk and var) else None         # K_XX, lower triangle (NTK variance only)
        del kb
    for a in (A, K):
        if a is not None and not np.all(np.isfinite(np.diag(a))):
            raise ValueError(f"the {kernel.upper()} of this model overflows on these inputs (chaotic/deep regime); "
                             "use smaller sigma_w2 or depth")
    return A, K


def _factor_in_place(A, noise, kernel, what):
    """Lower Cholesky factor of A + σ²I, overwriting A; :class:`SingularKernelError` with a suggested noise."""
    from scipy.linalg import LinAlgError, cho_factor

    P = A.shape[0]
    dA = np.diag(A).copy()
    A.flat[:: P + 1] += noise
    s_hint = max(10.0 * noise, 10.0 * P * np.finfo(float).eps * float(dA.max()))
    msg = (f"{what}: the training {kernel.upper()} + noise·I (noise = {noise:g}) is numerically singular "
           f"(repeated or collinear inputs, or a degenerate kernel); pass noise >= {s_hint:.3g} "
           "(10·P·ε·max K_αα, or 10× the current noise; raise it further if the factorisation still fails)")
    try:
        c, _ = cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
    except LinAlgError:
        raise SingularKernelError(msg, s_hint) from None
    piv = np.diag(c) ** 2
    if not (np.all(np.isfinite(piv)) and piv.min() > P * np.finfo(float).eps * (dA.max() + noise)):
        raise SingularKernelError(msg, s_hint)
    return c


def _cho_solve(c, Y):
    from scipy.linalg import cho_solve

    return cho_solve((c, True), Y, check_finite=False)


def _regression_test(m, X, Xs, c, alpha, K, ntk, var, block, pre):
    """(mean, var or None, test chunk): the test points in chunks of :func:`_test_chunk` rows, their cross
    kernels computed (or read from ``pre``) chunk by chunk."""
    from scipy.linalg import cho_solve, solve_triangular
    from scipy.linalg.blas import dsymm

    P, Pt = X.shape[0], Xs.shape[0]
    get = ("nngp", "ntk") if (ntk and var) else (("ntk",) if ntk else ("nngp",))
    if pre is not None:
        from types import SimpleNamespace

        kss = pre["K_ss"] if var else None
        _tiles = lambda S: SimpleNamespace(nngp=pre["K_sx"][S], ntk=None if pre["T_sx"] is None else pre["T_sx"][S])  # noqa: E731
    elif _dim(m, "d_in") is None:
        from .kernels.composed import kernel as _composed

        kss = (np.array([_composed(m, Xs[i:i + 1], None, ("nngp",)).nngp[0, 0] for i in range(Pt)]) if var else None)
        _tiles = lambda S: _composed(m, Xs[S], X, get)  # noqa: E731
    else:
        from .kernels.blocked import kernel_blocked, kernel_diag

        kss = kernel_diag(m, Xs, ("nngp",))["nngp"] if var else None
        _tiles = lambda S: kernel_blocked(m, Xs[S], block=block, get=get, X2=X, progress=False)  # noqa: E731
    mean = np.empty((Pt, alpha.shape[1]))
    vs = np.empty(Pt) if var else None
    tb = _test_chunk(P)
    for s in range(0, Pt, tb):
        S = slice(s, min(s + tb, Pt))
        kc = _tiles(S)
        Bsx = kc.ntk if ntk else kc.nngp                  # (chunk × P) Θ_*X or K_*X
        mean[S] = Bsx @ alpha
        if not var:
            continue
        if not ntk:
            V = solve_triangular(c, Bsx.T, lower=True, check_finite=False)       # L⁻¹ K_X*
            vs[S] = kss[S] - np.einsum("pi,pi->i", V, V)
        else:
            At = cho_solve((c, True), Bsx.T, check_finite=False)                # Aᵀ = Θ⁻¹ Θ_X*
            KAt = dsymm(1.0, K, At, side=0, lower=1)                           # K_XX Aᵀ (lower triangle)
            vs[S] = kss[S] + np.einsum("pi,pi->i", At, KAt) - 2.0 * np.einsum("pi,ip->i", At, kc.nngp)
        del kc, Bsx
    return mean, vs, tb


def _cg_regression(model, X_train, Y_train, X_test, kernel, noise, *, var, block, progress, backend, scheduler, store,
                   tol, rank, maxiter, n_workers, worker_memory, probes, seed, memory_limit):
    from .checks import positive_float, positive_int
    from .largep.regression import cg_regression

    what = "limits.predict.kernel_regression"
    if kernel not in ("nngp", "ntk"):
        raise ValueError(f"kernel must be 'nngp' or 'ntk', got {kernel!r}")
    m = _model(model, what, ntk=kernel == "ntk")
    X = _X(X_train, "X_train", _dim(m, "d_in"))
    Xs = _X(X_test, "X_test", _dim(m, "d_in"))
    Y, m = _train_targets(Y_train, X.shape[0], m)
    noise = real_number(noise, "noise")
    block = 2048 if block == 256 and _dim(m, "d_in") is not None else positive_int(block, "block")
    tol = positive_float(tol, "tol")
    mean, vs, lml, diag = cg_regression(
        m, X, Y, Xs, kernel, noise, var=var, store=store, block=block, backend=backend, scheduler=scheduler,
        n_workers=n_workers, memory_limit=worker_memory, tol=tol, maxiter=positive_int(maxiter, "maxiter"),
        rank=None if rank is None else positive_int(rank, "rank", minimum=0), probes=positive_int(probes, "probes", minimum=2), seed=seed,
        progress=progress, max_memory=None if memory_limit is None else positive_float(memory_limit, "memory_limit"))
    return RegressionResult(mean, vs, kernel, noise, lml, float(diag["driver_memory_bytes"]), diag, _model_dict(m),
                            X, Y, Xs)
