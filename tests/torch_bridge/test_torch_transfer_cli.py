"""`limits transfer`: exit 0 when the verdict is the predicted one, 1 when it is not or is undecided, 2 with one
`limits: error:` line on bad input (checked before torch or the user's module is imported); --out writes the
result, its Markdown and its figure; hostile option values never give a traceback."""
import argparse

import pytest

torch = pytest.importorskip("torch")

from limits.cli import build_parser, main  # noqa: E402
from limits.torch.transfer_result import TransferResult  # noqa: E402

DEMO = ["--factory", "limits.torch.transfer_demos:digits_mlp", "--data", "limits.torch.transfer_demos:digits_data"]
BASE = DEMO + ["--param", "muP", "--widths", "8", "16", "32", "--log2-lrs", "-8", "-4", "2", "--seeds", "2",
               "--steps", "1", "--no-calibrate"]


def _without(argv, flag):
    """``argv`` with the option ``flag`` and its values removed."""
    if flag not in argv:
        return list(argv)
    i = argv.index(flag)
    j = i + 1
    while j < len(argv) and not argv[j].startswith("--"):
        j += 1
    return argv[:i] + argv[j:]


def _run(argv, capsys):
    try:
        rc = main(["transfer", *argv])
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("change, message", [
    (["--widths", "8", "16"], "at least 3 distinct sizes"),
    (["--log2-lrs", "-4", "-8", "1"], "--log2-lrs"),
    (["--seeds", "1"], "--seeds"),
    (["--param", "XP"], "--param"),
    (["--margin", "0"], "--margin"),
    (["--diverge", "1"], "--diverge"),
    (["--scheduler", "tcp://x:1"], "--scheduler needs --backend dask"),
    (["--depths", "2", "4", "8"], "one --widths value"),
    (["--factory", "os:system"], "cannot be allowed"),
    (["--allow", "limits.torch.transfer_demos"], "limits itself"),       # limits' own demos need no --allow
    (["--data", "limits.torch.demos:mlp"], "--data"),                    # a factory is not a data function
])
def test_bad_input_exits_2_with_one_line(change, message, capsys):
    rc, out, err = _run(_without(BASE, change[0]) + change, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("transfer")]     # progress lines
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("limits: error:") and message in lines[0], err


def test_undecided_study_exits_1_and_out_writes_the_result(capsys, tmp_path):
    """One step: the largest rate is best at every width, the optimum sits on the grid's edge — undecided."""
    rc, out, err = _run(BASE + ["--out", str(tmp_path / "o")], capsys)
    assert rc == 1, err
    assert "inconclusive" in out and "edge of the learning-rate grid" in out
    r = TransferResult.load(tmp_path / "o" / "transfer")
    assert r.verdict == "inconclusive" and r.as_predicted == -1
    assert (tmp_path / "o" / "transfer").with_suffix(".md").read_text() == r.to_markdown()
    assert (tmp_path / "o" / "transfer.png").stat().st_size > 10_000


@pytest.mark.slow
def test_mup_digits_exits_0(capsys, tmp_path):
    argv = DEMO + ["--param", "muP", "--widths", "32", "64", "128", "256", "--log2-lrs", "-12", "-4", "1",
                   "--seeds", "3", "--steps", "40", "--batch-size", "64", "--store", str(tmp_path / "s")]
    rc, out, err = _run(argv, capsys)
    assert rc == 0, out + err
    assert "**transfers**" in out and "as predicted: yes" in out
    rc2, out2, _ = _run(argv, capsys)                      # every run reused from the store, same answer
    assert rc2 == 0 and out2.split("CPU")[1] == out.split("CPU")[1]


def _options():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["transfer"]
    for a in sub._actions:
        if a.option_strings and a.nargs not in (0,) and a.dest not in ("help", "out_dir", "store"):
            yield max(a.option_strings, key=len), a


HOSTILE = {int: ["0", "-1", "abc", "1e9"], float: ["nan", "inf", "-1", "abc"], None: ["", "x" * 300, "a:b:c"]}


@pytest.mark.parametrize("flag, action", list(_options()), ids=[f for f, _ in _options()])
def test_hostile_values_never_give_a_traceback(flag, action, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = ["nope", ""] if action.choices else HOSTILE.get(action.type, HOSTILE[None])
    for v in values:
        n = action.nargs if isinstance(action.nargs, int) else 1
        rc, out, err = _run(_without(BASE, flag) + [flag] + [v] * n, capsys)
        assert rc in (0, 1, 2), (flag, v, err)
        assert "Traceback" not in err and "internal error" not in err, (flag, v, err)


USER = """
import numpy as np
import torch


def net(width):
    return torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))


def task():
    g = np.random.default_rng(0)
    X = g.standard_normal((32, 3))
    return X, X.sum(1, keepdims=True)


def broken():
    raise RuntimeError("no data today")
"""


def test_a_users_module_from_the_current_folder_and_its_errors(capsys, tmp_path, monkeypatch):
    """The same resolver as coord-check: --allow a module in the current folder; its failure is one line naming it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "usernets.py").write_text(USER)
    argv = ["--factory", "usernets:net", "--allow", "usernets", "--param", "muP", "--widths", "8", "16", "32",
            "--log2-lrs", "-8", "-4", "2", "--seeds", "2", "--steps", "1", "--no-calibrate"]
    rc, out, err = _run(argv + ["--data", "usernets:task"], capsys)
    assert rc in (0, 1) and "μTransfer — muP" in out, err
    rc, out, err = _run(argv + ["--data", "usernets:broken"], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("transfer")]     # progress lines
    assert rc == 2 and len(lines) == 1 and "--data usernets:broken failed" in lines[0] and "no data today" in lines[0], err
    rc, out, err = _run([a for a in argv if a not in ("--allow", "usernets")] + ["--data", "usernets:task"], capsys)
    assert rc == 2 and "--allow" in err, err
