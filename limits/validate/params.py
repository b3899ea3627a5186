"""params validation: symbolic exponents (limits.params) vs fitted log–log slopes of finite
networks (limits.finite.coordcheck), plus the θ-shift symmetry as an exact finite-network identity.

Each statistical case compares a predicted exponent with the fitted slope (± SE over seeds,
weighted log–log fit); it passes when |z| ≤ 4 and the prediction lies in the slope's 95% CI.
Quick mode: widths 2^6…2^9, depths 2^2…2^6; full (``limits validate params --full``): widths
2^6…2^11, depths 2^2…2^7.
"""
from __future__ import annotations

import numpy as np

from ..stats import RateFit, signed
from . import Case, register_case

COMP = "params"


def _sizes(quick):
    widths = [2 ** k for k in range(6, 10 if quick else 12)]
    depths = [2 ** k for k in range(2, 7 if quick else 8)]
    return widths, depths, (6 if quick else 8)


def _case(name, fit, detail=""):
    """Verdict on the fit over the largest sizes (see ``limits.finite.coordcheck``); the all-sizes
    slope is reported in the detail."""
    rate = RateFit(fit.tail_slope, 0.0, fit.tail_slope_se, fit.tail_ci_low, fit.tail_ci_high, 0.95)
    xs = ", ".join(str(int(v)) for v in fit.x[-fit.tail_points:])
    info = (f"{fit.quantity} vs {fit.x_name} ∈ {{{xs}}}: slope {signed(fit.tail_slope, 3)} "
            f"[{signed(fit.tail_ci_low, 3)}, {signed(fit.tail_ci_high, 3)}]; all sizes: {signed(fit.slope, 3)} "
            f"[{signed(fit.ci_low, 3)}, {signed(fit.ci_high, 3)}]; predicted {signed(fit.predicted, 3)}")
    return Case.statistical(COMP, name, fit.predicted, fit.tail_slope, fit.tail_slope_se, rate=rate,
                            rate_expected=fit.predicted, detail=(detail + "; " if detail else "") + info)


def _width(name, quantity, quick, seed, label):
    from ..finite.coordcheck import width_check
    from ..params import named

    widths, _, seeds = _sizes(quick)
    c = width_check(named(name, convention="variance"), widths=widths, seeds=seeds, quantities=(quantity,),
                    seed=seed)
    return _case(label, c.fit(quantity))


@register_case(COMP, "μP features: |Δh| = Θ(1) in N (one GD step)")
def _mup_features(rng, quick):
    return _width("muP", "dh:hidden", quick, int(rng.integers(2**31)), "μP features: |Δh| = Θ(1) in N (one GD step)")


@register_case(COMP, "MF features: |Δh| = Θ(1) in N")
def _mf_features(rng, quick):
    return _width("MF", "dh:h0", quick, int(rng.integers(2**31)), "MF features: |Δh| = Θ(1) in N")


@register_case(COMP, "NTK features: |Δh| = Θ(N^-1/2)")
def _ntk_features(rng, quick):
    return _width("NTK", "dh:hidden", quick, int(rng.integers(2**31)), "NTK features: |Δh| = Θ(N^-1/2)")


@register_case(COMP, "SP output blow-up: |Δf| = Θ(N) after one step")
def _sp_output(rng, quick):
    return _width("SP", "df", quick, int(rng.integers(2**31)), "SP output blow-up: |Δf| = Θ(N) after one step")


def _adam(c, quick, seed, eta0, quantity="dh:hidden"):
    from ..finite.coordcheck import width_check
    from ..params import Parameterisation

    widths, _, seeds = _sizes(quick)
    p = Parameterisation.make(a=0, b=[0, "1/2", 1], c=c, optimizer="adam", name=f"Adam, c = {c} (a = 0 gauge)")
    return width_check(p, widths=widths, seeds=seeds, quantities=(quantity,), eta0=eta0, seed=seed).fit(quantity)


@register_case(COMP, "Adam μP (c = 0, 1, 1): |Δh| = Θ(1)")
def _adam_mup(rng, quick):
    return _case("Adam μP (c = 0, 1, 1): |Δh| = Θ(1)", _adam((0, 1, 1), quick, int(rng.integers(2**31)), 1e-3))


