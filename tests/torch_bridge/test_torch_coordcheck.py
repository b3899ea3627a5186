"""coord_check on the demo MLP and transformer: μP flat, SP blowing up, a broken μP read-out flagged by name;
the `limits coord-check` command and its factory resolver."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import limits  # noqa: E402
from limits.cli import main  # noqa: E402
from limits.torch import coord_check, parameterise, resolve_factory  # noqa: E402
from limits.torch import demos  # noqa: E402
from limits.torch.coordcheck import TorchCoordCheck  # noqa: E402

WIDTHS = (64, 128, 256, 512)


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tf_results():
    torch.set_num_threads(1)
    data = demos.transformer_data()
    mup = coord_check(parameterise(demos.transformer, "muP", widths=(64, 128)), WIDTHS, data, lr=1e-2,
                      steps=3, seeds=3)
    sp = coord_check(parameterise(demos.transformer, "SP", widths=(64, 128)), WIDTHS, data, lr=3e-5,
                     steps=1, seeds=3)
    broken = coord_check(demos.broken_mup_transformer, WIDTHS, data, lr=1e-2, steps=3, seeds=3, expect="muP")
    sp_as_mup = coord_check(demos.transformer, WIDTHS, data, lr=3e-5, steps=1, seeds=3, expect="muP")
    return mup, sp, broken, sp_as_mup


def test_mup_transformer_is_flat_within_its_cis(tf_results):
    mup = tf_results[0]
    assert mup.passed, mup.to_markdown()
    for name in ("out", "enc.layers.1.linear2", "enc.layers.0.self_attn:logits"):
        s, lo, hi, pred = mup.exponent(name, "change")
        assert pred == 0.0 and lo - mup.tol <= 0.0 <= hi + mup.tol
    assert mup.exponent("out", "scale", step=0)[3] == -0.5       # f0 ∝ N^{-1/2} under μP
    assert mup.exponent("enc.layers.0.self_attn:logits", "scale", step=0)[3] == -0.5


def test_sp_transformer_output_and_logits_blow_up(tf_results):
    sp = tf_results[1]
    for name in ("out", "enc.layers.0.self_attn:logits", "enc.layers.1.self_attn:logits"):
        s, lo, hi, pred = sp.exponent(name, "change", step=1)
        assert pred == 1.5                    # SP + Adam: Δlogit ∝ N^{e+1/2}, e = 1
        assert lo > 1.1, (name, s, lo, hi)    # grows like N^{>1}: nowhere near μP's 0
    # read-in (embedding) changes by Θ(η) under Adam in SP too
    s, lo, hi, pred = sp.exponent("emb", "change", step=1)
    assert pred == 0.0 and lo - sp.tol <= 0 <= hi + sp.tol
    # downstream of an attention the change crosses over from N^1 to N^{3/2}: predicted as that range
    i = sp.tensors.index("enc.layers.1.linear2")
    assert (sp.predicted_low[i, 1, 1], sp.predicted[i, 1, 1]) == (1.0, 1.5)
    assert sp.passed, sp.to_markdown()          # SP behaves as SP is predicted to


def test_sp_transformer_checked_against_mup_is_flagged(tf_results):
    sp_as_mup = tf_results[3]
    bad = sp_as_mup.failing_tensors()
    assert "out" in bad and "enc.layers.0.self_attn:logits" in bad and "enc.layers.0.linear1" in bad
    assert "emb" not in bad                      # the SP embedding under Adam is already μP-like


def test_broken_mup_readout_is_flagged_by_name(tf_results):
    broken = tf_results[2]
    assert not broken.passed
    assert "out" in broken.failing_tensors()
    s, lo, hi, pred = broken.exponent("out", "change", step=1)
    assert pred == 0.0 and lo > 0.3              # the SP read-out's update grows with width
    s0, lo0, hi0, p0 = broken.exponent("out", "scale", step=0)
    assert p0 == -0.5 and lo0 > -0.25            # f0 = Θ(1), not N^{-1/2}
    assert "out" in broken.to_markdown().split("Not as predicted")[1]


def test_mlp_mup_passes_and_sp_as_is_is_not_mup():
    data = demos.mlp_data()
    mup = coord_check(parameterise(demos.mlp, "muP", widths=(64, 128)), WIDTHS, data, lr=1e-2, steps=2, seeds=3)
    assert mup.passed, mup.to_markdown()
    same = coord_check(demos.mlp, WIDTHS, data, lr=1e-2, steps=2, seeds=3, parameterisation="muP")
    np.testing.assert_array_equal(same.samples, mup.samples)     # shorthand for parameterise(...) then check
    sp_as_mup = coord_check(demos.mlp, WIDTHS, data, lr=1e-3, steps=2, seeds=3, expect="muP")
    assert not sp_as_mup.passed
    assert "4" in sp_as_mup.failing_tensors()          # the read-out (Sequential index 4)


def test_result_round_trip_and_plot(tf_results, tmp_path):
    mup = tf_results[0]
    mup.save(tmp_path / "cc")
    back = TorchCoordCheck.load(tmp_path / "cc")
    assert back.equals(mup)
    import matplotlib
    import matplotlib.pyplot

    matplotlib.use("Agg")
    fig = mup.plot()
    assert len(fig.axes[0].get_xticklabels()) == len(mup.tensors)
    fig = mup.plot(tmp_path / "cc.png")                     # a path, as every result's plot takes
    assert (tmp_path / "cc.png").stat().st_size > 1000 and fig.axes
    host, ax = matplotlib.pyplot.subplots()
    assert mup.plot(ax) is host and ax.has_data()


def test_coord_check_arguments():
    data = demos.mlp_data()
    with pytest.raises(ValueError, match="expect"):
        coord_check(demos.mlp, WIDTHS, data)
    with pytest.raises(ValueError, match="at least 3"):
        coord_check(demos.mlp, (64, 128), data, expect="muP")
    with pytest.raises(ValueError, match="dropout"):
        coord_check(lambda n: torch.nn.Sequential(torch.nn.Linear(8, n), torch.nn.Dropout(0.1),
                                                  torch.nn.Linear(n, 2)), WIDTHS, data, expect="muP", seeds=2,
                    steps=1)


# ---------------------------------------------------------------------- resolver and CLI
def test_resolver_allows_only_plain_functions_defined_in_allowed_modules():
    assert resolve_factory("limits.torch.demos:transformer", ["limits.torch.demos"]) is demos.transformer
    bad = [("limits.torch.demos:transformer", [], "not allowed"),
           ("limits.torch.demos:TinyTransformer", ["limits.torch.demos"], "not a plain function"),
           ("limits.torch.demos:torch.randn", ["limits.torch.demos"], "attribute chains"),
           ("limits.torch.demos:_broken", ["limits.torch.demos"], "public identifier"),
           ("limits.torch.demos:nn", ["limits.torch.demos"], "not a plain function"),
           ("limits.torch.demos:missing", ["limits.torch.demos"], "defines no"),
           ("limits.torch.demos.transformer", ["limits.torch.demos"], "module:function"),
           ("os:system", ["os"], "not a plain function"),
           ("limits.torch.coordcheck:loglog_fit", ["limits.torch"], "re-exported")]
    for spec, allow, msg in bad:
        with pytest.raises(ValueError, match=msg):
            resolve_factory(spec, allow)


def _cli(args, capsys):
    code = main(["coord-check", "--allow", "limits.torch.demos", "--widths", "64", "128", "256", "512",
                 "--seeds", "4", "--steps", "2", *args])
    return code, capsys.readouterr()


def test_cli_param_passes_and_as_is_broken_fails(capsys, tmp_path):
    code, out = _cli(["--factory", "limits.torch.demos:mlp", "--param", "muP", "--lr", "0.01",
                      "--data", "limits.torch.demos:mlp_data", "--save", str(tmp_path / "r")], capsys)
    assert code == 0, out.out
    assert "All tensors behave as predicted" in out.out
    assert (tmp_path / "r.json").exists()
    code, out = _cli(["--factory", "limits.torch.demos:broken_mup_mlp", "--as-is", "--expect", "muP",
                      "--lr", "0.01"], capsys)
    assert code == 1
    assert "4 (change at step 1" in out.out.split("Not as predicted:")[1]


def test_cli_user_errors(capsys):
    code, out = _cli(["--factory", "limits.torch.demos:mlp", "--as-is"], capsys)
    assert code == 2 and "--expect" in out.err
    code, out = _cli(["--factory", "os:system", "--param", "muP"], capsys)
    assert code == 2 and "not allowed" in out.err


@pytest.mark.parametrize("name", ["muP", "SP", "NTK"])
def test_mlp_with_sgd_follows_each_table(name):
    """SGD tables: every tensor's one-step exponents as the solver predicts (SP: hidden N^1/2, output N^1;
    NTK: hidden N^-1/2, output N^0)."""
    P = parameterise(demos.mlp, name, widths=(64, 128), optimizer="sgd")
    r = coord_check(P, WIDTHS, demos.mlp_data(), lr=0.05, steps=2, seeds=4)
    assert r.passed, r.to_markdown()
    p = limits.params.named(name, convention="std", optimizer="sgd")
    e = p.one_step_exponents()
    assert r.exponent("4", "change")[3] == float(e["df"]) and r.exponent("2", "change")[3] == float(e["dh:hidden"])


def test_inputs_alone_get_fixed_random_targets():
    X, _ = demos.mlp_data()
    r = coord_check(parameterise(demos.mlp, "muP", widths=(64, 128)), WIDTHS, X, lr=1e-2, steps=2, seeds=3)
    assert r.passed, r.to_markdown()
    assert np.all(r.samples[:, :, :, 2, 1] > 0)            # the outputs moved: there was a training signal
    with pytest.raises(ValueError, match="pair"):
        coord_check(demos.mlp, WIDTHS, (X,), expect="muP")
