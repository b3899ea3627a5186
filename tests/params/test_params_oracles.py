"""The oracle tables of docs/theory/params.rst must come out of the solver. Oracle values are typed here
(from the seeds); the package stores no tables."""
import pytest
import sympy as sp

from limits.params import classify, named, solve, table
from limits.params.parameterisation import Parameterisation

R = sp.Rational
h = R(1, 2)
G = sp.Symbol("gamma_bar_L", real=True)
EB = sp.Symbol("e_B", real=True)

# seed 000 Table 2 (variance convention): a_1, b_1, a_l, b_l, c, d
TABLE2 = {
    "SP": (0, 0, 0, 1, 0, 0),
    "NTK": (0, 0, h, 0, 0, 0),
    "MF": (0, 0, h, 0, 0, h),
    "muP": (-h, 1, 0, 1, 1, h),
}


@pytest.mark.parametrize("algorithm", ["bp", "pc"])
def test_seed000_table2_from_solver(algorithm):
    t = table(["SP", "NTK", "MF", "muP"], algorithm=algorithm, convention="variance")
    for name, (a1, b1, al, bl, c, d) in TABLE2.items():
        p = named(name, convention="variance", algorithm=algorithm)
        assert p.a == (a1, al, al) and p.b == (b1, bl, bl) and p.c == (c, c, c) and p.d == d, name
        assert t.cell("a_input", name) == a1 and t.cell("b_hidden", name) == bl
        assert t.cell("c", name) == c and t.cell("d", name) == d
    md = t.to_markdown()
    assert "| a_1 | 0 | 0 | 0 | -1/2 |" in md and "| d | 0 | 0 | 1/2 | 1/2 |" in md


@pytest.mark.parametrize("algorithm", ["bp", "pc"])
def test_seed000_expected_classification(algorithm):
    sp_ = classify(named("SP", algorithm=algorithm))
    assert not sp_.desideratum("D2")
    out = {v.key: v for v in sp_.desiderata["D2"]}
    assert out["D2.output"].exponent == 1 and out["D2.output"].status.startswith("blows up")  # output explodes
    ntk = classify(named("NTK", algorithm=algorithm))
    assert ntk.desideratum("D1") and ntk.desideratum("D2") and not ntk.desideratum("D3")
    assert {v.key: v.exponent for v in ntk.desiderata["D3"]}["D3.hidden"] == -h        # lazy: N^{-1/2}
    for name in ("MF", "muP"):
        c = classify(named(name, algorithm=algorithm))
        assert all(c.desideratum(k) for k in ("D1", "D2", "D3")) and c.regime == "feature-learning"
        if algorithm == "pc":   # with d = 1/2 the PC-only terms vanish as N^{-1/2}
            ex = {v.key: v.exponent for v in (*c.desiderata["D2"], *c.desiderata["D3"])}
            assert ex["D2.pc_r.hidden"] == -h and ex["D2.pc_r.output"] == -h and ex["D3.pc_D.hidden"] == -h


def test_seed000_solution_set_is_one_dimensional():
    for alg in ("bp", "pc"):
        sol = solve(alg, ["D1", "D2", "D3"], convention="variance")
        piece = sol.unique()
        assert len(piece.free) == 1
        # fixing a_l gives a unique rest (seed 000 §2.3)
        sol2 = solve(alg, ["D1", "D2", "D3"], convention="variance", fixed={"a_hidden": h})
        assert not sol2.unique().free
        assert sol2.unique().value("d") == h and sol2.unique().value("c_input") == 0


# TP4 Table 1 (std convention): a, b, c, r, regime
def test_tp4_table1():
    spn = named("SP-stable", convention="std")                 # SP with lr η/N, derived (stable + Cond. 3.2)
    assert spn.a == (0, 0, 0) and spn.b == (0, h, h) and spn.c == (1, 1, 1)
    c = classify(spn)
    assert c.r == h and c.regime == "kernel"
    t = table(["SP-stable", "SP", "NTK", "muP"], convention="std")
    assert [t.cell("r", n) for n in ("SP-stable", "SP", "NTK", "muP")] == [h, -1, h, 0]
    assert [t.cell("regime", n) for n in ("SP-stable", "SP", "NTK", "muP")] == [
        "kernel", "unstable", "kernel", "feature-learning"]
    sp1 = named("SP", convention="std")
    assert sp1.a == (0, 0, 0) and sp1.b == (0, h, h) and sp1.c == (0, 0, 0)
    c = classify(sp1)
    assert c.r == -1 and c.regime == "unstable"
    ntp = named("NTK", convention="std")
    assert ntp.a == (0, h, h) and ntp.b == (0, 0, 0) and ntp.c == (0, 0, 0)
    c = classify(ntp)
    assert c.r == h and c.regime == "kernel"
    mup = named("muP", convention="std")
    assert mup.a == (-h, 0, h) and mup.b == (h, h, h) and mup.c == (0, 0, 0)
    c = classify(mup)
    assert c.r == 0 and c.regime == "feature-learning"


