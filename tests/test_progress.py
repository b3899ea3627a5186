"""Progress reports: a bar on a terminal, periodic plain lines otherwise, silence on request."""
import io

import pytest

from limits.progress import LineProgress, progress


def test_periodic_lines_when_not_a_terminal(monkeypatch):
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    buf = io.StringIO()
    items = list(LineProgress(range(5), desc="work", interval=0.0, stream=buf))
    assert items == list(range(5))
    lines = buf.getvalue().strip().splitlines()
    assert lines[0].startswith("work: 1/5 (20%)") and "ETA" in lines[0]
    assert lines[-1].startswith("work: 5/5 (100%)")
    assert sum(x.startswith("work: 5/5") for x in lines) == 1          # the final count is printed once


def test_a_final_line_only_when_the_last_one_is_behind():
    buf = io.StringIO()
    bar = LineProgress(total=4, desc="y", interval=0.0, stream=buf)
    bar.update(2)
    bar.interval = 3600.0
    bar.update(2)
    bar.close()
    assert buf.getvalue().strip().splitlines()[-1].startswith("y: 4/4 (100%)")


def test_quiet_until_the_interval_and_silenced_by_env(monkeypatch):
    buf = io.StringIO()
    bar = LineProgress(total=3, desc="x", interval=3600.0, stream=buf)
    bar.update(3)
    bar.close()
    assert buf.getvalue() == ""
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    assert progress(range(3)).disable
    monkeypatch.delenv("LIMITS_PROGRESS")
    assert isinstance(progress(range(3)), LineProgress)      # pytest's stderr is not a terminal


def test_layer_range_reports_long_recursions(monkeypatch, capsys):
    from limits import interrupts, progress as prog

    assert isinstance(prog.layer_range(5), range) and list(prog.layer_range(5)) == [1, 2, 3, 4, 5]
    monkeypatch.setenv("LIMITS_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    L = prog.LONG_RECURSION + 1234
    assert list(prog.layer_range(L, "layers", every=1000)) == list(range(1, L + 1))
    err = capsys.readouterr().err
    assert f"layers: {L}/{L} (100%)" in err and "layers: 1000/" in err
    monkeypatch.setattr(interrupts, "_SEEN", [2])          # a recorded Ctrl-C stops it at the next report
    with pytest.raises(KeyboardInterrupt):
        for _ in prog.layer_range(L, "layers", every=1000):
            pass


def test_long_nngp_recursion_reports_its_progress(monkeypatch, capsys):
    import numpy as np

    import limits
    from limits import progress as prog

    X = np.random.default_rng(0).standard_normal((3, 4))
    ref = limits.kernels.nngp(X, depth=60, keep="last")              # below the threshold: a plain range
    monkeypatch.setenv("LIMITS_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    monkeypatch.setattr(prog, "LONG_RECURSION", 50)
    capsys.readouterr()
    r = limits.kernels.nngp(X, depth=60, keep="last")
    assert "NNGP/NTK layers: 60/60 (100%)" in capsys.readouterr().err
    np.testing.assert_array_equal(r.K_out, ref.K_out)
