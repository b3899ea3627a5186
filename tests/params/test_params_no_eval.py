"""No text reaches sympy's parser (which evaluates Python): every params entry point that accepts a value
either takes a sympy object or number, or parses text with the restricted grammar of limits.params.expr."""
import pytest
import sympy as sp

import limits.params as P
from limits.params.depth import depth_quantities
from limits.params.expr import fmt, latex
from limits.params.solver import solve_quantities


def _payload(tmp_path):
    marker = tmp_path / "pwned"
    return marker, f"__import__('pathlib').Path({str(marker)!r}).touch() or 0"


def test_sympify_would_run_the_payload(tmp_path):
    """Positive control: the payload below does act when sympy parses it."""
    marker, text = _payload(tmp_path)
    sp.sympify(text)
    assert marker.exists()


@pytest.mark.parametrize("route", ["fmt", "latex", "solve_fixed_value", "solve_fixed_key", "table_fixed_key",
                                   "depth_alpha", "depth_gamma", "subs", "named_gamma_bar_L", "depth_regime"])
def test_text_is_never_evaluated(route, tmp_path):
    marker, text = _payload(tmp_path)
    a = sp.Symbol("a_hidden", real=True)
    q = P.Quantity("x", a, "=0", "test")
    calls = {
        "fmt": lambda: fmt(text),
        "latex": lambda: latex(text),
        "solve_fixed_value": lambda: solve_quantities([q], [a], {a: text}),
        "solve_fixed_key": lambda: solve_quantities([q], [a], {text: 0}),
        "table_fixed_key": lambda: P.solve(fixed={text: 0}),
        "depth_alpha": lambda: depth_quantities(alpha=text),
        "depth_gamma": lambda: depth_quantities(gamma=text),
        "subs": lambda: P.named("muP", algorithm="pc", convention="std",
                                gamma_bar_L=sp.Symbol("gamma_bar_L", real=True)).subs({"gamma_bar_L": text}),
        "named_gamma_bar_L": lambda: P.named("muP", algorithm="pc", convention="std", gamma_bar_L=text),
        "depth_regime": lambda: P.depth_regime(text, "1/2"),
    }
    with pytest.raises(ValueError):
        calls[route]()
    assert not marker.exists()


def test_restricted_text_still_works():
    assert fmt("-1/2") == "-1/2" and latex("1/2") == r"\frac{1}{2}"
    assert depth_quantities(alpha="1/2")["faithful_low"].exponent == 0
    assert P.depth_regime("1/2", "1/2").faithful