@register_case(COMP, "Adam with SGD-μP rates (c = −1, 0, 1): hidden update |ΔW h| = Θ(N)")
def _adam_sgd_rates(rng, quick):
    return _case("Adam with SGD-μP rates (c = −1, 0, 1): hidden update |ΔW h| = Θ(N)",
                 _adam((-1, 0, 1), quick, int(rng.integers(2**31)), 1e-5, "dWh:hidden"))


def _local(p, quick, seed, eta0, quantity="dh:hidden"):
    from ..finite.coordcheck import width_check

    widths, _, seeds = _sizes(quick)
    widths = widths[:-1] if not quick else widths          # TP/GNT cost more per step
    return width_check(p, widths=widths, seeds=seeds, quantities=(quantity,), eta0=eta0, seed=seed).fit(quantity)


@register_case(COMP, "TP μP (b_L = 1/2, seed 003 Thm 5.1): |Δh| = Θ(1)")
def _tp_mup(rng, quick):
    from ..params import named

    return _case("TP μP (b_L = 1/2, seed 003 Thm 5.1): |Δh| = Θ(1)",
                 _local(named("muP", convention="std", algorithm="tp"), quick, int(rng.integers(2**31)), 0.05))


@register_case(COMP, "DTP with SGD-μP init (b_L = 1): |Δh| = Θ(N^3/2)")
def _tp_bp_init(rng, quick):
    from ..params import Parameterisation

    p = Parameterisation.make(a=0, b=[0, "1/2", 1], c=[-1, 0, 1], algorithm="dtp", name="DTP with SGD-μP exponents")
    return _case("DTP with SGD-μP init (b_L = 1): |Δh| = Θ(N^3/2)",
                 _local(p, quick, int(rng.integers(2**31)), 1e-7, "dh:h0"),
                 detail="feedback Q_L ∝ N^{w − 1/2} amplifies targets when the read-out is small (S.154)")


@register_case(COMP, "GNT μP (e_B = 1, damping ∝ N^-1): |Δh| = Θ(1)")
def _gnt_mup(rng, quick):
    from ..params import named

    return _case("GNT μP (e_B = 1, damping ∝ N^-1): |Δh| = Θ(1)",
                 _local(named("muP", convention="std", algorithm="gnt"), quick, int(rng.integers(2**31)), 0.05))


def _small_head(steps, quick, seed):
    """μP rates with a tiny read-out init (b_L = 2, std, a = 0): the first step sees the initial read-out
    (one-step exponent: features N^{-1}); from the second step the moved read-out dominates — TP4's
    r = min(a_L+b_L, 2a_L+c_L) + … gives Θ(1) (seed 003: "b_L ≥ 1 reduces to b_L = 1")."""
    from ..finite.coordcheck import width_check
    from ..params import Parameterisation, update_exponents

    widths, _, seeds = _sizes(quick)
    p = Parameterisation.make(a=0, b=[0, "1/2", 2], c=[-1, 0, 1], name="μP rates, read-out b_L = 2")
    pred = p.one_step_exponents()["dh:hidden"] if steps == 1 else -update_exponents(p)["r"]
    return width_check(p, widths=widths, seeds=seeds, quantities=("dh:hidden",), steps=steps, eta0=0.5,
                       predicted={"dh:hidden": float(pred)}, seed=seed).fit("dh:hidden")


@register_case(COMP, "small read-out (b_L = 2), 1 step: |Δh| = Θ(N^-1) (initial read-out)")
def _small_head_1(rng, quick):
    return _case("small read-out (b_L = 2), 1 step: |Δh| = Θ(N^-1) (initial read-out)",
                 _small_head(1, quick, int(rng.integers(2**31))))


@register_case(COMP, "small read-out (b_L = 2), 2 steps: |Δh| = Θ(1) (TP4 r with min(a+b, 2a+c))")
def _small_head_2(rng, quick):
    return _case("small read-out (b_L = 2), 2 steps: |Δh| = Θ(1) (TP4 r with min(a+b, 2a+c))",
                 _small_head(2, quick, int(rng.integers(2**31))))