# seed 003 Table 1 (a_l = 0 gauge): (b, c) per layer
SEED003 = {
    ("SP", "bp"): [(0, 0), (h, 0), (h, 0)],
    ("muP", "bp"): [(0, -1), (h, 0), (1, 1)],
    ("muP", "gnt"): [(0, 0), (h, 1), (1, 1)],
    ("muP", "pc"): [(0, -G - 1), (h, -G), (1, 1)],
    ("muP", "tp"): [(0, 0), (h, 1), (h, 1)],
}


@pytest.mark.parametrize("key", list(SEED003))
def test_seed003_table1(key):
    name, alg = key
    extra = {"gamma_bar_L": G} if alg == "pc" else {}
    p = named(name, convention="std", algorithm=alg, gauge="a0", **extra)
    got = [(p.b[i], p.c[i]) for i in range(3)]
    want = [(sp.sympify(b), sp.sympify(c)) for b, c in SEED003[key]]
    assert all(sp.simplify(g[0] - w[0]) == 0 and sp.simplify(g[1] - w[1]) == 0 for g, w in zip(got, want)), got
    assert p.a == (0, 0, 0)


def test_seed003_pc_limits_and_validity():
    # γ̄_L = 0 → SGD μP ; γ̄_L = −1 → GNT μP
    sgd = named("muP", convention="std", algorithm="bp", gauge="a0")
    gnt = named("muP", convention="std", algorithm="gnt", gauge="a0")
    for g, ref in ((0, sgd), (-1, gnt)):
        p = named("muP", convention="std", algorithm="pc", gauge="a0", gamma_bar_L=g)
        assert (p.b, p.c) == (ref.b, ref.c)
        assert classify(p).regime == "feature-learning"
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=G)
    assert any("gamma_bar_L <= 0" in n for n in p.notes) and any("-1 <= gamma_bar_L" in n for n in p.notes)
    # the whole family: the solver also reports γ̄_L ≤ 0 for the hidden layer (S.44)
    sol = solve("pc", ["init", "feature-learning"], fixed={"a_input": 0, "a_hidden": 0, "a_output": 0})
    assert all(any("gamma_bar_L" in str(c) for c in piece.conditions) for piece in sol.pieces)


def test_seed003_pc_ntk_type():
    """Spec/seed 003 Eq. S.71–S.74: c_1 = −γ̄_L, c_hidden = 1 − γ̄_L, c_L = 1, b_L = 1/2.

    The solver reproduces c_1, c_hidden and b_L. For the read-out it derives c_L = 1 − γ̄_L from
    the seed's own Eq. S.62 (with a_L + b_L = 1/2 the middle term θ_L + γ̄_L − 1 is the smallest
    when γ̄_L < 0); the seed's S.73 (θ_L = 1) compares only the first and last terms. The two agree
    at γ̄_L = 0; for γ̄_L < 0 the literal c_L = 1 makes the read-out update blow up as N^{−γ̄_L}.
    """
    p = named("NTK", convention="std", algorithm="pc", gamma_bar_L=G, gauge="a0")
    assert sp.simplify(p.c[0] + G) == 0 and sp.simplify(p.c[1] - 1 + G) == 0
    assert sp.simplify(p.c[2] - (1 - G)) == 0
    assert p.b == (0, h, h)
    p0 = named("NTK", convention="std", algorithm="pc", gamma_bar_L=0, gauge="a0")
    assert p0.c == (0, 1, 1)                                   # matches S.71–S.74 at γ̄_L = 0
    literal = Parameterisation.make(a=0, b=[0, h, h], c=[h, 1 + h, 1], algorithm="pc", gamma_bar_L=-h)
    c = classify(literal)
    assert c.regime == "unstable" and c.r_layers["output"] == -h
    assert classify(p0).regime == "kernel" and classify(p0).r == h


def test_gnt_symbolic_eB():
    sol = solve("gnt", ["init", "feature-learning"], e_B=EB, fixed={"a_input": 0, "a_hidden": 0, "a_output": 0})
    piece = sol.piece_for({EB: 0})
    th = [piece.value(f"c_{lay}") for lay in ("input", "hidden", "output")]
    assert sp.simplify(th[0] - (EB - 1)) == 0 and sp.simplify(th[1] - EB) == 0 and th[2] == 1
    assert [piece.value(f"b_{lay}") for lay in ("input", "hidden", "output")] == [0, h, 1]


