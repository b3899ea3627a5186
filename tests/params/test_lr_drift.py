"""limits.params.lr_drift: the drift of the optimal learning rate each parameterisation implies, derived from the
quantities classify() evaluates (width) and TP6's depth rules (depth)."""
import math

import pytest

import limits
from limits.params import lr_drift


def _p(name, opt):
    return limits.params.named(name, convention="std", optimizer=opt, gauge="a0")


@pytest.mark.parametrize("opt, x, binding", [("adam", 1.5, ("A2.stable",)), ("sgd", 1.0, ("r.output", "A2.stable"))])
def test_sp_width_drift_is_a_bound_set_by_the_blowing_up_updates(opt, x, binding):
    d = lr_drift(_p("SP", opt))
    assert d.kind == "bound" and d.drift == -x and d.binding == binding
    # the same number the solver finds for one stable global learning rate (TP4's "SP, lr η/N"; Adam: N^-3/2)
    sp, stable = _p("SP", opt), _p("SP-stable", opt)
    assert float(stable.exponent("hidden", "c") - sp.exponent("hidden", "c")) == x
    assert d.consistent_sign(-0.9, -0.2) and not d.consistent_sign(-0.5, 0.1)


@pytest.mark.parametrize("name", ["muP", "NTK", "MF", "SP-stable", "depth-muP"])
@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_stable_parameterisations_predict_no_width_drift(name, opt):
    d = lr_drift(_p(name, opt))
    assert d.kind == "exact" and d.drift == 0.0 and d.binding == ()
    assert d.consistent_sign(-0.1, 0.1) and not d.consistent_sign(0.05, 0.3)


@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_depth_mup_predicts_no_depth_drift_and_width_only_mup_a_bound(opt):
    d = lr_drift(_p("depth-muP", opt), "depth")
    assert d.kind == "exact" and d.drift == 0.0
    w = lr_drift(_p("muP", opt), "depth")             # no branch multiplier (α = 0), depth-independent rate
    assert w.kind == "bound" and w.drift == -1.0 and "init_log_variance" in w.binding
    assert "1 − 2α" in w.derivation


def test_unstable_initialisation_has_no_prediction_and_bad_input_is_refused():
    p = limits.params.Parameterisation.make((0, 0, 0), (0, 0, 0), (0, 0, 0), convention="std", optimizer="adam")
    d = lr_drift(p)
    assert d.kind == "none" and math.isnan(d.drift) and "initialisation" in d.reason
    with pytest.raises(ValueError, match="axis"):
        lr_drift(_p("muP", "adam"), "time")
    with pytest.raises(ValueError, match="Parameterisation"):
        lr_drift("muP")
