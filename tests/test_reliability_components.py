"""Issue 14 (no wrong or silent-NaN results), component items: every hostile input to the
finite / pc / nfd / params / dmft public API and component CLIs gives a finite, correctly shaped
result or a ValueError naming the argument."""
from __future__ import annotations

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
