"""Signal propagation: critical line references, fixed points, depth scales; optimal ρ*."""
import numpy as np
import pytest

import limits
from limits.kernels import critical_line, fixed_point, response
from limits.kernels.optimal import chi_out_entries, optimal_rho, rho_star_estimate


def test_critical_line_references():
    c = critical_line("tanh", 0.05)
    assert abs(c.sigma_w2 - 1.760955) < 5e-7
    assert abs(c.qstar - 0.570048) < 5e-7
    assert c.converged and c.residual < 1e-12
    e = critical_line("erf", 0.0)
    assert abs(e.sigma_w2 - np.pi / 4) < 1e-12 and e.qstar == 0.0
    r = critical_line("relu", 0.0)
    assert abs(r.sigma_w2 - 2.0) < 1e-12 and "every q" in r.note
    with pytest.raises(ValueError, match="sigma_b2"):
        critical_line("relu", 0.1)
    with pytest.raises(ValueError, match="sigma_b2"):
        critical_line("tanh", -0.1)
    with pytest.raises(ValueError, match="activation"):
        critical_line("nope", 0.1)


@pytest.mark.parametrize("act,sb2", [("tanh", 0.05), ("tanh", 0.3), ("erf", 0.1), ("erf", 1e-6)])
def test_critical_point_is_a_fixed_point_with_unit_chi1(act, sb2):
    c = critical_line(act, sb2)
    fp = fixed_point(act, c.sigma_w2, sb2)
    assert abs(fp.qstar - c.qstar) <= 1e-9 * max(1.0, c.qstar)
    assert abs(fp.chi1 - 1.0) < 1e-9
    assert fp.phase == "critical" and fp.xi_c == np.inf


def test_fixed_point_phases_and_depth_scales():
    o = fixed_point("tanh", 1.5, 0.05)
    assert o.phase == "ordered" and o.cstar == 1.0 and o.chi1 < 1
    assert abs(o.xi_c + 1 / np.log(o.chi1)) < 1e-12
    ch = fixed_point("tanh", 3.0, 0.05)
    assert ch.phase == "chaotic" and 0 < ch.cstar < 1
    # c* is a fixed point of the correlation map
    from limits.kernels.signal import cmap, qmap
    assert abs(float(cmap("tanh", ch.cstar, ch.qstar, 3.0, 0.05)) - ch.cstar) < 1e-12
    assert abs(float(qmap("tanh", ch.qstar, 3.0, 0.05)) - ch.qstar) < 1e-12
    # erf without bias in the chaotic phase: c* = 0 exactly (odd φ)
    assert fixed_point("erf", 2.0, 0.0).cstar == 0.0
    # relu above σ_w² = 2 has no finite q*
    u = fixed_point("relu", 2.5, 0.1)
    assert not u.converged and u.qstar == np.inf


def test_optimal_rho_matches_response_and_scales_like_inverse_sqrt_depth():
    K0 = np.array([[0.05, 0.03], [0.03, 0.05]])
    kw = dict(K0=K0, sigma_w2=1.25, sigma_b2=0.05, d_in=100)
    out = {}
    for L in (10, 40, 160):
        o = optimal_rho(depth=L, n_grid=25, **kw)
        assert o.converged.all()
        out[L] = o.rho_star
    # the maximiser is a maximum of the full response() P×P recursion too
    L = 10
    o = optimal_rho(depth=L, width=500, **kw)
    best = response(K0=K0, depth=L, width=500, residual=True, rho=o.rho_star[0, 0], sigma_w2=1.25,
                    sigma_b2=0.05, d_in=100).chi_out[0, 0]
    assert abs(best - o.chi_out_max[0, 0]) < 1e-10 * best
    for f in (0.97, 1.03):
        other = response(K0=K0, depth=L, width=500, residual=True, rho=f * o.rho_star[0, 0], sigma_w2=1.25,
                         sigma_b2=0.05, d_in=100).chi_out[0, 0]
        assert other < best
    # off-diagonal optimum is larger (seed 004 §III C); ρ*√L approaches a constant
    assert np.all(out[10][0, 1] > out[10][0, 0])
    s = [out[L][0, 0] * np.sqrt(L) for L in (10, 40, 160)]     # 1.03, 0.977, 0.970
    assert abs(s[2] - s[1]) < abs(s[1] - s[0]) and abs(s[2] / s[1] - 1) < 0.02


def test_rho_star_closed_form_estimates():
    act = limits.activation("erf")
    d0 = 2 / np.sqrt(np.pi)
    a = 1.25 * d0 ** 2
    L = 50
    est = rho_star_estimate(0.05, L, "erf", 1.25, 0.05)
    ratio = (a * 0.25 + 0.05) / (a * 0.05 + 0.05)
    assert abs(est - np.sqrt(ratio ** (1 / L) - 1) / np.sqrt(a)) < 1e-14
    big = rho_star_estimate(0.05, 10**6, "erf", 1.25, 0.05)
    big62 = rho_star_estimate(0.05, 10**6, "erf", 1.25, 0.05, large_L=True)
    assert abs(big / big62 - 1) < 1e-5
    # Eq. 61 is exact for the linearised kernel growth: K^L = V²/4 at ρ = ρ* (Eq. 60)
    g = 1 + est ** 2 * a
    KL = g ** L * 0.05 + 0.05 / a * (g ** L - 1)
    assert abs(KL - 0.25) < 1e-12
    with pytest.raises(ValueError, match="K0"):
        rho_star_estimate(0.5, 10)
    assert act is not None


def test_chi_out_entries_consistent_with_response():
    act = limits.activation("erf")
    K0 = np.array([[0.05, 0.03], [0.03, 0.07]])
    s = response(K0=K0, depth=12, width=100, d_in=100, residual=True, rho=0.3, sigma_w2=1.25, sigma_b2=0.05)
    cd, co = chi_out_entries(act, 0.05, 0.03, 0.07, 0.3, 12, 1.25, 0.05, 1.25)
    assert abs(cd - s.chi_out[0, 0]) < 1e-12 and abs(co - s.chi_out[0, 1]) < 1e-12


def test_vectorised_phase_diagram_matches_fixed_point():
    from limits.kernels import phase_diagram

    sw = np.array([0.8, 2.5, 4.0])
    sb = np.array([0.0, 0.05])
    pd = phase_diagram("tanh", sw, sb)
    for i, b in enumerate(sb):
        for j, w in enumerate(sw):
            fp = fixed_point("tanh", w, b)
            assert abs(pd.qstar[i, j] - fp.qstar) <= 1e-9 * max(1.0, fp.qstar)
            assert abs(pd.chi1[i, j] - fp.chi1) <= 1e-9
            assert abs(pd.cstar[i, j] - fp.cstar) <= 1e-7
    assert abs(pd.critical_sigma_w2[1] - 1.760955) < 5e-7
