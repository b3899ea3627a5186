"""Seed 003, M_L = 1, γ̄_L = −1: PC errors exactly ∥ BP, but the PC weight gradient of the last
hidden layer stays Θ(1) away from BP at every width (validation cases in limits/validate/pc.py)."""
import numpy as np

from limits.validate import pc as V


def test_seed003_ml1_errors_exactly_parallel_to_bp():
    c = V.seed003_ml1_errors_case(np.random.default_rng([0, 1]), True)
    assert c.verdict == "pass", c.detail
    assert c.kind == "exact" and c.z <= 1e-10


def test_seed003_ml1_weight_gradient_gap_does_not_decay():
    c = V.seed003_ml1_gradients_case(np.random.default_rng([0, 2]), True)
    assert c.verdict == "pass", c.detail
    # the gap is real: 1 − cos at the largest width is many SEs above 0 (the seed's claim is 0) ...
    assert c.estimate > 5 * c.se and c.estimate > 0.05
    # ... and the fitted rate excludes the 1/M decay that "PC → GD with width" would need
    assert not (c.rate_ci[0] <= -1.0 <= c.rate_ci[1])
    assert c.rate_ci[0] <= 0.0 <= c.rate_ci[1]


def test_seed003_ml1_cases_registered():
    import limits.validate as val

    val._load_all()
    names = {c.name for c in val._CASES if c.component == "pc"}
    assert V.SEED003_ML1_EXACT in names and V.SEED003_ML1_STAT in names
    assert "DISAGREES" in V.SEED003_ML1_STAT.upper() or "disagrees" in V.SEED003_ML1_STAT