@pytest.mark.parametrize("alg", ["tp", "dtp"])
def test_tp_has_no_kernel_regime(alg):
    with pytest.raises(ValueError, match="no kernel regime"):
        named("NTK", convention="std", algorithm=alg)
    sol = solve(alg, ["init", "kernel"], fixed={"a_input": 0, "a_hidden": 0, "a_output": 0})
    p = sol.unique()
    # the kernel conditions force r = 0 and b_L = 1/2 (CLT, α = 1/2)
    assert p.value("b_output") == h
    q = Parameterisation.make(a=0, b=[p.value(f"b_{l}") for l in ("input", "hidden", "output")],
                              c=[p.value(f"c_{l}") for l in ("input", "hidden", "output")], algorithm=alg)
    assert classify(q).r == 0 and classify(q).regime == "feature-learning"
    # BP keeps its kernel regime under the same conditions
    assert classify(named("NTK", convention="std", algorithm="bp")).regime == "kernel"


def test_adam_mup_tp4b():
    p = named("muP", convention="std", algorithm="bp", optimizer="adam", gauge="a0")
    assert p.b == (0, h, 1) and p.c == (0, 1, 1)


def test_mupc_multipliers_seed001():
    # seed 001 Table 1: μPC multipliers input N0^{-1/2} (a constant in N), hidden (N L)^{-1/2},
    # output N^{-1}; weights N(0,1). Standard PC: multipliers 1, weight variance 1/N_{l-1}.
    N, L = sp.symbols("N L", positive=True)
    p = named("muPC", convention="std", algorithm="pc")
    mult = [N ** (-p.a[0]), N ** (-p.a[1]) * L ** (-p.depth_alpha), N ** (-p.a[2])]
    assert sp.simplify(mult[0] - 1) == 0
    assert sp.simplify(mult[1] - 1 / sp.sqrt(N * L)) == 0
    assert sp.simplify(mult[2] - 1 / N) == 0
    assert p.b == (0, 0, 0)
    spc = named("SP", convention="std", algorithm="pc")
    assert spc.a == (0, 0, 0)
    assert [sp.simplify(N ** (-2 * b)) for b in spc.b[1:]] == [1 / N, 1 / N]


def test_mupc_multiplier_form():
    N, L, D = sp.symbols("N L D", positive=True)
    m = named("muPC").multipliers()          # algorithm defaults to "pc" for μPC
    assert named("muPC").algorithm == "pc"
    assert sp.simplify(m["input"]["multiplier"] - 1 / sp.sqrt(D)) == 0          # N_0^{-1/2}
    assert sp.simplify(m["hidden"]["multiplier"] - 1 / sp.sqrt(N * L)) == 0     # (N L)^{-1/2}
    assert sp.simplify(m["output"]["multiplier"] - 1 / N) == 0                   # N^{-1} (incl. 1/γ)
    assert all(m[k]["init_variance"] == 1 for k in m)                            # N(0, 1) weights
    s = named("SP", algorithm="pc").multipliers()
    assert [s[k]["multiplier"] for k in ("hidden", "output")] == [1, 1]
    assert [s[k]["init_variance"] for k in ("hidden", "output")] == [1 / N, 1 / N]


def test_cross_convention_consistency():
    """Seed 000 (variance) and TP4/seed 003 (std) generators derive the same parameterisations."""
    for name in ("SP", "NTK", "MF", "muP"):
        v = named(name, convention="variance", algorithm="bp")
        from limits.params.named import _derive_width

        s, _ = _derive_width(name, "std", "gnt", e_B=0)   # GNT with e_B = 0 is SGD, std framework
        assert v.to_std().gauge("a0").b == s.gauge("a0").b and v.to_std().gauge("a0").c == s.gauge("a0").c, name


def test_table_formats():
    t = table(["SP", "NTK", "MF", "muP"])
    d = t.to_dict()
    assert d["columns"] == ["SP", "NTK", "MF", "muP"] and d["rows"][0]["cells"]["muP"] == "-1/2"
    tex = t.to_latex()
    assert r"\begin{tabular}" in tex and r"- \frac{1}{2}" in tex
    assert "regime" in t.to_markdown()
    with pytest.raises(ValueError, match="unknown parameterisation"):
        table(["SP", "nope"])


def test_pc_single_shot_default_is_symbolic():
    p = named("muP", convention="std", algorithm="pc", pc_model="single-shot", gauge="a0")
    assert p.gamma_bar_L == G and sp.simplify(p.c[1] + G) == 0
    # equilibrium PC (seed 000) without γ̄_L coincides with the single-shot result at γ̄_L = 0
    eq = named("muP", convention="std", algorithm="pc", gauge="a0")
    assert eq.pc_model == "equilibrium" and (eq.b, eq.c) == (p.subs({"gamma_bar_L": 0}).b, p.subs({"gamma_bar_L": 0}).c)
