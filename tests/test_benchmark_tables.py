"""benchmarks/_tables.py: the ``--table``/``--write`` of the validation scripts (print the table from the committed
data; write it between the markers of its page), and each script's ``--write`` leaves its committed page as it is
(the page already holds the table its data give; run here on a copy of the page)."""
import argparse
import json
import shutil

import pytest

from benchmark_scripts import ROOT, load


@pytest.fixture
def tables(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import _tables

    return _tables


def _page(tmp_path, body="old\n"):
    page = tmp_path / "page.rst"
    page.write_text(f"head\n.. t:begin\n{body}.. t:end\ntail\n")
    return page


def _args(tables, argv, show="--table"):
    ap = argparse.ArgumentParser()
    tables.add_table_options(ap, show, "print it", "write it")
    return ap.parse_args(argv), ap.format_help()


def test_show_prints_and_write_replaces_the_marked_block(tables, tmp_path, capsys):
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"x": [1, 2]}))
    page = _page(tmp_path)
    text = lambda d: [f"| {v} |" for v in d["x"]]  # noqa: E731
    a, helptext = _args(tables, [])
    assert "--table     print it" in helptext and "--write     write it" in helptext
    assert tables.show_or_write(a, data, page, (".. t:begin", ".. t:end"), text) is False
    assert capsys.readouterr().out == "" and "old" in page.read_text()
    a, _ = _args(tables, ["--table"])
    assert tables.show_or_write(a, data, page, (".. t:begin", ".. t:end"), text) is True
    assert capsys.readouterr().out == "| 1 |\n| 2 |\n" and "old" in page.read_text()
    a, _ = _args(tables, ["--write"])
    assert tables.show_or_write(a, data, page, (".. t:begin", ".. t:end"), text) is True
    assert page.read_text() == "head\n.. t:begin\n\n| 1 |\n| 2 |\n\n.. t:end\ntail\n"  # default: blank lines around
    tables.show_or_write(a, data, page, (".. t:begin", ".. t:end"), text, block=lambda d: ["::", "", "    x"])
    assert page.read_text() == "head\n.. t:begin\n::\n\n    x\n.. t:end\ntail\n"
    with pytest.raises(SystemExit, match="no '.. u:begin'"):
        tables.show_or_write(a, data, page, (".. u:begin", ".. u:end"), text)


def test_write_only_and_rows_options(tables, tmp_path):
    ap = argparse.ArgumentParser()
    tables.add_table_options(ap, None, write_help="write it")
    a = ap.parse_args([])
    assert not hasattr(a, "table")
    assert tables.show_or_write(a, tmp_path / "none.json", None, None, str, show=None) is False
    a, _ = _args(tables, ["--rows"], show="--rows")
    assert a.rows and not a.write


SCRIPTS = {"edge_numerics": "DOC", "relu_singular_moments": "DOC", "bench_k1_compositions": "DOC",
           "check_calibration": "PAGE", "coordcheck_calibration": "PAGE", "torch_suite_calibration": "DOC",
           "torch_property": "DOC", "mup_coordcheck": "PAGE"}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_scripts_write_leaves_its_committed_page_unchanged(name, tables, tmp_path, monkeypatch, capsys):
    m = load(name)
    page = getattr(m, SCRIPTS[name])
    copy = tmp_path / page.name
    shutil.copyfile(page, copy)
    text = copy.read_text()
    begin = text.index(m.BEGIN) + len(m.BEGIN)
    copy.write_text(text[:begin] + "\nstale\n" + text[text.index(m.END, begin):])      # a stale block, rewritten
    monkeypatch.setattr(m, SCRIPTS[name], copy)
    assert m.main(["--write"]) in (0, None)
    assert copy.read_text() == page.read_text()
    assert capsys.readouterr().out.strip()
