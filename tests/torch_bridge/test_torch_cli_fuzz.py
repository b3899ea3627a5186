"""`limits coord-check` under hostile option values (the core fuzz suite skips this torch command): every
run ends with exit 0/1 or one `limits: error:` line naming the option, never a traceback or internal error."""
import argparse
import sys

import pytest

torch = pytest.importorskip("torch")

from limits.cli import build_parser, main  # noqa: E402

BASE = ["--factory", "limits.torch.demos:mlp", "--param", "muP",
        "--widths", "4", "8", "16", "--seeds", "2", "--steps", "1"]
HOSTILE = {"int": ["0", "-1", "abc", "", "1.5", "100000000", "3"],
           "float": ["nan", "inf", "-inf", "0", "-1", "1e308", "abc"],
           "str": ["", "nope", "__import__('os').system('true')", "os:system", "a:b:c", "limits.torch.demos:_broken",
                   "x" * 300, "\x00", "code:interact", "limits.cli:main", "limits.kernels.tilestore:write_tiles",
                   "limits.torch.demos", "limits", "os", "numpy", "json", "x." * 200 + "y:f"]}


def _options():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["coord-check"]
    for a in sub._actions:
        if not a.option_strings or a.nargs == 0 or a.dest in ("help", "save", "plot"):
            continue
        kind = "int" if a.type is int else "float" if a.type is float else "str"
        yield max(a.option_strings, key=len), a.dest, kind, a.choices


def _with(flag, value):
    argv = list(BASE)
    if flag in argv:
        i = argv.index(flag)
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        return argv[:i] + [flag, value] + argv[j:]
    return argv + [flag, value]


CASES = [(flag, dest, v) for flag, dest, kind, choices in _options()
         for v in (["nope", ""] if choices else HOSTILE[kind])]


