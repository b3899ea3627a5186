"""The benchmark tables of docs/performance.rst and README.md, and the README's figure, are what the committed
benchmark data say (``python benchmarks/readme_rows.py --write`` from ``benchmarks/results/*.json``)."""
import json
from pathlib import Path

import pytest

from benchmark_scripts import data as load_data, load, marked_block

ROOT = Path(__file__).resolve().parents[1]


def _mod():
    return load("readme_rows")


def test_page_holds_the_generated_rows():
    m = _mod()
    page = m.PAGE.read_text()
    for row in m.rows():
        assert row in page.splitlines(), ("docs/performance.rst is stale: run python benchmarks/readme_rows.py --write\n"
                                          + row)
    assert marked_block(_Marks(m.MACHINE_BEGIN, m.MACHINE_END), m.PAGE) == m.machine_lines()


class _Marks:
    def __init__(self, begin, end):
        self.BEGIN, self.END = begin, end


def test_readme_table_and_figure_are_the_data(tmp_path):
    """The README's compact table (one number per cell), its machine line and its figure's numbers are the data's; the
    figure redrawn from them is the committed image."""
    from test_doc_examples import images_match

    m = _mod()
    lines = marked_block(m)
    assert lines == m.compact_rows() + [""] + m.machine_lines(), "README.md is stale: python benchmarks/readme_rows.py --write"
    data = m.compact_data()
    assert len(data) >= 8 and all(d["ratio"] > 0 for d in data)
    for ln in lines[2:len(data) + 2]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert len(cells) == 4 and all(float(c) >= 0 for c in cells[1:]), ln
    assert json.loads(m.FIGURE.with_suffix(".json").read_text()) == json.loads(json.dumps(data))
    m.ratio_figure(data, tmp_path / "r.png")
    assert images_match(tmp_path / "r.png", m.FIGURE)


def test_results_table_is_up_to_date():
    m = _mod()
    assert m.TABLE.read_text() == m.table_md(), "benchmarks/results/table.md is stale: run python benchmarks/readme_rows.py --write"


def test_rows_follow_the_data(tmp_path):
    """A changed number in the data changes the row, and replace() swaps exactly that row."""
    m = _mod()
    data = json.loads(m.DATA.read_text())
    rows = m.rows()
    closed = next(r for r in data if r.get("baseline_cpu_seconds") is not None)
    closed["cpu_seconds"] *= 2.0
    closed["ratio"] = 0.5
    path = tmp_path / "k.json"
    path.write_text(json.dumps(data))
    new = m.rows(path)
    assert new[0] != rows[0] and "**not met**" in new[0] and new[1] == rows[1]
    text = "intro\n" + "\n".join(rows) + "\nend\n"
    out = m.replace(text, new)
    assert out.splitlines()[1] == new[0] and out.endswith("end\n")
    with pytest.raises(ValueError, match="expected one row"):
        m.replace("no table here\n", new)


def test_composition_row_follows_its_goals():
    """The issue-36 row says 'met' only when every row of a case reaches its goal (≥ 4× NT CNN, ≥ 2× attention)."""
    m = _mod()
    base = {"P": 100, "seconds": 1.0, "wall": 1.0, "peak_bytes": 2**20, "numpy_ratio": 2.0, "numpy_peak_bytes": 2**20,
            "nt_wall_ratio": 4.0, "nt_maxrss": 2**30}
    rows = [{**base, "case": "cnn-gap", "ratio": 4.5, "floor_ratio": 3.0, "floor_seconds": 0.3},
            {**base, "case": "attn-ln-16", "ratio": 2.5}]
    row = m._compositions_row(rows)
    assert "cnn-gap ≥ 4× NT: met" in row and "attn-ln-16 ≥ 2× NT: met" in row and "3.0× the floor" in row
    rows[1]["ratio"] = 1.9
    assert "attn-ln-16 ≥ 2× NT: **not met**" in m._compositions_row(rows)
    rows[0].pop("ratio")                                  # neural-tangents skipped: not met
    assert "cnn-gap ≥ 4× NT: **not met**" in m._compositions_row(rows)
    assert m._compositions_row([]) is None


def test_tiles_row_follows_its_goal():
    """Goal 5's row says 'met' only at P ≥ 2000, 16×16, an interrupt with some tiles on disk, a resume that computed
    only the missing tiles and gave the one-shot tiles bit for bit, serial = dask tiles and tiles = the in-memory
    kernel to 1e-12."""
    m = _mod()
    r = {"P": 2000, "side": 16, "block": 256, "tiles": 36, "cpu_seconds": 200.0, "task_cpu_seconds": 150.0,
         "driver_cpu_seconds": 5.0, "wall": 300.0, "worker_peak_rss": [2**28, 2**28], "task_memory_estimate": 2**24,
         "disk_bytes": 2**25, "disk_bytes_estimate": 2**25, "baseline_cpu_seconds": 100.0, "baseline_maxrss": 2**28,
         "progress_lines": 3, "serial_equal": 4, "serial_checked": 4, "max_rel_diff": 0.0, "checked_inputs": 400,
         "interrupt": {"kept": 12, "resume_computed": 24, "only_missing": True, "bit_identical": True}}
    assert m._tiles_row([r]).endswith(": met |") and "2.00× its CPU" in m._tiles_row([r])
    for key, bad in (("P", 1999), ("serial_equal", 3), ("max_rel_diff", 2e-12)):
        assert m._tiles_row([{**r, key: bad}]).endswith("**not met** |")
    for kept in (0, 36):                                  # the Ctrl-C came before any tile or after the last
        assert m._tiles_row([{**r, "interrupt": {**r["interrupt"], "kept": kept}}]).endswith("**not met** |")
    for key in ("only_missing", "bit_identical"):
        assert m._tiles_row([{**r, "interrupt": {**r["interrupt"], key: False}}]).endswith("**not met** |")


def test_mup_coordcheck_rows_are_generated_from_the_data():
    """benchmarks/README.md's table of ours next to mup's coordinate check is benchmarks/results/peers/mup_coordcheck.json
    (python benchmarks/mup_coordcheck.py --write)."""
    m = load("mup_coordcheck")
    assert marked_block(m, ROOT / "benchmarks" / "README.md") == m.readout_rows(load_data(m)), \
        "benchmarks/README.md is stale: python benchmarks/mup_coordcheck.py --write"


def test_benchmark_readme_tables_are_generated_from_the_data():
    """benchmarks/README.md's layers and compositions tables, with their machine and protocol notes, are the data's."""
    m = _mod()
    text = m.BENCH_README.read_text()
    for begin, end, lines in m.bench_tables():
        assert text.split(begin, 1)[1].split(end, 1)[0].strip().splitlines() == lines, \
            "benchmarks/README.md is stale: python benchmarks/readme_rows.py --write"
