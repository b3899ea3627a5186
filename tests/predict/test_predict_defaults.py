"""Defaults of `limits predict` a new user meets: maximum-likelihood noise, test scores, checks of saved
predictions, check verdicts in the user's units with the asymptotic regime stated."""
import json
from dataclasses import replace

import numpy as np
import pytest

import limits
from limits.checking.predict import default_widths, effective_dimension, regime_residual
from limits.cli import main
from limits.cli.predict import scores


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(3)
    m = limits.mlp(3, 1, activation="erf", sigma_w2=1.5, sigma_b2=0.1)
    X = rng.standard_normal((30, 3))
    Y = np.sin(X[:, 0]) + 0.3 * rng.standard_normal(30)
    return m, X, Y, rng.standard_normal((4, 3))


def test_auto_noise_maximises_the_marginal_likelihood(task):
    """The eigendecomposition route's optimum against the posterior's own Cholesky LML on a grid (the noise
    alone at a fixed output scale; the joint fit: tests/predict/test_predict_hyperparameters.py)."""
    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto", output_scale=1.0)
    # the posterior's K_XX comes from the joint recursion on train ∪ test, max_likelihood_noise's from train
    # alone: equal to rounding (one ulp of the read-in Gram), so the two searches agree to the search's own
    # tolerance (xatol 1e-10 in log σ²), not bit for bit
    assert p.noise == pytest.approx(limits.predict.max_likelihood_noise(m, X, Y), rel=1e-9) and 0 < p.noise < 10
    lml = lambda s: limits.predict.nngp_posterior(m, X, Y, Xs, noise=s).log_marginal_likelihood  # noqa: E731
    assert p.fitted == ("noise",) and p.output_scale == 1.0
    assert p.log_marginal_likelihood == pytest.approx(lml(p.noise), rel=1e-13)
    for f in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0):
        assert lml(f * p.noise) < p.log_marginal_likelihood
    h = 1e-4 * p.noise                                          # stationary: central difference ≈ 0
    assert abs(lml(p.noise + h) - lml(p.noise - h)) / (2 * h) < 1e-4 * abs(p.log_marginal_likelihood) / p.noise
    with pytest.raises(ValueError, match="noise"):
        limits.predict.nngp_posterior(m, X, Y, Xs, noise="automatic")
    with pytest.raises(ValueError, match="all zero"):
        limits.predict.nngp_posterior(m, X, 0 * Y, Xs, noise="auto")


def test_scores_mse_and_accuracy():
    mean = np.array([[0.2], [-0.4], [0.9]])
    s = scores(mean, np.array([1.0, -1.0, -1.0]), np.array([[1.0], [1.0], [-1.0], [1.0]]))
    assert s["mse"] == pytest.approx(np.mean((mean[:, 0] - [1, -1, -1]) ** 2))
    assert s["mse_train_mean"] == pytest.approx(np.mean((0.5 - np.array([1, -1, -1])) ** 2))
    assert s["accuracy"] == pytest.approx(2 / 3)
    onehot = np.eye(3)[[0, 2, 1]]
    assert scores(np.array([[0.9, 0.1, 0], [0, 0.2, 0.7], [0.6, 0.5, 0]]), onehot, onehot)["accuracy"] == pytest.approx(2 / 3)
    assert scores(mean, np.array([0.3, 1.5, 2.0]), np.ones((2, 1)))["accuracy"] is None       # regression
    with pytest.raises(ValueError, match="y-test"):
        scores(mean, np.ones(4), np.ones((2, 1)))


