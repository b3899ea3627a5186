"""The Sphinx site under docs/ builds with warnings as errors (slow; skipped without sphinx)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_sphinx_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E", str(ROOT / "docs"),
                           str(tmp_path / "html")], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = (tmp_path / "html" / "theory" / "pc.html").read_text()
    assert "27" in html and "Dyson" in html
    assert (tmp_path / "html" / "api.html").exists()
