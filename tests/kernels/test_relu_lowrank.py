"""relu / step moments in 3–4 Gaussian variables on singular and nearly singular covariances
(limits/kernels/relu_lowrank.py, docs/theory/finite_width.rst §9): exact against mpmath (rank 2), against an
independent 3-variable route (a dependent fourth variable), against the conditional rule (full rank), continuous
across the band's edge; the committed Monte Carlo table (10⁷ draws) says what the data say."""
import json

import numpy as np
import pytest

from limits.activations import BUILTIN
from limits.kernels import relu_fourpoint as rf
from limits.kernels import relu_lowrank as rl
from limits.kernels.fourpoint import expect4

RELU = BUILTIN["relu"]
LISTS = ([1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0], [2, 1, 0, None])


def test_rank_two_equals_mpmath():
    from benchmark_scripts import load

    bench = load("relu_singular_moments")
    rng = np.random.default_rng(4)
    for _ in range(2):
        X = rng.standard_normal((4, 1))
        S = X @ X.T + 0.1                                  # rank 2: a d_in = 1 read-in with a bias
        for p in LISTS[:3]:
            assert rl.expect_many(S, [p])[0] == pytest.approx(bench.mp_rank2(S, p, dps=25), rel=1e-13, abs=1e-300)


def test_dependent_fourth_variable_equals_the_three_variable_rule():
    """x₄ = 2x₁ exactly (a singular 4×4): E[relu x₁ relu x₂ relu x₃ relu(2x₁)] = 2E[relu(x₁)² relu x₂ relu x₃], the
    latter by the conditional rule on the three variables (another code path)."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 3))
    S3 = A @ A.T
    T = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [2, 0, 0]], float)
    S4 = T @ S3 @ T.T
    got = rl.expect_many(S4, [[1, 1, 1, 1], [0, 1, None, 0]])
    assert got[0] == pytest.approx(2 * rf.expect(S3, [2, 1, 1]), rel=1e-12)
    assert got[1] == pytest.approx(rf.expect(S3, [0, 1, None]), rel=1e-12)     # step(2x₁) = step(x₁)


def test_full_rank_three_variables_equal_the_conditional_rule(monkeypatch):
    """The rank-3 rule on full-rank three-variable covariances (which expect_many hands to the conditional rule) against
    that rule with twice its default nodes (at its defaults it is 9e-11 off on the first of these covariances,
    condition number 150, where this rule and the refined one agree to 1e-15)."""
    monkeypatch.setattr(rf, "RADIAL", 80)
    monkeypatch.setattr(rf, "ANGULAR", 40)
    rng = np.random.default_rng(6)
    for _ in range(3):
        B = rng.standard_normal((3, 3))
        S = B @ B.T
        for p in ([1, 1, 1], [2, 0, 1], [0, 0, 0]):
            assert rl._rank3(rl.factor(S)[0], [p])[0] == pytest.approx(rf.expect(S, p), rel=1e-12)


def test_continuous_through_the_nearly_singular_band():
    """S₃ + λ v vᵀ (v the null direction of a rank-3 read-in covariance): continuous at the band's edge (the
    interpolation passes through the conditional rule there) and tending to the exact rank-3 value like √λ (a kink
    smoothed at scale √λ) with a coefficient that settles (1.258, 1.322, 1.329, 1.332 for relu² step² at λ/λ_max =
    1e-8 … 1e-14)."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((4, 2))
    S3 = X @ X.T / 2 + 0.1
    lam, V = np.linalg.eigh(S3)
    v, top = V[:, 0], lam[-1]
    edge = rl.BAND * top
    for p in LISTS[:3]:
        below = rl.expect_many(S3 + edge * (1 - 1e-9) * np.outer(v, v), [p])[0]
        above = rl.expect_many(S3 + edge * (1 + 1e-9) * np.outer(v, v), [p])[0]
        assert below == pytest.approx(above, rel=1e-8)
        F0 = rl.expect_many(S3, [p])[0]
        ratio = []
        for x in (1e-8, 1e-10, 1e-12):
            F = rl.expect_many(S3 + x * top * np.outer(v, v), [p])[0]
            assert abs(F - F0) <= 3.0 * np.sqrt(x) * abs(F0)
            ratio.append((F - F0) / (np.sqrt(x) * F0))
        assert abs(ratio[1] - ratio[2]) <= 0.02 * abs(ratio[2]) + 1e-3       # F = F0 + c√λ + O(λ): a smooth limit


def test_expect4_takes_the_rank_rule_on_singular_covariances():
    """The production path (fourpoint.expect4, what the finite-width corrections call) gives the rank rule's values
    on a first layer's rank-3 covariance — not the 20⁴ tensor Gauss–Hermite rule it fell back to (off by percents)."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((4, 2))
    S = X @ X.T / 2 + 0.1
    fns = {1: RELU.phi, 0: RELU.dphi}
    for p in LISTS[:3]:
        assert expect4(RELU, [fns[k] for k in p], S[None])[0] == pytest.approx(rl.expect_many(S, [p])[0], rel=1e-14)


def test_committed_monte_carlo_table():
    """benchmarks/results/calibration/relu_singular_moments.json (10⁷ draws per value): every value of this code within
    5 SE of Monte Carlo, the previous rule beyond 20 SE somewhere (the bug it documents), rank-2 values equal to mpmath;
    the first row recomputed; the docs table is the data's."""
    from pathlib import Path

    from benchmark_scripts import load

    bench = load("relu_singular_moments")
    data = json.loads(bench.OUT.read_text())
    assert data["draws"] >= 10_000_000
    assert all(abs(r["z_new"]) < 5 for r in data["rows"])
    assert max(abs(r["z_previous"]) for r in data["rows"]) > 20
    assert all(r["rel_vs_mpmath"] < 1e-13 for r in data["rows"] if r["mpmath"] is not None)
    name, S = next(iter(bench.cases().items()))
    first = data["rows"][0]
    assert first["case"] == name
    fns = {1: RELU.phi, 0: RELU.dphi}
    assert expect4(RELU, [fns[k] for k in bench.LISTS[first["moment"]]], S[None])[0] == pytest.approx(first["new"],
                                                                                                      rel=1e-13)
    doc = (Path(bench.ROOT) / "docs" / "theory" / "finite_width.rst").read_text()
    block = doc.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    assert [x.strip() for x in block.splitlines() if x.strip()] == [
        x.strip() for x in bench.rst_table(data) if x.strip()], "python benchmarks/relu_singular_moments.py --write"
