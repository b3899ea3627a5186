"""Progress reports: a bar on a terminal, periodic plain lines otherwise, silence on request."""
import io

from limits.progress import LineProgress, progress


def test_periodic_lines_when_not_a_terminal(monkeypatch):
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    buf = io.StringIO()
    items = list(LineProgress(range(5), desc="work", interval=0.0, stream=buf))
    assert items == list(range(5))
    lines = buf.getvalue().strip().splitlines()
    assert lines[0].startswith("work: 1/5 (20%)") and "ETA" in lines[0]
    assert lines[-1].startswith("work: 5/5 (100%)")


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
