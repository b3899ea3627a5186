"""Issue 14 (no wrong or silent-NaN results), component items: every hostile input to the
finite / pc / nfd / params / dmft public API and component CLIs gives a finite, correctly shaped
result or a ValueError naming the argument."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import sympy as sp

from limits.params import classify, named
from limits.params.tables import make_column_table


# ----------------------------------------------------------------------------- params: γ̄_L symbols
SYMS = [sp.Symbol("g"), sp.Symbol("g", real=True), sp.Symbol("gamma_bar_L"), sp.Symbol("eta", real=True)]


@pytest.mark.parametrize("g", SYMS, ids=["plain", "real", "gamma_bar_L", "eta"])
def test_pc_mup_any_symbol_matches_reference_symbol(g):
    ref = named("muP", convention="std", algorithm="pc", gamma_bar_L=sp.Symbol("gamma_bar_L", real=True))
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=g)
    G = sp.Symbol("gamma_bar_L", real=True)
    (s,) = p.free_symbols
    assert s.name == g.name
    for x, y in zip(p.a + p.b + p.c, ref.a + ref.b + ref.c):
        assert sp.expand(x - y.subs(G, s)) == 0
    assert p.notes == (f"valid for -1 <= {g.name} and {g.name} <= 0",)
    # specialises to SGD μP at 0 and GNT μP at −1 (gauge a_l = 0), by name and by symbol
    sgd = named("muP", convention="std", algorithm="bp", gauge="a0")
    gnt = named("muP", convention="std", algorithm="gnt", gauge="a0")
    pa = p.gauge("a0")
    assert (pa.subs({g.name: 0}).b, pa.subs({g.name: 0}).c) == (sgd.b, sgd.c)
    assert (pa.subs({s: -1}).b, pa.subs({s: -1}).c) == (gnt.b, gnt.c)
    assert classify(p.subs({s: -sp.Rational(1, 2)})).regime == "feature-learning"


def test_pc_mup_symbol_with_sign_assumptions():
    gn = sp.Symbol("g", negative=True)
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=gn)
    assert p.notes == ("valid for -1 <= g",)                      # g ≤ 0 is implied by the assumption
    with pytest.raises(ValueError, match="no solution piece"):     # γ̄_L > 0: no μP exists (as for γ̄_L = 1)
        named("muP", convention="std", algorithm="pc", gamma_bar_L=sp.Symbol("g", positive=True))
    with pytest.raises(ValueError, match="no solution|no solution piece"):
        named("muP", convention="std", algorithm="pc", gamma_bar_L=1)
    for nm in ("NTK", "MF", "SP"):
        q = named(nm, convention="std", algorithm="pc", gamma_bar_L=gn)
        assert q.free_symbols <= {gn}


def test_pc_rational_and_linear_expression():
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=sp.Rational(-1, 2))
    assert p.a == (-sp.Rational(1, 4), sp.Rational(1, 4), sp.Rational(1, 2)) and p.notes == ()
    h = sp.Symbol("h", real=True)
    q = named("muP", convention="std", algorithm="pc", gamma_bar_L=2 * h - 1)
    assert q.subs({h: sp.Rational(1, 4)}).a == p.a
    assert "2*h - 1 <= 0" in q.notes[0]
    # the NTK-type derivation decides its kernel-regime check at γ̄_L = 0 for any symbol
    n = named("NTK", convention="std", algorithm="pc", gamma_bar_L=sp.Symbol("g"))
    assert n.notes == ("valid for g <= 0",)
    e = sp.Symbol("e")
    gm = named("MF", convention="std", algorithm="gnt", e_B=e)
    assert gm.subs({"e": 1}).c == named("MF", convention="std", algorithm="gnt", e_B=1).c


@pytest.mark.parametrize("g", [sp.Symbol("g"), sp.Symbol("g", negative=True), 2 * sp.Symbol("h") - 1])
def test_table_with_symbolic_gamma_specialises(g):
    t = make_column_table([("SGD muP", "muP", "bp", {}), ("GNT muP", "muP", "gnt", {}),
                           ("PC muP", "muP", "pc", {"gamma_bar_L": g})], convention="std", gauge="a0")
    md = t.to_markdown()
    assert "feature-learning (−1 ≤ γ̄_L ≤ 0)" in md


# ----------------------------------------------------------------------------- pc
import limits.pc as pc  # noqa: E402

W2 = [np.full((3, 2), 0.5), np.full((1, 3), 0.3)]


def _pcW(seed=0):
    return pc.init_weights(8, 3, "sp", rng=np.random.default_rng(seed))


@pytest.mark.parametrize("call, match", [
    (lambda: pc.equilibrium(W2, np.zeros((0, 2)), np.zeros((0, 1))), "X has no samples"),
    (lambda: pc.equilibrium(W2, np.zeros((0, 2)), np.zeros((0, 1)), method="block"), "X has no samples"),
    (lambda: pc.equilibrium(W2, None, np.zeros((0, 1))), "Y has no samples"),
    (lambda: pc.infer(W2, np.zeros((0, 2)), np.zeros((0, 1))), "X has no samples"),
    (lambda: pc.equilibrium([np.ones((0, 2)), np.ones((1, 0))], np.ones((4, 2)), np.ones((4, 1))), r"weights\[0\]"),
    (lambda: pc.equilibrium([np.ones((3, 2)), np.ones((0, 3))], np.ones((4, 2)), np.zeros((4, 0))), r"weights\[1\]"),
    (lambda: pc.activity_hessian([np.ones((0, 2)), np.ones((1, 0))], dense=True), r"weights\[0\]"),
    (lambda: pc.equilibrium([np.full((3, 2), 1e200), np.full((1, 3), 1e200)], np.ones((4, 2)), np.ones((4, 1))),
     "overflowed"),
    (lambda: pc.equilibrium([np.full((3, 2), 1e200), np.full((1, 3), 1e200)], np.ones((4, 2)), np.ones((4, 1)),
                            method="block"), "overflowed"),
    (lambda: pc.energy(W2, np.ones((4, 2)), np.ones((4, 1)), [np.full((4, 3), np.nan)]), r"z\[0\]"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), tol=np.nan), "tol"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), tol=-1), "tol"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), record_every=0), "record_every"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), beta="x"), "beta"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), beta=-0.1), "beta"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), init=[np.ones((2, 2))]), r"init\[0\]"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), init=[np.full((4, 3), np.nan)]), r"init\[0\]"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), reference=[np.ones((2, 2))]), "reference"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), steps="auto", tol=0), "tol > 0"),
    (lambda: pc.infer(W2, np.ones((4, 2)), np.ones((4, 1)), beta="auto", activation="tanh"), "auto"),
])
def test_pc_hostile_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_pc_train_overflow_reports_divergence():
    rng = np.random.default_rng(5)
    W = [rng.standard_normal((8, 4)), rng.standard_normal((8, 8)), rng.standard_normal((1, 8))]
    X, Y = rng.standard_normal((10, 4)), np.sign(rng.standard_normal((10, 1)))
    with pytest.raises(ValueError, match="diverged"):
        pc.train(W, X, Y, lr=1e3, steps=50)


def test_pc_infer_auto_step_converges_and_matches_closed_form():
    rng = np.random.default_rng(0)
    W, a = _pcW()
    X, Y = rng.standard_normal((5, 8)), rng.standard_normal((5, 1))
    sp_ = pc.extreme_eigenvalues(W, a)
    r = pc.infer(W, X, Y, multipliers=a, beta="auto", steps="auto", tol=1e-10)
    assert r.converged and not r.diverged
    assert abs(r.beta - 2.0 / (sp_.lambda_min + sp_.lambda_max)) < 1e-12
    assert r.beta < r.beta_bound
    e = pc.equilibrium(W, X, Y, multipliers=a)
    for z, zs in zip(r.z, e.z):
        assert np.max(np.abs(z - zs)) <= 1e-8 * max(1.0, np.max(np.abs(zs)))
    # the step estimate is an upper bound from the slowest mode
    rho = pc.inference.gd_rate(r.beta, sp_.lambda_min, sp_.lambda_max)
    assert abs(rho - (sp_.kappa - 1) / (sp_.kappa + 1)) < 1e-12
    assert r.steps <= pc.inference.gd_steps_needed(rho, 1e-10, r.distance[0])


def test_pc_infer_nonconvergence_message_says_what_to_change():
    rng = np.random.default_rng(0)
    W, a = _pcW()
    X, Y = rng.standard_normal((5, 8)), rng.standard_normal((5, 1))
    with pytest.warns(RuntimeWarning, match="raise steps"):
        r = pc.infer(W, X, Y, multipliers=a, beta=0.01, steps=10)
    assert not r.converged and "more steps are needed" in r.message and "beta='auto'" in r.message


def test_pc_cli_infer_defaults_converge(capsys):
    from limits.cli import main

    assert main(["pc", "infer"]) == 0
    assert "converged in" in capsys.readouterr().out
    assert main(["pc", "equilibrium", "--batch", "0"]) == 2
    assert "--batch" in capsys.readouterr().err


# ----------------------------------------------------------------------------- finite
import limits.finite as F  # noqa: E402
from limits.checks import sample_count  # noqa: E402
from limits.finite import gia  # noqa: E402
from limits.stats import mean_se, mean_se_or_none, se_text  # noqa: E402


def test_empirical_kernels_one_init_reports_se_unavailable(tmp_path):
    net = F.mlp(4, 16, 2)
    X = np.random.default_rng(0).standard_normal((3, 4))
    ek = F.empirical_kernels(net, X, 1, seed=0)
    assert ek.se is None and ek.out_se is None
    assert np.all(np.isfinite(ek.mean)) and np.all(np.isfinite(ek.out_mean))
    assert np.array_equal(ek.mean, ek.K[0])                  # the mean of one init is that init's Gram
    ek.save(tmp_path / "ek")
    from limits.results import load_result, results_equal

    assert results_equal(load_result(tmp_path / "ek"), ek)
    two = F.empirical_kernels(net, X, 2, seed=0)
    assert two.se.shape == two.mean.shape and np.all(np.isfinite(two.se))


def test_stats_helpers_never_return_nan_se():
    m, se = mean_se_or_none(np.array([[1.0, 2.0]]))
    assert se is None and np.array_equal(m, [1.0, 2.0])
    m, se = mean_se_or_none(np.array([1.0, 3.0]))
    assert m == 2.0 and abs(se - 1.0) < 1e-15
    with pytest.raises(ValueError, match="inits"):
        mean_se_or_none(np.zeros((0, 3)), name="inits")
    with pytest.raises(ValueError, match="n_inits: got 1"):
        mean_se(np.ones((1, 3)), name="n_inits")
    assert se_text(None, 1) == "n/a (1 init)" and se_text(0.5, 4) == "0.5"
    with pytest.raises(ValueError, match="seeds must be >= 2 for a standard error"):
        sample_count(1, "seeds")


@pytest.mark.parametrize("argv", [["finite", "kernels", "--inits", "1", "--width", "32", "--depth", "2"],
                                  ["finite", "ntk", "--inits", "1", "--width", "32"],
                                  ["finite", "train", "--inits", "1", "--steps", "4", "--width", "16"]])
def test_finite_cli_one_init_prints_na_not_nan(argv, capsys):
    from limits.cli import main

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "n/a (1 init)" in out and "nan" not in out.lower()


@pytest.mark.parametrize("argv, match", [
    (["finite", "ntk", "--chunk", "0"], "chunk"),
    (["finite", "kernels", "--d-in", "0"], "d_in"),
    (["finite", "kernels", "--P", "0"], "P"),
])
def test_finite_cli_bad_sizes(argv, match, capsys):
    from limits.cli import main

    assert main(argv) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("call, match", [
    (lambda: F.empirical_kernels(F.mlp(4, 8, 1), np.ones((2, 4)), 3, seed=0, memory_mb=float("nan")), "memory_mb"),
    (lambda: gia.collapse_study([2], n=0, n_seeds=2), "n must"),
    (lambda: gia.collapse_study([2], n=8, n_seeds=2, T=0), "T must"),
    (lambda: gia.collapse_study([], n=8, n_seeds=2), "Ls must list"),
    (lambda: gia.transfer_study([2], [], n=8, steps=1, n_seeds=2), "etas"),
    (lambda: gia.transfer_study([2], [np.nan], n=8, steps=1, n_seeds=2), "etas"),
    (lambda: gia.transfer_study([2], [0.1], n=8, steps=-1, n_seeds=2), "steps"),
    (lambda: gia.gia_sweep([], [2], n_seeds=2, progress_bar=False), "ns must list"),
    (lambda: gia.online_sgd(np.zeros((0, 2)), np.zeros(0), np.ones((1, 2)), 4, 2), "X_train"),
    (lambda: gia.online_sgd(np.ones((3, 2)), np.ones(3), np.ones((2, 5)), 4, 2), "X_test"),
    (lambda: gia.extrapolate_inverse([1, 2], [1, np.nan], [0.1, 0.1]), "y contains"),
    (lambda: gia.extrapolate_inverse([0, 2], [1, 1], [0.1, 0.1]), "x "),
    (lambda: gia.extrapolate_inverse([1, 2, 3], [1, 1], [0.1, 0.1]), "equal lengths"),
])
def test_finite_hostile_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_transfer_study_one_seed_has_no_se_and_fd_response_refuses_se():
    t = gia.transfer_study([2], [0.1], n=8, steps=1, n_seeds=1)
    assert t.loss_se is None and np.all(np.isfinite(t.loss))
    t2 = gia.transfer_study([2], [0.1], n=8, steps=1, n_seeds=2)
    assert t2.loss_se.shape == t2.loss.shape and np.all(np.isfinite(t2.loss_se))
    from limits.finite.residual_response import fd_response

    X = np.random.default_rng(0).standard_normal((3, 4))
    r = fd_response(X, 2, 8, 1, seed=0)
    with pytest.raises(ValueError, match="n_inits"):
        r.mean_se("chi_out")


def test_pc_width_check_refuses_symbolic_gamma():
    from limits.finite.coordcheck import pc_width_check

    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=sp.Symbol("g"))
    with pytest.raises(ValueError, match="symbolic"):
        pc_width_check(p, widths=(8, 16, 32), seeds=2)


# ----------------------------------------------------------------------------- nfd / dmft
import limits.dmft as dmft  # noqa: E402
import limits.nfd as nfd  # noqa: E402


@pytest.mark.parametrize("argv", [["nfd", "gia-limit", "--Ls", "4", "--M", "2", "--seeds", "1"],
                                  ["nfd", "two-layer", "--Ls", "4", "--seeds", "1", "--n", "1"],
                                  ["nfd", "gia", "--seeds", "1"],
                                  ["nfd", "gia", "--seeds", "2", "--particle-seeds", "1"]])
def test_nfd_cli_one_seed_refused(argv, capsys):
    from limits.cli import main

    assert main(argv) == 2
    assert "must be >= 2 for a standard error" in capsys.readouterr().err


def test_nfd_studies_refuse_one_seed():
    from limits.gallery.nfd import gia_limit_study, gia_study, training_study, two_layer_study

    for call in (lambda: gia_limit_study(Ls=(4,), M=2, n_seeds=1), lambda: two_layer_study(Ls=(4,), n_seeds=1),
                 lambda: gia_study(ns=(4,), Ls=(2,), n_seeds=1), lambda: training_study(n_seeds=1)):
        with pytest.raises(ValueError, match="n_seeds must be >= 2"):
            call()


def test_nfd_hostile_inputs():
    X = np.random.default_rng(0).standard_normal((3, 2))
    with pytest.raises(ValueError, match="X: the input Gram .* overflows float64"):
        nfd.kernel_ode(X * 1e200, T=100.0, activation="relu")     # Σ_0 = X Xᵀ/d overflows float64
    with pytest.raises(ValueError, match=r"exceeds 1e\+100"):    # Σ_0 ~ 1e298 (grows like e^{t/2}): beyond the
        nfd.kernel_ode(X * 1e149, T=100.0, activation="relu")     # kernels' explosion bound, stopped at once
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="target_se"):
            nfd.train_particles(X, np.ones(3), X, M=8, L=2, seed=0, target_se=bad)


def test_dmft_hostile_inputs():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((3, 4)), rng.standard_normal(3)
    with pytest.raises(ValueError, match="overflows"):
        dmft.solve(X * 1e160, y, 2, T=0.2, dt=0.1)
    with pytest.raises(ValueError, match="P, D >= 1"):
        dmft.lazy_ntk(np.zeros((0, 4)), 2)
    K = dmft.lazy_ntk(X, 2)
    assert K.shape == (3, 3) and np.all(np.isfinite(K))


@pytest.mark.parametrize("call, match", [
    (lambda: pc.seed003_fixed_point(W2, [1, 1], [1], [0, 1]), "gammas"),
    (lambda: pc.seed003_fixed_point(W2, [1, 1], [1], [1]), "gammas"),
    (lambda: pc.seed003_fixed_point(W2, [1, 1], [1], [1, 1], beta=0), "beta"),
    (lambda: pc.seed003_fixed_point(W2, [np.nan, 1], [1], [1, 1]), "x contains"),
    (lambda: pc.seed003_fixed_point(W2, [1, 1, 1], [1], [1, 1]), "B columns"),
    (lambda: pc.s_seed000_eq25(W2, [0.5, 0.5], 0, 1.0), "N must"),
    (lambda: pc.s_seed000_eq25(W2, [0.5, 0.5], 4, 0.0), "gamma must"),
    (lambda: pc.s_seed000_eq104(W2, 0), "N must"),
    (lambda: pc.s_seed000_eq6([np.full((3, 2), np.nan), np.ones((1, 3))]), r"weights\[0\]"),
    (lambda: pc.S_seed001_eq32(W2, [1]), "multipliers"),
    (lambda: pc.mp_edges(-1), "ratio"),
    (lambda: pc.activity_hessian(W2, nudge=-1), "nudge"),
    (lambda: pc.nonlinear_activity_hessian(W2, [1, 1], [1], "tanh", z=[np.ones(5)]), r"z\[0\]"),
    (lambda: pc.nonlinear_activity_hessian(W2, [1, 1], [1], "tanh", z=[np.full(3, np.nan)]), r"z\[0\]"),
    (lambda: pc.pc_gradients_at(W2, np.ones((4, 2)), np.ones((4, 1)), [np.full((4, 3), np.nan)]), r"z\[0\]"),
    (lambda: pc.pc_gradients_at(W2, np.ones((4, 2)), np.ones((4, 1)), [np.ones((2, 2))]), r"z\[0\]"),
    (lambda: pc.train(W2, np.ones((4, 2)), np.ones((4, 1)), steps=-1), "steps"),
    (lambda: pc.train(W2, np.ones((4, 2)), np.ones((4, 1)), steps=3, record_every=0), "record_every"),
])
def test_pc_seed_forms_and_training_hostile_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_pc_gradient_flow_to_absurd_time_is_refused(monkeypatch):
    import limits.pc.gradients as G

    monkeypatch.setattr(G, "FLOW_MAX_NFEV", 300)          # the bound, not its default size, is under test
    with pytest.raises(ValueError, match="gradient evaluations"):
        pc.train(W2, np.ones((4, 2)), np.ones((4, 1)), optimizer="flow", lr=1e300, steps=3)
    ok = pc.train(W2, np.ones((4, 2)), np.ones((4, 1)), optimizer="flow", lr=0.1, steps=3)
    assert np.all(np.isfinite(ok.mse))


@pytest.mark.parametrize("argv, match", [
    (["pc", "equilibrium", "--weights", "/nonexistent/W.npz"], "--weights"),
    (["pc", "equilibrium", "--layer-weights", "a,b"], "--layer-weights"),
    (["pc", "spectrum", "--width", "4", "--hidden", "2", "--multipliers", "1,2,3"], "--multipliers"),
])
def test_pc_cli_bad_options(argv, match, capsys):
    from limits.cli import main

    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_params_complex_exponent_and_subs_typo_refused():
    with pytest.raises(ValueError, match="gamma_bar_L must be real"):
        named("muP", convention="std", algorithm="pc", gamma_bar_L=1 + 2 * sp.I)
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=sp.Symbol("g"))
    with pytest.raises(ValueError, match="no symbol named 'zz'.*its symbols: g"):
        p.subs({"zz": 1})
    q = named("muP", convention="std", algorithm="bp")
    assert q.subs({}).a == q.a


def test_coordcheck_unavailable_quantities_are_value_errors():
    from limits.finite.coordcheck import pc_width_check, width_check

    with pytest.raises(ValueError, match="L .*>= 3"):
        pc_width_check(named("muP", convention="std", algorithm="pc", gamma_bar_L=-0.5), widths=(8, 16, 32),
                       L=2, seeds=2)
    with pytest.raises(ValueError, match="not measured"):
        width_check(named("muP"), widths=(8, 16, 32), seeds=2, quantities=("nonsense",))


def test_finite_cli_train_divergence_prints_diverged_not_nan(capsys):
    from limits.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # divergence is reported, not warned about
        assert main(["finite", "train", "--eta0", "100", "--steps", "6", "--width", "32"]) == 1
    out = capsys.readouterr().out
    assert "DIVERGED" in out and "diverged" in out and "nan" not in out.lower()


def test_finite_cli_kernels_overflow_is_reported(capsys):
    from limits.cli import main

    with pytest.warns(RuntimeWarning, match="overflowed"):
        rc = main(["finite", "kernels", "--mlp", "--activation", "relu", "--sigma-w2", "1e4", "--depth", "100",
                   "--inits", "4", "--width", "16"])
    assert rc == 2                      # a clear error naming the options (was: exit 1 after a partial table)
    err = capsys.readouterr().err
    assert err.startswith("limits: error: the activations or kernels overflowed float64 from layer")
    assert "--sigma-w2 10000" in err and "--depth 100" in err and "nan" not in err.lower()
    assert se_text(float("inf"), 3) == "overflow"
