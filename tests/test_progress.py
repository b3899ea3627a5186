"""Progress reports: a bar on a terminal, periodic plain lines otherwise, silence on request."""
import io
import re

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


# ---------------------------------------------------------------------------------------- the first line
def _wait_for(cond, timeout=20.0):
    """Poll ``cond`` (the heartbeat thread prints on its own schedule) until it holds or ``timeout`` passes."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_first_line_within_seconds_even_while_one_step_runs():
    """A report open longer than `first` prints a line from the heartbeat, before any step has finished."""
    buf = io.StringIO()
    bar = LineProgress(total=4, desc="slow", interval=3600.0, stream=buf, first=0.3)
    assert _wait_for(lambda: "slow: 0/4 (0%)" in buf.getvalue())
    bar.update(1)
    bar.close()
    assert buf.getvalue().splitlines()[-1].startswith("slow: 1/4 (25%)")     # the final line


def test_stage_is_silent_when_short_and_says_how_long_when_long(monkeypatch, capsys):
    from limits.progress import stage

    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    monkeypatch.setenv("LIMITS_PROGRESS_FIRST", "0.3")
    with stage("quick"):
        pass
    assert capsys.readouterr().err == ""
    seen = []
    with stage("theory"):
        assert _wait_for(lambda: seen.append(capsys.readouterr().err) or "theory: " in "".join(seen))
    err = "".join(seen) + capsys.readouterr().err
    # the first line is due after 0.3 s; under load (20 processes on 2 cores) its thread may run a second late
    assert re.search(r"^theory: \d+s elapsed$", err, re.M) and err.strip().splitlines()[-1].startswith("theory: done in")
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    with stage("silenced") as s:
        assert s is None


def test_only_the_innermost_report_speaks_on_time(monkeypatch):
    from limits.progress import HEARTBEAT, stage

    buf = io.StringIO()
    monkeypatch.setenv("LIMITS_PROGRESS_FIRST", "0.2")
    monkeypatch.setenv("LIMITS_PROGRESS_INTERVAL", "0.5")
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    with stage("outer") as outer:
        outer.stream = buf
        for i in range(3):                    # short reports opening and closing inside do not delay the first line
            LineProgress(total=1, desc=f"quick{i}", stream=buf).close()
        # its own first-line delay is an hour: the line comes from the outermost report's schedule
        inner = LineProgress(total=2, desc="inner", interval=3600.0, stream=buf, first=3600.0)
        assert HEARTBEAT.innermost() is inner
        assert _wait_for(lambda: "inner: 0/2" in buf.getvalue())
        inner.close()
        assert "outer" not in buf.getvalue() and "quick" not in buf.getvalue()
        assert _wait_for(lambda: "outer: " in buf.getvalue())               # the outer one once inner is done


def test_the_heartbeat_ends_and_dropped_reports_go_quiet():
    import gc
    import threading

    from limits.progress import HEARTBEAT

    buf = io.StringIO()
    LineProgress(total=3, desc="dropped", stream=buf, first=0.2)           # never closed, nobody keeps it
    gc.collect()
    assert HEARTBEAT.innermost() is None
    assert _wait_for(lambda: not any(t.name == "limits-progress" for t in threading.enumerate()))
    assert "dropped" not in buf.getvalue()


def test_a_forked_child_starts_without_the_parents_heartbeat():
    """A process forked while another thread holds the heartbeat's lock (as the heartbeat thread may) reports
    normally: the child starts with a heartbeat of its own (os.register_at_fork)."""
    import os
    import signal
    import threading

    from limits.progress import HEARTBEAT

    held, release = threading.Event(), threading.Event()

    def holder():
        with HEARTBEAT._lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(30)
    pid = os.fork()
    if pid == 0:                                       # the child: a new report must not wait on the copied lock
        signal.signal(signal.SIGALRM, lambda *_: os._exit(5))
        signal.alarm(20)
        try:
            child = LineProgress(total=1, desc="child", stream=io.StringIO())
            child.update(1)
            child.close()
            os._exit(0 if HEARTBEAT.innermost() is None else 3)
        except BaseException:
            os._exit(4)
    release.set()
    t.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0      # 5: the child hung on the parent's lock
