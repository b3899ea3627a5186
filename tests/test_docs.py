"""The Sphinx site under docs/ builds with warnings as errors, and its generated pages (CLI reference,
gallery) cover every command and every stored figure (skipped without sphinx)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def limits_docs():
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import limits_docs
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    return limits_docs


def _all_prog_names(parser, limits_docs):
    names = [parser.prog]
    for _, _, sub in limits_docs._subcommands(parser):
        names += _all_prog_names(sub, limits_docs)
    return names


def test_cli_reference_covers_every_command(limits_docs):
    from limits.cli import build_parser

    parser = build_parser()
    text = "\n".join(limits_docs.cli_reference_lines(parser))
    progs = _all_prog_names(parser, limits_docs)
    assert len(progs) > 30 and "limits nfd gia-limit" in progs and "limits dmft seed000" in progs
    for prog in progs[1:]:
        assert f"\n{prog}\n" in text, f"no section for {prog}"
        assert f"usage: {prog} " in text, f"no --help text for {prog}"
    # reproducible: the help text does not depend on the terminal width
    assert text == "\n".join(limits_docs.cli_reference_lines(parser))


def test_gallery_lists_every_stored_figure_with_its_caption(limits_docs, tmp_path):
    entries = limits_docs.gallery_entries()
    stored = {p.stem for p in (ROOT / "figures").glob("*.json") if p.with_suffix(".png").is_file()
              and "figure" in json.loads(p.read_text())}
    assert stored and {e["figure"] for e in entries} >= stored
    text = "\n".join(limits_docs.gallery_lines(ROOT / "docs"))
    for e in entries:
        assert f".. figure:: ../figures/{'full/' if e['variant'] == 'paper size' else ''}{e['figure']}.png" in text
    # captions are escaped: reST markup characters in a caption stay literal text
    (tmp_path / "x.png").write_bytes(b"")
    (tmp_path / "x.json").write_text(json.dumps({"figure": "x", "component": "nfd", "quick": True,
                                                 "caption": "a *b* `c` |d| e_ [1]", "seed_ref": "seed 002 §5"}))
    lines = limits_docs.gallery_lines(tmp_path, figdir=tmp_path)
    assert "   a \\*b\\* \\`c\\` \\|d\\| e\\_ \\[1\\]" in lines
    assert any("limits figure x --quick" in ln and "Source: seed 002 §5." in ln for ln in lines)


@pytest.mark.slow
def test_sphinx_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E", str(ROOT / "docs"),
                           str(tmp_path / "html")], capture_output=True, text=True, cwd=ROOT,
                          timeout=3600)      # ~2 CPU-min; a bound for a hang on a loaded machine
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not re.search(r"WARNING|ERROR", proc.stderr), proc.stderr[-3000:]
    html = tmp_path / "html"
    pc = (html / "theory" / "pc.html").read_text()
    assert "27" in pc and "Dyson" in pc
    api = (html / "api.html").read_text()
    assert "euler_maruyama" in api and "KernelODE" in api          # valid reST, back on the API page
    cli = (html / "cli.html").read_text()
    assert 'id="limits-nfd-gia-limit"' in cli and "usage: limits sweep run" in cli
    gallery = (html / "gallery.html").read_text()
    assert gallery.count("<img") >= len(list((ROOT / "figures").glob("*.png"))) > 0
    import limits

    assert limits.__version__ in (html / "citing.html").read_text()