def test_cli_auto_noise_y_test_and_saved_prediction(task, tmp_path, capsys):
    m, X, Y, Xs = task
    Yt = np.sin(Xs[:, 0])
    for name, a in (("X", X), ("Y", Y), ("Xs", Xs), ("Yt", Yt)):
        np.save(tmp_path / f"{name}.npy", a)
    m.save(tmp_path / "m.toml")
    base = ["predict", "--model", str(tmp_path / "m.toml"), "--x-train", str(tmp_path / "X.npy"),
            "--y-train", str(tmp_path / "Y.npy"), "--x-test", str(tmp_path / "Xs.npy")]
    assert main(base + ["--method", "posterior", "--y-test", str(tmp_path / "Yt.npy"), "--save",
                        str(tmp_path / "p"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto")
    assert d["noise"] == p.noise and d["test"]["mse"] == pytest.approx(np.mean((p.mean[:, 0] - Yt) ** 2), rel=1e-12)
    assert main(base + ["--method", "posterior"]) == 0
    assert "maximum marginal likelihood" in capsys.readouterr().out
    # the saved prediction is checked later by `limits check --prediction`
    rc = main(["check", "--prediction", str(tmp_path / "p"), "--widths", "64", "128", "256", "--inits", "48"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| posterior mean |" in out and "| posterior cov |" in out and "| test point |" in out
    # only predictions are accepted, and nothing else may be combined with --prediction
    limits.kernels.kernel(m, X).save(tmp_path / "k")
    assert main(["check", "--prediction", str(tmp_path / "k")]) == 2
    assert "not a prediction" in capsys.readouterr().err
    assert main(["check", "--prediction", str(tmp_path / "p"), "--model", str(tmp_path / "m.toml")]) == 2
    assert main(["check", "--prediction", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_regime_widths_and_inconclusive_verdict(task):
    """Widths far below d_eff: a failure is reported as inconclusive with the regime, in user units;
    the default widths are chosen inside the regime; the same defaults as the command line."""
    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=1e-3)
    d = effective_dimension(p, m)
    lam = np.linalg.eigvalsh(limits.kernels.kernel(m, X).nngp)
    assert d == pytest.approx(np.sum(lam / (lam + 1e-3)), rel=1e-10) and 20 < d <= 30
    w = default_widths(d, "posterior")
    assert w[1] == 2 * w[0] and w[2] == 4 * w[0] and (regime_residual(d, w) <= 0.005 or w[2] == 2048)
    c = limits.check(p, widths=(8, 16, 32), inits=32, seed=0)
    b = c.details["blocks"]
    assert c.verdict == "inconclusive" and not c.passed, c.to_markdown()
    assert b["posterior cov"]["regime"]["level"] == "outside" and "inconclusive" in {v["verdict"] for v in b.values()}
    md = c.to_markdown()
    assert "INCONCLUSIVE" in md and "not inside the asymptotic regime" in md and "d_eff = " in md
    worst = b["posterior cov"]["worst"]                  # user units: the actual (co)variance, not rescaled
    assert worst["theory"] in set(np.asarray(p.cov)[np.triu_indices(4)].tolist())


def test_weak_power_is_stated_and_a_target_power_raises_inits(task):
    m, X, _, _ = task
    k = limits.kernels.kernel(m, X[:3])
    weak = limits.check(k, widths=(16, 32, 64), inits=4, seed=0)
    assert weak.power > 0.05 and f"weak: cannot detect errors below" in weak.verdict_text()
    c = limits.check(k, widths=(16, 32, 64), inits=4, seed=0, target_power=0.05, max_inits=512)
    assert c.inits > 4 and c.details["target_power"] == 0.05
    assert c.power < weak.power and "target 5 %" in c.verdict_text()
    with pytest.raises(ValueError, match="target_power"):
        limits.check(k, widths=(16, 32, 64), inits=4, target_power=1.5)


def test_flagged_error_fails_inside_the_regime(task):
    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X[:6], Y[:6], Xs[:2], noise=0.3)
    bad = limits.check(replace(p, mean=1.1 * p.mean), widths=(64, 128, 256), inits=64, seed=0)
    assert bad.verdict == "fail" and bad.details["blocks"]["posterior mean"]["verdict"] == "fail", bad.to_markdown()