@register_case(COMP, "θ-shift symmetry: μP and MF train identically (finite nets)")
def _shift(rng, quick):
    """μP and MF are one θ-shift apart (TP4): the same seeds must give the same f(t) to rounding."""
    from ..finite import concretise, train
    from ..params import named

    seed = int(rng.integers(2**31))
    X = rng.standard_normal((6, 8))
    Y = np.sign(rng.standard_normal((6, 1)))
    outs = []
    for name in ("muP", "MF"):
        net = concretise(named(name, convention="variance"), 128, 4, d_in=8, activation="tanh", eta0=0.1)
        outs.append(train(net, X, Y, 5, n_inits=2, seed=seed, keep_weights=False).f)
    assert named("muP").equivalent(named("MF"))
    return Case.exact(COMP, "θ-shift symmetry: μP and MF train identically (finite nets)", outs[0], outs[1],
                      tol=1e-10, detail="5 GD steps, N=128, L=4, tanh; max relative difference of f(t)")


def _depth(alpha, quick, seed):
    from ..finite.coordcheck import depth_check
    from ..params import alpha_analysis, named

    _, depths, seeds = _sizes(quick)
    from ..params import as_exponent

    alpha_ = float(as_exponent(alpha, "alpha"))
    pred = float(alpha_analysis(alpha)["init_log_growth_exponent"])   # = 1 − 2α: feature update L^{1−2α}
    c = depth_check(named("MF", convention="std"), depths=depths, N=64 if quick else 256, alpha=alpha_, seeds=seeds,
                    quantities=("dh:last",), predicted={"dh:last": pred}, seed=seed)
    return c.fit("dh:last")


@register_case(COMP, "Depth-μP (α = 1/2): residual feature updates flat in L")
def _depth_half(rng, quick):
    return _case("Depth-μP (α = 1/2): residual feature updates flat in L", _depth("1/2", quick, int(rng.integers(2**31))))


@register_case(COMP, "α = 1: residual feature updates Θ(L^-1)")
def _depth_one(rng, quick):
    return _case("α = 1: residual feature updates Θ(L^-1)", _depth(1, quick, int(rng.integers(2**31))))


def _adam_depth(lr_exp, quick, seed):
    """Adam, mean-field width, branch L^{-1/2}, hidden rate ∝ L^{lr_exp}: TP6 effective update
    L^{-γ} with γ = −lr_exp (Adam), summed stream update L^{1−α−γ}."""
    import sympy as sp

    from ..finite.coordcheck import depth_check
    from ..params import named
    from ..params.depth import ALPHA, GAMMA, depth_quantities

    _, depths, seeds = _sizes(quick)
    e = depth_quantities()["training_update"].exponent
    pred = float(e.subs({ALPHA: sp.Rational(1, 2), GAMMA: -sp.nsimplify(lr_exp)}))
    p = named("MF", convention="std", optimizer="adam")
    c = depth_check(p, depths=depths, N=64 if quick else 128, alpha=0.5, seeds=seeds, quantities=("dh:last",),
                    predicted={"dh:last": pred}, lr_block={1: (lambda B: B ** float(lr_exp))}, eta0=1e-3, seed=seed)
    return c.fit("dh:last")


@register_case(COMP, "Depth-μP with Adam (η ∝ L^-1/2): residual feature updates flat in L")
def _adam_depth_mup(rng, quick):
    return _case("Depth-μP with Adam (η ∝ L^-1/2): residual feature updates flat in L",
                 _adam_depth(-0.5, quick, int(rng.integers(2**31))))


@register_case(COMP, "Adam without depth scaling (α = 1/2): residual feature updates ∝ L^1/2")
def _adam_depth_plain(rng, quick):
    return _case("Adam without depth scaling (α = 1/2): residual feature updates ∝ L^1/2",
                 _adam_depth(0.0, quick, int(rng.integers(2**31))))


def _block(quick, seed, corrected, quantity, freeze_w2=False):
    from ..finite.coordcheck import depth_check
    from ..params import named, two_layer_block, two_layer_block_correction

    _, depths, seeds = _sizes(quick)
    x, y = two_layer_block_correction()
    tb = two_layer_block(eta1_n=x, eta1_L=y if corrected else 0)
    pred = {"dWh:block1": tb["delta_u"][1], "incr:block2": tb["delta_increment"][1],
            "dh:last": (tb["delta_stream_via_u"] if freeze_w2 else tb["delta_stream"])[1]}
    lr = {}
    if corrected:
        lr[1] = lambda B, y=float(y): B ** y
    if freeze_w2:
        lr[2] = lambda B: 0.0
    c = depth_check(named("MF", convention="std"), depths=depths, N=64 if quick else 128, block_layers=2,
                    branch=lambda B: B ** -0.5, seeds=seeds, quantities=(quantity,), lr_block=lr or None,
                    predicted={quantity: float(pred[quantity])}, seed=seed)
    return c.fit(quantity)