@pytest.mark.parametrize("flag,dest,value", CASES, ids=[f"{f}={v[:20]!r}" for f, _, v in CASES])
def test_hostile_option_value(flag, dest, value, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(["coord-check", *_with(flag, value)])
    except SystemExit as exc:          # argparse: usage error
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(value) <= 160 or value not in err, err                 # long user text is never echoed whole
    if rc == 2:
        lines = [ln for ln in err.splitlines() if ln.startswith("limits: error: ") or ln.startswith("usage:")]
        errors = [ln for ln in err.splitlines() if "error:" in ln]
        assert len(errors) == 1, err
        names = {flag, flag.lstrip("-"), dest, dest.replace("_", "-")}
        if len(value.strip()) >= 3:
            names.add(value.strip()[:50])
        assert any(n.lower() in errors[0].lower() for n in names) or "required" in errors[0], errors[0]
        assert lines


# ------------------------------------------------------------------ bad data (issue 42 item 5) and measurements (item 4)
# Every data error of `coord-check --data` / `transfer --data` exits 2 with one line naming --data (or the option) and
# what was expected, before the first training step (training is patched to fail the test if it starts).
FUZZ_COUNT: set = set()          # distinct bad inputs tried by this file (printed by test_zz_report_count)
FUZZ_COUNT.update(("coord-check", f, v) for f, _, v in CASES)

USER = '''
import numpy as np
import torch
from torch import nn
g = torch.Generator().manual_seed(0)
X8, Y2 = torch.randn(8, 8, generator=g), torch.randn(8, 2, generator=g)

def none(): return None
def text(): return "hello", "world"
def text_y(): return X8, "labels"
def raw_bytes(): return b"abc"
def three(): return X8, Y2, 3
def one(): return (X8,)
def keys(): return {"x": X8, "y": Y2}
def features(): return torch.randn(8, 5), Y2
def int_x(): return torch.randint(0, 4, (8, 8)), Y2
def int_both(): return torch.randint(0, 4, (8, 8)), torch.randint(0, 4, (8, 2))
def y_shape(): return X8, torch.randn(8, 3)
def y_rows(): return X8, torch.randn(7, 2)
def y_int_count(): return X8, torch.randint(0, 2, (8, 2))
def y_int_range(): return X8, torch.randint(5, 9, (8,))
def y_negative_class(): return X8, -torch.ones(8, dtype=torch.int64)
def x_nan(): return torch.full((8, 8), float("nan")), Y2
def y_inf(): return X8, torch.full((8, 2), float("inf"))
def y_huge(): return X8, torch.full((8, 2), 1e30)
def x_huge(): return torch.full((8, 8), 1e300, dtype=torch.float64), Y2
def objects(): return np.array([object()] * 8), Y2
def ragged(): return [[1.0, 2.0], [3.0]], Y2
def complex_x(): return X8.to(torch.complex64), Y2
def bool_x(): return X8 > 0, Y2
def no_rows(): return torch.zeros(0, 8), torch.zeros(0, 2)
def scalar(): return torch.tensor(1.0), torch.tensor(2.0)
def generator(): return (x for x in range(2))
def float_ids(): return torch.randn(4, 8), torch.randn(4, 16)
def ids_range(): return torch.randint(16, 40, (4, 8)), torch.randn(4, 16)
def ids_negative(): return -torch.ones(4, 8, dtype=torch.int64), torch.randn(4, 16)
def numpy_strings(): return np.array(["a"] * 8), Y2
def test_wrong(): return {"train": (X8, Y2), "test": (torch.randn(8, 3), Y2)}
def test_y_wrong(): return {"train": (X8, Y2), "test": (X8, torch.randn(8, 5))}
def test_none(): return {"train": (X8, Y2), "test": None}
def train_missing(): return {"test": (X8, Y2)}
def extra_key(): return {"train": (X8, Y2), "valid": (X8, Y2)}

def nan_mlp(width):
    m = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 2))
    with torch.no_grad():
        m[2].weight[0, 0] = float("nan")
    return m
'''

MLP = "limits.torch.demos:mlp"
TRANSFORMER = "limits.torch.demos:transformer"
DATA_CASES = [(MLP, f) for f in ("none", "text", "text_y", "raw_bytes", "three", "one", "keys", "features", "int_x",
                                 "int_both", "y_shape", "y_rows", "y_int_count", "y_int_range", "y_negative_class",
                                 "x_nan", "y_inf", "y_huge", "x_huge", "objects", "ragged", "complex_x", "bool_x",
                                 "no_rows", "scalar", "generator", "numpy_strings")]
DATA_CASES += [(TRANSFORMER, f) for f in ("float_ids", "ids_range", "ids_negative")]
DATA_CASES += [(MLP, "limits.torch.demos:transformer_data"), (TRANSFORMER, "limits.torch.demos:mlp_data"),
               ("limits.torch.transfer_demos:digits_mlp", "limits.torch.demos:mlp_data"),
               (MLP, "limits.torch.transfer_demos:digits_data")]              # two of limits' own demos combined
TRANSFER_ONLY = ["test_wrong", "test_y_wrong", "test_none", "train_missing", "extra_key"]


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """The current folder holds the user's module ``baddata``; training fails the test if it starts."""
    import limits.torch.coordcheck as cc
    import limits.torch.transfer_study as ts

    (tmp_path / "baddata.py").write_text(USER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def no_training(*a, **k):
        raise AssertionError("training started although the data are bad")

    monkeypatch.setattr(cc, "run_one", no_training)
    monkeypatch.setattr(ts.TrainRun, "__call__", no_training)
    yield tmp_path


def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def progress_line(ln):
    """A line of the commands' progress reports (limits.torch.progress_lines), printed before any error."""
    return ln.startswith(("coord-check", "transfer"))


def _one_error(rc, err, *names):
    assert rc == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not progress_line(ln)]
    assert len(lines) == 1 and lines[0].startswith("limits: error: "), err
    assert any(n in lines[0] for n in names), lines[0]
    return lines[0]


def _data_opt(name):
    return name if ":" in name else f"baddata:{name}"


@pytest.mark.parametrize("factory,data", DATA_CASES, ids=[f"{f.split(':')[1]}-{d}" for f, d in DATA_CASES])
def test_bad_data_coord_check_exits_2_before_training(factory, data, user_folder, capsys):
    FUZZ_COUNT.add(("coord-check --data", factory, data))
    rc, out, err = _cli(["coord-check", "--factory", factory, "--param", "muP", "--widths", "4", "8", "16", "--seeds",
                         "2", "--steps", "1", "--data", _data_opt(data), "--allow", "baddata"], capsys)
    _one_error(rc, err, "--data", "factory(")


TRANSFER_CASES = [(f, d) for f, d in DATA_CASES if f == MLP or ":" in d] + [(MLP, d) for d in TRANSFER_ONLY]


@pytest.mark.parametrize("factory,data", TRANSFER_CASES, ids=[f"{f.split(':')[1]}-{d}" for f, d in TRANSFER_CASES])
def test_bad_data_transfer_exits_2_before_training(factory, data, user_folder, capsys):
    FUZZ_COUNT.add(("transfer --data", factory, data))
    rc, out, err = _cli(["transfer", "--factory", factory, "--param", "muP", "--widths", "4", "8", "16", "--seeds", "2",
                         "--steps", "1", "--lrs", "1e-3", "1e-2", "1e-1", "--no-calibrate", "--data", _data_opt(data),
                         "--allow", "baddata"], capsys)
    _one_error(rc, err, "--data")


@pytest.mark.parametrize("size", ["33", "100000000000"])
def test_batch_size_beyond_the_rows_exits_2(size, user_folder, capsys):
    FUZZ_COUNT.add(("transfer --batch-size", size))
    rc, out, err = _cli(["transfer", "--factory", MLP, "--param", "muP", "--widths", "4", "8", "16", "--seeds", "2",
                         "--steps", "1", "--lrs", "1e-3", "1e-2", "1e-1", "--no-calibrate", "--data",
                         "limits.torch.demos:mlp_data", "--batch-size", size], capsys)
    assert "--batch-size" in _one_error(rc, err, "--batch-size") and "32 training rows" in err


@pytest.mark.parametrize("command", ["coord-check", "transfer"])
def test_nan_parameter_is_named_not_called_dropout(command, user_folder, capsys):
    FUZZ_COUNT.add((command, "--factory", "NaN parameter"))
    extra = (["--as-is", "--expect", "muP"] if command == "coord-check" else
             ["--param", "muP", "--lrs", "1e-3", "1e-2", "1e-1", "--no-calibrate"])
    rc, out, err = _cli([command, "--factory", "baddata:nan_mlp", "--allow", "baddata", "--widths", "4", "8", "16",
                         "--seeds", "2", "--steps", "1", *extra], capsys)
    line = _one_error(rc, err, "'2.weight'")
    assert "NaN" in line and "dropout" not in line


def test_api_names_its_argument(user_folder):
    """The Python API runs the same validation, naming its own arguments."""
    import limits.torch as lt
    from limits.torch import demos

    FUZZ_COUNT.update({("api", "coord_check", "data str"), ("api", "transfer", "held_out"),
                       ("api", "transfer", "batch_size")})
    X, Y = demos.mlp_data()
    with pytest.raises(ValueError, match=r"^data: X is text"):
        lt.coord_check(demos.mlp, (4, 8, 16), ("a", "b"), expect="muP", seeds=2, steps=1)
    with pytest.raises(ValueError, match=r"^held_out: factory\(4\) fails on X of shape \(32, 3\)"):
        lt.transfer(demos.mlp, "muP", widths=(4, 8, 16), lrs=(1e-3, 1e-2, 1e-1), data=(X, Y), held_out=(X[:, :3], Y),
                    steps=1, seeds=2, calibrate=False)
    with pytest.raises(ValueError, match=r"^batch_size 33 exceeds the 32 training rows"):
        lt.transfer(demos.mlp, "muP", widths=(4, 8, 16), lrs=(1e-3, 1e-2, 1e-1), data=(X, Y), batch_size=33, steps=1,
                    seeds=2, calibrate=False)


def test_nan_parameter_at_a_larger_width_is_named():
    """NaN only beyond the smallest width (after the data check): the run names the tensor, not dropout."""
    import limits.torch as lt
    from torch import nn

    FUZZ_COUNT.add(("api", "coord_check", "NaN parameter at width 16"))

    def f(width):
        m = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 2))
        if width > 8:
            with torch.no_grad():
                m[2].weight[0, 0] = float("nan")
        return m

    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"parameter '2.weight' \(1 NaN, 0 ±inf\) not finite") as e:
        lt.coord_check(f, (8, 16, 32), (torch.randn(16, 8, generator=g), torch.randn(16, 2, generator=g)),
                       expect="muP", seeds=2, steps=1)
    assert "dropout" not in str(e.value)


