"""limits.torch.transfer: the μTransfer study of a torch network — runs through limits.sweep (resumable store,
serial/loky/dask give the same numbers), diverged runs recorded, the result frozen, saved, printed and drawn, and
the demonstrations at a small size: the digits MLP's optimum drifts under SP and stays put under μP."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import limits.torch as lt  # noqa: E402
from limits.torch import transfer_demos as demos  # noqa: E402
from limits.torch.transfer_result import TransferResult  # noqa: E402
from limits.torch.transfer_study import reanalyse  # noqa: E402


def tiny(width):
    return nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 2))


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(32, 8, generator=g), torch.randn(32, 2, generator=g)


KW = dict(widths=(16, 32, 64), lrs=2.0 ** np.arange(-8, -3), steps=4, seeds=2, progress=False, calibrate=False,
          n_boot=200)


def test_store_resumes_and_backends_agree(tmp_path):
    store = tmp_path / "runs"
    a = lt.transfer(tiny, "muP", data=_data(), store=store, **KW)
    assert a.settings["reused"] == 0
    b = lt.transfer(tiny, "muP", data=_data(), store=store, **KW)          # every run reused from the store
    assert b.settings["reused"] == 30 and np.array_equal(a.train_loss, b.train_loss)
    pts = sorted((store / "points").rglob("*.json"))
    for p in pts[::3]:                                                     # an interrupted study: runs missing
        p.unlink()
    c = lt.transfer(tiny, "muP", data=_data(), store=store, **KW)
    assert c.settings["reused"] == 30 - len(pts[::3]) and np.array_equal(a.train_loss, c.train_loss)
    e = lt.transfer(tiny, "SP", data=_data(), store=store, **KW)           # another parameterisation: new runs
    assert e.settings["reused"] == 0 and np.all(e.cpu_s > 0)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["loky", "dask"])
def test_process_backends_give_the_same_runs(backend):
    """The study scales out without new code: the same runs, bit for bit, on two worker processes (loky, or a
    local dask.distributed cluster — the same code runs on a remote one with scheduler='tcp://…')."""
    if backend == "dask":
        pytest.importorskip("distributed")
    a = lt.transfer(tiny, "muP", data=_data(), **KW)
    b = lt.transfer(tiny, "muP", data=_data(), backend=backend, n_jobs=2, **KW)
    assert np.array_equal(a.train_loss, b.train_loss) and b.settings["backend"] == backend


def test_diverged_runs_are_recorded_not_dropped():
    r = lt.transfer(tiny, "SP", data=_data(), **{**KW, "lrs": 2.0 ** np.arange(-6, 7, 3), "steps": 20})
    assert r.diverged[:, -1].all() and not r.diverged[:, 0].any() and not r.failed.any()
    k = np.nonzero(r.diverged)
    assert np.all(np.isfinite(r.curve_mean)) and np.all(r.curve_mean[k[0], k[1]] > 0)
    assert "diverged" in r.to_markdown() and f"{int(r.diverged[0].sum())}/10" in r.to_markdown()


def test_result_saves_prints_draws_and_reanalyses(tmp_path):
    r = lt.transfer(tiny, "muP", data=_data(), held_out=_data(), **{**KW, "calibrate": True, "n_sim": 20})
    r.save(tmp_path / "t")
    back = TransferResult.load(tmp_path / "t")
    assert back.equals(r)
    md = r.to_markdown()
    assert "Drift of the optimum per doubling of width" in md and "Calibration (20 simulated" in md
    assert "held-out loss" in md and "Predicted optimum at width 256" in md
    assert "\n" not in repr(r) and repr(r).startswith("TransferResult(muP (adam), width 16–64: drift")
    r.plot(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 10_000
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    assert r.plot(ax) is ax
    plt.close(fig)
    wide = reanalyse(r, margin=5.0, calibrate=False)         # statistics again, no run repeated
    assert wide.margin == 5.0 and wide.drift == r.drift and np.array_equal(wide.train_loss, r.train_loss)
    t = reanalyse(r, criterion="test", calibrate=False)
    assert t.criterion == "test" and np.isfinite(t.other_drift)


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="at least 3 sizes"):
        lt.transfer(tiny, "muP", data=_data(), **{**KW, "widths": (16, 32)})
    with pytest.raises(ValueError, match="learning rates"):
        lt.transfer(tiny, "muP", data=_data(), **{**KW, "lrs": [1e-3, -1.0, 1e-2]})
    with pytest.raises(ValueError, match="seeds"):
        lt.transfer(tiny, "muP", data=_data(), **{**KW, "seeds": 1})
    with pytest.raises(ValueError, match="one size at a time"):
        lt.transfer(demos.residual_mlp, "muP", data=_data(), depths=(2, 4, 8), **KW)
    with pytest.raises(ValueError, match="pair"):
        lt.transfer(tiny, "muP", data=_data()[0], **KW)
    with pytest.raises(ValueError, match="held_out"):
        lt.transfer(tiny, "muP", data=_data(), criterion="test", **KW)
    with pytest.raises(ValueError, match="unknown name 'XP'"):
        lt.transfer(tiny, "XP", data=_data(), **KW)
    P = lt.parameterise(tiny, "SP", widths=(16, 32))
    with pytest.raises(ValueError, match="already parameterised as 'SP'"):
        lt.transfer(P, "muP", data=_data(), **KW)
    with pytest.raises(ValueError, match="needs depths="):
        lt.transfer(lt.parameterise(demos.residual_mlp, "depth-muP", widths=(16, 32), depths=(2, 4)), None,
                    data=_data(), **KW)


def test_a_parameterised_factory_is_used_as_given():
    P = lt.parameterise(tiny, "SP", widths=(16, 32))
    a = lt.transfer(P, None, data=_data(), **KW)
    b = lt.transfer(tiny, "SP", data=_data(), **KW)
    assert a.parameterisation == "SP" and np.array_equal(a.train_loss, b.train_loss)


@pytest.mark.slow
def test_digits_mlp_sp_drifts_and_mup_transfers():
    """Digits MLP, widths 32–256, Adam, 40 steps of 64 rows, 3 seeds (≈ 25 CPU-s): μP's optimum is flat within its
    CI (verdict transfers), SP's falls with width (drifts, as the table predicts); at the base width 32 both are
    the same network, run for run."""
    d = demos.digits_data()
    kw = dict(widths=(32, 64, 128, 256), lrs=2.0 ** np.arange(-12, -3), data=d["train"], steps=40, seeds=3,
              batch_size=64, progress=False, n_sim=50)
    mup = lt.transfer(demos.digits_mlp, "muP", **kw)
    sp = lt.transfer(demos.digits_mlp, "SP", **kw)
    assert np.array_equal(mup.train_loss[0], sp.train_loss[0])
    assert mup.verdict == "transfers" and mup.passed, mup.to_markdown()
    assert sp.verdict == "drifts" and sp.passed and sp.drift_ci[1] < -0.3, sp.to_markdown()
    assert sp.prediction_kind == "bound" and sp.predicted_drift == -1.5 and mup.predicted_drift == 0.0
    assert mup.calibration["rates"][0, 1] <= 0.1                 # a flat optimum is rarely called a drift
    assert not math.isnan(sp.target_optimum) and sp.target_optimum < mup.target_optimum


def test_byte_transformer_study_at_a_small_size():
    """The byte-level causal transformer on the shipped essay, widths 16–64, 4 rates, 2 seeds × 6 steps (a few
    CPU-s): μP multiplies each attention's query rows by r^−½ (logits ∝ q·k/d_h, 4 heads; traced on windows of
    the demo's length), the study runs end to end through the sweep with the held-out loss, and training lowers
    the loss from its start at a good rate; a study given the plain factory traces it on its own data."""
    d = demos.text_data(n_train=64, n_test=16)
    P = lt.parameterise(demos.byte_transformer, "muP", widths=(16, 32), example_inputs=(d["train"][0][:2],))
    q = [r for r in P.rules if r.query_exponent]
    assert len(q) == 4 and all(r.query_exponent == -0.5 and r.query_rows == (0, 16) for r in q)   # weight, bias
    r = lt.transfer(P, None, widths=(16, 32, 64), lrs=2.0 ** np.arange(-10, -2, 2), data=d["train"],
                    held_out=d["test"], steps=6, seeds=2, batch_size=8, progress=False, calibrate=False, n_boot=100)
    assert r.parameterisation == "muP" and r.train_loss.shape == (3, 4, 2) and r.test_loss.shape == (3, 4, 2)
    assert np.isfinite(r.test_loss).all() and not r.failed.any() and not r.diverged.any()
    assert np.all(r.train_loss.mean(-1).min(1) < r.loss0[:, 0].mean(-1) - 0.1)
    with pytest.raises(ValueError, match="example_inputs"):            # a guessed input is not a 32-byte window
        lt.parameterise(demos.byte_transformer, "muP", widths=(16, 32))
    s = lt.transfer(demos.byte_transformer, "muP", widths=(16, 32, 64), lrs=2.0 ** np.arange(-10, -2, 2),
                    data=d["train"], steps=1, seeds=2, batch_size=8, progress=False, calibrate=False, n_boot=50)
    assert np.isfinite(s.train_loss).all() and not s.failed.any()


def test_depth_study_at_a_small_size():
    """transfer(…, depths=…) sweeps depth at one width: the sizes are the depths, the predicted drift per doubling
    of depth is 0 under Depth-μP and a bound −1 under width-only μP (limits.params.lr_drift)."""
    d = demos.digits_data()
    kw = dict(widths=(16,), depths=(2, 4, 8), lrs=2.0 ** np.arange(-10, -3, 2), data=d["train"], steps=4,
              seeds=2, batch_size=32, progress=False, calibrate=False, n_boot=100)
    dm = lt.transfer(demos.residual_mlp, "depth-muP", **kw)
    w = lt.transfer(demos.residual_mlp, "muP", **kw)
    assert dm.axis == w.axis == "depth" and list(dm.sizes) == [2, 4, 8] and dm.fixed_size == 16
    assert dm.predicted_drift == 0.0 and dm.prediction_kind == "exact"
    assert w.predicted_drift == -1.0 and w.prediction_kind == "bound"
    assert not np.array_equal(dm.train_loss[1:], w.train_loss[1:])        # the branch multiplier acts
    assert np.array_equal(dm.train_loss[0], w.train_loss[0]) or dm.settings.get("base_depth") != 2
