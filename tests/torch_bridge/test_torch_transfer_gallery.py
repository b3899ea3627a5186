"""The μTransfer gallery figures: their committed data show what the README says (SP's optimum drifts, μP's and
Depth-μP's stay put, each verdict as predicted and calibrated), and without torch they are listed, replotted from
the committed data, and refused for computing with a one-line reason."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from limits import gallery
from limits.gallery import transfer as _figures  # noqa: F401 — registers the figures' result types
from limits.gallery.measurements import transfer_table

ROOT = Path(__file__).resolve().parents[2]
FIGS = ROOT / "figures"
NAMES = ("torch_transfer_digits", "torch_transfer_text", "torch_transfer_depth")
NO_TORCH = ("import sys\n"
            "class _NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ImportError('No module named torch')\n"
            "sys.meta_path.insert(0, _NoTorch())\n")


def _data(name):
    return gallery.load_data(name, FIGS)


@pytest.mark.parametrize("name, flat, moving, flat_verdict", [
    ("torch_transfer_digits", "muP", "SP", "transfers"),
    # 6 seeds × 3 widths of the quick text study (with 3 seeds μP's CI, [−0.19, +0.26], was a little wider than ±¼
    # and the verdict inconclusive; the study's calibration then called a flat optimum "transfers" in only ~45 %)
    ("torch_transfer_text", "muP", "SP", "transfers"),
    ("torch_transfer_depth", "depth-muP", "muP", "transfers")])
def test_committed_data_show_transfer_and_drift_as_predicted(name, flat, moving, flat_verdict):
    d = _data(name)
    assert d["quick"]
    f, m = d["data"][flat], d["data"][moving]
    assert f.verdict == flat_verdict and f.prediction_kind == "exact" and f.drift_ci[0] < 0 < f.drift_ci[1]
    assert f.passed == (flat_verdict == "transfers")
    assert m.verdict == "drifts" and m.passed and m.prediction_kind == "bound" and m.drift_ci[1] < -f.margin
    assert f.drift_ci[0] > m.drift_ci[1]                         # the two parameterisations' drifts are apart
    assert f.calibration["rates"][0, 1] <= 0.1                   # a flat optimum is rarely called a drift
    assert m.calibration["rates"][1, 1] >= 0.8                   # power at −2δ
    assert d["data"][f"{flat}|subsets"].sum() >= 1 and d["data"][f"{moving}|subsets"].sum() >= 1
    assert not f.failed.any() and not m.failed.any()


def test_depth_figure_has_the_coordinate_check_across_depth():
    d = _data("torch_transfer_depth")["data"]
    dm, w = d["depth-muP|coord"], d["muP|coord"]
    assert dm.predicted[1] == 0.0 and w.predicted[1] == 1.0
    assert dm.passed and w.slope[1] > dm.slope[1]


def test_without_torch_listed_replotted_and_refused_with_one_line(tmp_path):
    def run(code):
        return subprocess.run([sys.executable, "-c", NO_TORCH + code], cwd=tmp_path, capture_output=True, text=True,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
                              timeout=600)

    name = NAMES[0]
    for ext in ("npz", "json"):
        shutil.copy(FIGS / f"{name}.{ext}", tmp_path)
    r = run("from limits.cli import main; sys.exit(main(['figure', '--list']))")
    assert r.returncode == 0 and all(n in r.stdout for n in NAMES), r.stderr
    r = run(f"from limits.cli import main; sys.exit(main(['figure', {name!r}, '--quick', '--replot', '--outdir', "
            f"{str(tmp_path)!r}]))")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    r = run(f"from limits.cli import main; sys.exit(main(['figure', {name!r}, '--quick', '--force', '--outdir', "
            f"{str(tmp_path / 'new')!r}]))")
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode != 0 and len(err) == 1 and "needs the optional extra torch" in err[0], r.stderr
    assert not set(NAMES) & set(json.dumps(gallery.default_names()).split('"'))
    for n in NAMES[1:]:
        for ext in ("npz", "json"):
            shutil.copy(FIGS / f"{n}.{ext}", tmp_path)
    r = run("from limits.gallery.measurements import transfer_table\n"          # the docs/torch.rst table, torch-free
            f"t = transfer_table({str(tmp_path)!r}); assert 'torch' not in sys.modules; print(t)")
    assert r.returncode == 0 and r.stdout.strip() == transfer_table(FIGS).strip(), r.stderr


def test_readme_table_is_generated_from_the_data():
    table = transfer_table(FIGS)
    assert table.count("\n") == 2 + 6
    assert table in (ROOT / "docs/torch.rst").read_text()
    assert all(("(quick)" in ln) or ("(paper-size)" in ln) for ln in table.splitlines()[2:])