def zero_mlp(width):
    """Every weight and bias 0: only the read-out's bias gets a gradient (issue 42: passed with every row "—")."""
    from torch import nn

    m = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 2))
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
    return m


def test_no_verdict_without_a_measurement_coord_check(monkeypatch, capsys):
    """Rows that never change, or runs that diverge, give no pass: exit 1 with the reason."""
    import limits.torch as lt
    from limits.torch import demos

    FUZZ_COUNT.update({("coord-check", "measurement", "all-zero weights"), ("coord-check", "measurement", "diverged")})
    r = lt.coord_check(zero_mlp, (4, 8, 16), demos.mlp_data(), expect="muP", seeds=2, steps=1)
    names = [n.split(" (")[0] for n, _ in r.unmeasured()]
    assert not r.passed and not r.failures() and names == ["0.weight", "0.bias", "0", "2.weight", "2.bias", "2",
                                                           "4.weight"]
    assert r.summary().startswith("No verdict without a measurement: 7 judged rows or tensors") and "**no change**" in r.to_markdown()
    r = lt.coord_check(demos.mlp, (4, 8, 16), demos.mlp_data(), expect="SP", optimizer="sgd", lr=1e30, seeds=2,
                       steps=2)
    assert not r.passed and "training diverged (non-finite loss) at width 4 in 2 of 2 seeds, from step 2" in r.summary()
    monkeypatch.setattr(sys.modules[__name__], "zero_mlp", zero_mlp, raising=False)
    rc = main(["coord-check", "--factory", "limits.torch.demos:mlp", "--as-is", "--expect", "SP", "--optimizer",
               "sgd", "--lr", "1e30", "--widths", "4", "8", "16", "--seeds", "2", "--steps", "2"])
    assert rc == 1 and "No verdict without a measurement" in capsys.readouterr().out