@register_case(COMP, "two-layer block, η = η̄n: first-layer update Θ(L^-1/2) (collapse)")
def _block_collapse(rng, quick):
    return _case("two-layer block, η = η̄n: first-layer update Θ(L^-1/2) (collapse)",
                 _block(quick, int(rng.integers(2**31)), False, "dWh:block1"))


@register_case(COMP, "two-layer block, η_1 = η̄n√L: first-layer update Θ(1)")
def _block_fixed(rng, quick):
    return _case("two-layer block, η_1 = η̄n√L: first-layer update Θ(1)",
                 _block(quick, int(rng.integers(2**31)), True, "dWh:block1"))


@register_case(COMP, "two-layer block: residual increment update Θ(L^-1) per block")
def _block_incr(rng, quick):
    return _case("two-layer block: residual increment update Θ(L^-1) per block",
                 _block(quick, int(rng.integers(2**31)), False, "incr:block2"))


@register_case(COMP, "two-layer block, corrected, W² frozen: stream change via Δu Θ(L^1/2)")
def _block_via_u(rng, quick):
    return _case("two-layer block, corrected, W² frozen: stream change via Δu Θ(L^1/2)",
                 _block(quick, int(rng.integers(2**31)), True, "dh:last", freeze_w2=True),
                 detail="first order in η̄: the corrected first-layer update feeds back coherently through W² "
                        "(limits.params.two_layer_block 'delta_stream_via_u')")


@register_case(COMP, "s(θ) − 1 = Θ(L/N) at init (mean-field linear ResNet, α = 1/2)")
def _s_theta(rng, quick):
    """Uses the PC engineer's ``limits.pc.s_seed000_eq104``; theory from ``limits.params.depth``:
    exact ``E[s] − 1 = N^{-1} Σ_{k=0}^{L-2} (1 + 1/L)^k`` (→ (e − 1) L/N) and the N-exponent −1."""
    import sympy as sp

    from ..params.depth import s_expectation
    from ..stats import loglog_fit, mean_se
    try:
        from ..pc import s_seed000_eq104
    except ImportError as exc:  # pragma: no cover - depends on the pc component
        raise RuntimeError("limits.pc.s_seed000_eq104 not available") from exc
    seeds = 8 if quick else 16
    widths = [64, 128, 256, 512] if quick else [64, 128, 256, 512, 1024]
    depths = [4, 8, 16, 32] if quick else [4, 8, 16, 32, 64]

    def sample(N, L):
        vals = []
        for _ in range(seeds):
            W = [rng.standard_normal((N, 4))] + [rng.standard_normal((N, N)) for _ in range(L - 2)] + \
                [rng.standard_normal((1, N))]
            vals.append(s_seed000_eq104(W, N, alpha=0.5) - 1.0)
        return mean_se(vals)

    mN = [sample(N, 8) for N in widths]
    fitN = loglog_fit(widths, [m for m, _ in mN], yerr=[s for _, s in mN])
    pN = float(sp.diff(sp.log(s_expectation()), sp.Symbol("N", positive=True)) * sp.Symbol("N", positive=True))
    mL = [sample(128, L) for L in depths]
    exact = [float(s_expectation(128, L)) for L in depths]
    fitL = loglog_fit(depths, [m for m, _ in mL], yerr=[s for _, s in mL])
    return [Case.statistical(COMP, "s(θ) − 1 vs N at L = 8: slope −1", pN, fitN.slope, fitN.slope_se, rate=fitN,
                             rate_expected=pN, detail=f"widths {widths}, {seeds} seeds per point"),
            Case.statistical(COMP, "E[s(θ)] − 1 at N = 128 vs exact (1/N)Σ_k (1+1/L)^k, L = 4…", exact,
                             [m for m, _ in mL], [s for _, s in mL], rate=fitL,
                             detail=f"depths {depths}; fitted L-slope {signed(fitL.slope, 3)} (finite-L curvature of "
                                    "Σ(1+1/L)^k; asymptotically (e−1)L/N, slope 1)")]


