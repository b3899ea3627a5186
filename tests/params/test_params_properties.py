"""Hypothesis property tests: θ-shift invariance, conversion round trips, parser robustness."""
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limits.params import Parameterisation, classify, named, parse, table

R = sp.Rational
halves = st.integers(-4, 4).map(lambda k: R(k, 2))
quarters = st.integers(-8, 8).map(lambda k: R(k, 4))
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _std_params(draw_a, draw_b_out, draw_c, alg="bp"):
    # init-stable by construction (a_1 + b_1 = 0, a_l + b_l = 1/2), read-out free
    a = draw_a
    b = [-a[0], R(1, 2) - a[1], draw_b_out]
    return Parameterisation.make(a=a, b=b, c=draw_c, algorithm=alg)


@SETTINGS
@given(st.lists(quarters, min_size=3, max_size=3), quarters, st.lists(quarters, min_size=3, max_size=3),
       st.lists(quarters, min_size=3, max_size=3), st.sampled_from(["bp", "gnt", "tp", "dtp"]))
def test_theta_shift_invariance_of_classification(a, b_out, c, thetas, alg):
    p = _std_params(a, b_out, c, alg)
    q = p
    for th, lay in zip(thetas, ("input", "hidden", "output")):
        q = q.shift(th, lay)
    cp, cq = classify(p), classify(q)
    assert cp.regime == cq.regime and cp.r == cq.r and cp.r_layers == cq.r_layers
    assert [v.exponent for v in cp.stability] == [v.exponent for v in cq.stability]
    assert p.equivalent(q) and p.gauge("a0") == q.gauge("a0")


@SETTINGS
@given(st.lists(quarters, min_size=3, max_size=3), quarters, st.lists(quarters, min_size=3, max_size=3), quarters)
def test_theta_shift_invariance_variance_convention_and_adam(a, b_out, c, th):
    p = _std_params(a, b_out, c).to_variance()
    q = p.shift(th)
    cp, cq = classify(p), classify(q)
    assert cp.regime == cq.regime
    for k in ("D1", "D2", "D3"):   # seed 000 desiderata are shift invariant too
        assert [v.exponent for v in cp.desiderata[k]] == [v.exponent for v in cq.desiderata[k]]
    pa = Parameterisation.make(a=a, b=[-a[0], R(1, 2) - a[1], b_out], c=c, optimizer="adam")
    assert classify(pa).regime == classify(pa.shift(th, "hidden")).regime


@SETTINGS
@given(st.lists(quarters, min_size=3, max_size=3), st.lists(quarters, min_size=3, max_size=3),
       st.lists(quarters, min_size=3, max_size=3), quarters, st.sampled_from(["sgd", "adam"]))
def test_conversion_round_trips(a, b, c, d, opt):
    s = Parameterisation.make(a=a, b=b, c=c, optimizer=opt)
    assert s.to_variance().to_std() == s
    assert s.to_variance(d=d).to_std() == s                 # any d is an exact inverse
    v = s.to_variance(d=d)
    assert v.to_std().to_variance(d=d) == v
    # canonical d makes the pre-output Θ(1): 2 a_L + b_L = 1 in the variance convention
    vc = s.to_variance()
    assert 2 * vc.a[2] + vc.b[2] == 1
    assert classify(s).regime == classify(vc).regime


@pytest.mark.parametrize("alg", ["bp", "pc"])
def test_tables_shift_invariant(alg):
    t1 = table(["SP", "NTK", "MF", "muP"], algorithm=alg, convention="std", gauge="a0")
    ps = [named(n, convention="std", algorithm=alg).shift(R(1, 3), "hidden").shift(R(-2, 5), "input").gauge("a0")
          for n in ("SP", "NTK", "MF", "muP")]
    assert tuple(ps) == tuple(p for p in t1.parameterisations)


@settings(max_examples=200, deadline=None)
@given(st.fractions(min_value=-100, max_value=100, max_denominator=50))
def test_parser_numbers(f):
    assert parse(str(f)) == R(f.numerator, f.denominator)
    assert parse(f"-({f})") == -R(f.numerator, f.denominator)
    assert parse(f"( {f} ) * 2 - 1/2") == 2 * R(f.numerator, f.denominator) - R(1, 2)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789+-*/() .abcxyz_=[]{}'\"!@#$%^&", max_size=25))
def test_parser_never_crashes_otherwise(text):
    try:
        v = parse(text)
    except ValueError:
        return
    assert isinstance(v, sp.Expr)


@pytest.mark.parametrize("bad", ["__import__('os')", "eval(1)", "1;2", "2**2", "x", "1/0", "", "()",
                                 "gamma_bar_L*gamma_bar_L", "1/gamma_bar_L", "lambda: 1", "1e5", "a_1"])
def test_parser_rejects(bad):
    with pytest.raises(ValueError):
        parse(bad)


def test_parser_symbols_and_decimals():
    G = sp.Symbol("gamma_bar_L", real=True)
    assert parse("-gamma_bar_L - 1") == -G - 1
    assert parse("0.25") == R(1, 4)
    assert parse("1/2 + 1/3") == R(5, 6)
    assert Fraction(1, 3) == Fraction(str(parse("2/6")))


@SETTINGS
@given(quarters, st.sampled_from(["bp", "pc"]))
def test_every_member_of_the_seed000_family_is_feature_learning(cval, alg):
    """The one-dimensional solution family of Desiderata 1–3 (free symbol = one exponent) classifies as
    feature-learning at every point, and satisfies D1–D3 — both frameworks agree."""
    from limits.params import solve

    piece = solve(alg, ["D1", "D2", "D3"], convention="variance").unique()
    (free,) = piece.free
    vals = {k.name: v.subs(free, cval) for k, v in piece.values.items()}
    p = Parameterisation.make(a=[vals["a_input"], vals["a_hidden"], vals["a_output"]],
                              b=[vals["b_input"], vals["b_hidden"], vals["b_output"]],
                              c=[vals["c_input"], vals["c_hidden"], vals["c_output"]], d=vals["d"],
                              convention="variance", algorithm=alg)
    c = classify(p)
    assert c.regime == "feature-learning" and all(c.desideratum(k) for k in ("D1", "D2", "D3"))
    assert p.equivalent(named("muP", algorithm=alg))        # all members are one θ-orbit


def test_solve_with_expression_fixed():
    from limits.params import solve

    piece = solve("bp", ["D1", "D2", "D3"], convention="variance", fixed={"c_input - 2*d": 0}).unique()
    assert piece.value("c_input") == 1 and piece.value("a_input") == R(-1, 2)     # μP: η = Θ(1)
    with pytest.raises(ValueError):
        solve("bp", ["D1"], convention="variance", fixed={"c_input + __x": 0})