def test_a_detached_weight_without_a_row_is_reported():
    """A weight used through F.linear, detached: its Linear is never called (no row) and it never changes."""
    import limits.torch as lt
    from limits.torch import demos
    from torch import nn

    class Detached(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.a, self.h, self.o = nn.Linear(8, width), nn.Linear(width, width), nn.Linear(width, 2)

        def forward(self, x):
            z = torch.tanh(nn.functional.linear(torch.tanh(self.a(x)), self.h.weight.detach(), self.h.bias))
            return self.o(z)

    FUZZ_COUNT.add(("coord-check", "measurement", "detached weight, module never called"))
    r = lt.coord_check(Detached, (4, 8, 16), demos.mlp_data(), expect="muP", seeds=2, steps=1, progress=False)
    assert not r.passed and [n for n, _ in r.unmeasured()] == ["h.weight"]       # h.bias changes: not reported
    assert "never changed, and no row of its own" in r.summary()


def test_untrained_tensors_are_exempt_and_a_correct_module_is_measured():
    import limits.torch as lt
    from limits.torch import demos

    def frozen_first(width):
        m = demos.mlp(width)
        m[0].weight.requires_grad_(False)
        return m

    r = lt.coord_check(frozen_first, (4, 8, 16), demos.mlp_data(), expect="muP", seeds=2, steps=1)
    assert r.unmeasured() == [] and r.settings["untrained_rows"]
    assert lt.coord_check(demos.mlp, (4, 8, 16), demos.mlp_data(), expect="muP", seeds=2, steps=1).unmeasured() == []


def test_no_verdict_without_a_measurement_transfer():
    import limits.torch as lt
    from limits.torch import demos

    FUZZ_COUNT.update({("transfer", "measurement", "all-zero weights"), ("transfer", "measurement", "all diverged")})
    kw = dict(widths=(4, 8, 16), data=demos.mlp_data(), steps=2, seeds=2, calibrate=False, progress=False)
    r = lt.transfer(zero_mlp, "muP", lrs=(1e-3, 1e-2, 1e-1), **kw)
    assert r.verdict == "inconclusive" and not r.passed and r.verdict_reason.startswith(
        "no measurement: at widths 4, 8, 16 every run left 5 or more trained tensors unchanged (e.g. '0.weight'")
    r = lt.transfer(demos.mlp, "SP", optimizer="sgd", lrs=(1e30, 1e31, 1e32), **kw)
    assert r.verdict == "inconclusive" and "every run diverged at widths 4, 8, 16" in r.verdict_reason
    from limits.torch.transfer_study import reanalyse

    assert reanalyse(r).verdict_reason == r.verdict_reason


def test_import_state_dict_never_loads_part_of_a_bad_checkpoint(monkeypatch):
    """A bad last value (issue 42: 5 of 6 tensors were overwritten before the error) leaves every tensor as it was;
    so does a load that fails half-way for any other reason."""
    import numpy as np

    from limits.torch import demos, parameterise

    P = parameterise(demos.mlp, "muP", widths=(32, 64))
    sd = P.export_state_dict(P(64, seed=1))
    last = list(sd)[-1]
    bad = {"ndarray": sd[last].numpy(), "complex": sd[last].to(torch.complex64), "str": "abc",
           "NaN": sd[last] * float("nan"), "int64": sd[last].long(), "bool": sd[last] > 0, "list": [0.0, 0.0],
           "ndarray object": np.array([object(), object()])}
    for kind, value in bad.items():
        FUZZ_COUNT.add(("api", "import_state_dict", kind))
        net = P(64, seed=0)
        before = {k: v.clone() for k, v in net.state_dict().items()}
        with pytest.raises(ValueError, match=rf"^import_state_dict: nothing loaded — {last}: "):
            P.import_state_dict(net, {**sd, last: value})
        assert all(torch.equal(before[k], v) for k, v in net.state_dict().items()), kind
    FUZZ_COUNT.add(("api", "import_state_dict", "fails half-way"))
    net = P(64, seed=0)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    real = type(net).load_state_dict
    calls = []

    def half(self, state, strict=True):
        calls.append(1)
        if len(calls) == 1:                     # write the first tensor, then fail
            with torch.no_grad():
                next(iter(self.parameters())).add_(1.0)
            raise RuntimeError("disk went away")
        return real(self, state, strict=strict)

    monkeypatch.setattr(type(net), "load_state_dict", half)
    with pytest.raises(RuntimeError, match="disk went away"):
        P.import_state_dict(net, sd)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_equivalent_at_64_draws_accepts_the_correct_modules_it_refused():
    """Issue 42: equivalent(max_draws=64) refused 2 of 20 correct modules (seeds 0 and 8: the fourth moment's
    z with a sample SE, ~28× its nominal size at n ≈ 450). The calibrated statistics accept them and still refuse
    a uniform init at the same draws (tests/torch_bridge/test_torch_equivalence.py)."""
    import importlib.util
    from pathlib import Path

    from limits.torch import equivalent

    spec = importlib.util.spec_from_file_location("_teq", Path(__file__).with_name("test_torch_equivalence.py"))
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    for seed in (0, 8):
        FUZZ_COUNT.add(("api", "equivalent max_draws=64", seed))
        equivalent(t.UserMLP, t.MODEL, widths=(16, 32, 64), seed=seed, max_draws=64)


@pytest.mark.parametrize("seed", ["18446744073709551616", "9223372036854775807"])
def test_a_seed_beyond_64_bits_names_the_option(seed, capsys):
    """--seed 2^64 was "Overflow when unpacking long long" (no option named)."""
    FUZZ_COUNT.add(("coord-check", "--seed", seed))
    rc, out, err = _cli(["coord-check", "--factory", MLP, "--param", "muP", "--widths", "4", "8", "16", "--seeds", "2",
                         "--steps", "1", "--seed", seed], capsys)
    assert "must lie in [0, " in _one_error(rc, err, "--seed")
    import limits.torch as lt
    from limits.torch import demos

    with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, "):
        lt.coord_check(demos.mlp, (4, 8, 16), demos.mlp_data(), expect="muP", seed=int(seed), seeds=2, steps=1)


def test_zz_report_count(capsys):
    """Prints how many distinct bad inputs this file tried (run with -s; it runs last in the file)."""
    with capsys.disabled():
        print(f"\ntorch fuzz: {len(FUZZ_COUNT)} distinct bad inputs tried")
    assert len(FUZZ_COUNT) >= len(CASES)


# ------------------------------------------------------------------ progress lines (issue 41 item 5)
def test_coord_check_says_what_starts_before_importing_anything_then_reports_runs(monkeypatch, capsys):
    """The first stderr line is printed before the factory is resolved (so before torch or the user's module is
    imported: within a second or two); then a start line and periodic lines over the training runs."""
    import limits.torch.resolve as res

    seen = []
    real = res.resolve_factory
    monkeypatch.setattr(res, "resolve_factory", lambda *a, **k: (seen.append(capsys.readouterr().err), real(*a, **k))[1])
    monkeypatch.setenv("LIMITS_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    rc = main(["coord-check", "--factory", MLP, "--param", "muP", "--widths", "4", "8", "16", "--seeds", "2",
               "--steps", "1"])
    err = capsys.readouterr().err
    assert rc in (0, 1) and seen[0].startswith("coord-check: limits.torch.demos:mlp under muP: widths 4…16, 2 seeds × 1 "
                                          "step(s) = 6 training runs")
    assert "coord-check: applying muP" in err and "coord-check: 6 training runs started" in err
    assert "coord-check width 16: 6/6 (100%)" in err
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    main(["coord-check", "--factory", MLP, "--param", "muP", "--widths", "4", "8", "16", "--seeds", "2", "--steps", "1"])
    assert capsys.readouterr().err == ""


def test_transfer_reports_its_stages(monkeypatch, capsys):
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    rc = main(["transfer", "--factory", MLP, "--data", "limits.torch.demos:mlp_data", "--param", "muP", "--widths",
               "4", "8", "16", "--lrs", "1e-3", "1e-2", "1e-1", "--seeds", "2", "--steps", "1"])
    err = capsys.readouterr().err.splitlines()
    assert rc in (0, 1)
    assert err[0] == ("transfer: limits.torch.demos:mlp under muP: widths 4…16, 3 learning rates × 2 seeds × 1 steps = "
                      "18 training runs, then the calibration of the verdict")
    assert any(ln.startswith("transfer muP: 18 training runs of 1 steps started") for ln in err)
    assert any(ln.startswith("transfer: calibrating the verdict (200 simulated studies") for ln in err)