def _pc_pred(p):
    from ..params import update_exponents

    u = update_exponents(p)
    return {"dWh:in": -u["r_input"], "dWh:hidden": -u["r_hidden"], "dWh:out": -u["r_output"], "dh:hidden": -u["r"]}


def _pc_case(label, p, quick, seed, detail=""):
    from ..finite.coordcheck import pc_width_check

    widths = [2 ** k for k in range(6, 10 if quick else 11)]
    c = pc_width_check(p, widths=widths, seeds=6 if quick else 8, predicted=_pc_pred(p), seed=seed)
    fits = c.fits
    pred = [f.predicted for f in fits]
    est = [f.tail_slope for f in fits]
    se = [f.tail_slope_se for f in fits]
    ok_ci = all(f.consistent for f in fits)
    info = "; ".join(f"{f.quantity}: {signed(f.tail_slope, 3)} [{signed(f.tail_ci_low, 3)}, "
                     f"{signed(f.tail_ci_high, 3)}] vs "
                     f"{signed(f.predicted, 3)}" for f in fits)
    case = Case.statistical(COMP, label, pred, est, se, detail=(detail + "; " if detail else "") + info)
    if not ok_ci and case.verdict == "pass":
        case = Case(**{**case.__dict__, "verdict": "fail"})
    return case


def _pc_mup(g):
    from ..params import named

    return named("muP", convention="std", algorithm="pc", gamma_bar_L=g, gauge="a0")


@register_case(COMP, "single-shot PC μP (seed 003 Table 1), γ̄_L = 0: updates Θ(1)")
def _pc0(rng, quick):
    return _pc_case("single-shot PC μP (seed 003 Table 1), γ̄_L = 0: updates Θ(1)", _pc_mup(0), quick,
                    int(rng.integers(2**31)), "one F-ini sequential inference sweep + one weight step "
                    "(limits.finite.coordcheck.pc_single_shot_step)")


@register_case(COMP, "single-shot PC μP, γ̄_L = −1/2: updates Θ(1)")
def _pc_half(rng, quick):
    import sympy as sp

    return _pc_case("single-shot PC μP, γ̄_L = −1/2: updates Θ(1)", _pc_mup(-sp.Rational(1, 2)), quick,
                    int(rng.integers(2**31)))


@register_case(COMP, "single-shot PC μP, γ̄_L = −1 (GNT rates): updates Θ(1)")
def _pc_one(rng, quick):
    return _pc_case("single-shot PC μP, γ̄_L = −1 (GNT rates): updates Θ(1)", _pc_mup(-1), quick,
                    int(rng.integers(2**31)))


@register_case(COMP, "PC NTK-type, seed 003 S.73 literal c_L = 1 at γ̄_L = −1/2: read-out update ∝ N^1/2")
def _pc_ntk_literal(rng, quick):
    import sympy as sp

    from ..params import Parameterisation

    h = sp.Rational(1, 2)
    p = Parameterisation.make(a=0, b=[0, h, h], c=[h, 1 + h, 1], algorithm="pc", gamma_bar_L=-h,
                              name="seed 003 S.71–S.74 literally")
    return _pc_case("PC NTK-type, seed 003 S.73 literal c_L = 1 at γ̄_L = −1/2: read-out update ∝ N^1/2", p, quick,
                    int(rng.integers(2**31)), "the solver's prediction for the literal exponents (S.62 taken "
                    "at face value) is a blow-up of the read-out update")


@register_case(COMP, "PC NTK-type derived by the solver (c_L = 1 − γ̄_L) at γ̄_L = −1/2: kernel regime, no blow-up")
def _pc_ntk_derived(rng, quick):
    import sympy as sp

    from ..params import named

    p = named("NTK", convention="std", algorithm="pc", gamma_bar_L=-sp.Rational(1, 2), gauge="a0")
    return _pc_case("PC NTK-type derived by the solver (c_L = 1 − γ̄_L) at γ̄_L = −1/2: kernel regime, no blow-up",
                    p, quick, int(rng.integers(2**31)))


def _pc_r_ratio(name, quick, rng):
    """Seed 000 Eq. 58: for PC on F* = L/s, df/dt = q (rescaled NTK) + r (PC-only, ∝ ∂s/∂θ). With one
    sample, ∇L = (f − y) ∂f/∂θ and (L/s²)∇s = ∇L/s − ∇F*, so the PC-only term relative to q is
    ``r/q = 1 − s ⟨∇L, ∇F*⟩ / ‖∇L‖²`` (one global learning rate). Predicted growth exponent:
    max(PC-only terms) − max(q terms) of :func:`limits.params.seed000_quantities` (MF/μP: −1/2; NTK: 0)."""
    import sympy as sp

    from ..params import named, seed000_quantities
    from ..params.constraints import substitution
    from ..stats import loglog_fit, mean_se
    try:
        from ..pc import bp_gradients, pc_gradients, s_theta
    except ImportError as exc:  # pragma: no cover
        raise RuntimeError("limits.pc gradients not available") from exc
    p = named(name, convention="variance", algorithm="pc")
    q = seed000_quantities("pc", uniform_lr=False)
    sub = substitution(p)
    pcr = [x.exponent.xreplace(sub) for x in q["D2"] if x.key.startswith("D2.pc_r")]
    qq = [x.exponent.xreplace(sub) for x in q["D2"] if not x.key.startswith("D2.pc_r")]
    pred = float(sp.Max(*pcr) - sp.Max(*qq))
    widths = [64, 128, 256, 512] if quick else [64, 128, 256, 512, 1024, 2048]
    seeds = 8 if quick else 16
    D, L = 8, 3
    ex = {k: float(v) for k, v in p.exponents().items()}
    means, ses = [], []
    for N in widths:
        vals = []
        mult = [N ** -ex["a_input"] / np.sqrt(D)] + [N ** -ex["a_hidden"]] * (L - 2) + \
               [N ** -ex["a_output"] * N ** -ex["d"]]
        for _ in range(seeds):
            W = [rng.standard_normal((N, D)) * N ** (-ex["b_input"] / 2)] + \
                [rng.standard_normal((N, N)) * N ** (-ex["b_hidden"] / 2) for _ in range(L - 2)] + \
                [rng.standard_normal((1, N)) * N ** (-ex["b_output"] / 2)]
            x = rng.standard_normal((1, D))
            y = np.array([[1.0]])
            gl = bp_gradients(W, x, y, multipliers=mult)
            gf = pc_gradients(W, x, y, multipliers=mult)
            s = s_theta(W, multipliers=mult)
            num = sum(float(np.sum(a * b)) for a, b in zip(gl, gf))
            den = sum(float(np.sum(a * a)) for a in gl)
            vals.append(abs(1.0 - s * num / den))
        m, se = mean_se(vals)
        means.append(m)
        ses.append(se)
    fit = loglog_fit(widths, means, yerr=ses)
    z = (fit.slope - pred) / max(fit.slope_se, 1e-300)
    verdict = "pass" if z <= 4.0 else "fail"         # one-sided: seed 000's exponent is an upper bound
    return Case(COMP, f"PC on F* ({name}): PC-only df/dt term / NTK term ≤ N^{pred:+g} (seed 000 bound)", pred,
                fit.slope, fit.slope_se, z, verdict, "statistical", fit.slope, (fit.ci_low, fit.ci_high), None,
                detail=f"seed 000 Eq. 58–73 estimate the PC-only term by a coherent sum over all N² weight entries, "
                       f"an upper bound; measured |r/q| = |1 − s⟨∇L,∇F*⟩/‖∇L‖²| at init decays faster: slope "
                       f"{signed(fit.slope, 3)} [{signed(fit.ci_low, 3)}, {signed(fit.ci_high, 3)}] "
                       f"(linear net L = {L}, one sample, "
                       f"widths {widths}, {seeds} seeds; limits.pc gradients). One-sided test: pass iff "
                       f"(slope − bound)/SE ≤ 4.")


@register_case(COMP, "PC on F* (MF): PC-only df/dt term ≤ N^-1/2 × NTK term")
def _pc_r_mf(rng, quick):
    return _pc_r_ratio("MF", quick, rng)


@register_case(COMP, "PC on F* (NTK, d = 0): PC-only df/dt term ≤ Θ(1) × NTK term")
def _pc_r_ntk(rng, quick):
    return _pc_r_ratio("NTK", quick, rng)
