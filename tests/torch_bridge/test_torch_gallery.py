"""The torch gallery figure: its committed data say what the figure shows (SP and μP as predicted, the broken μP
read-out flagged by name), and without torch the gallery lists it, replots it from the committed data, and
refuses to compute it with a one-line reason (torch hidden from a subprocess)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from limits import gallery  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIGS = ROOT / "figures"
NO_TORCH = ("import sys\n"                                   # `import torch` raises ImportError, as when absent
            "class _NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ImportError('No module named torch')\n"
            "sys.meta_path.insert(0, _NoTorch())\n")


def _run(code, cwd):
    return subprocess.run([sys.executable, "-c", NO_TORCH + code], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}, timeout=900)


def test_committed_data_show_sp_and_mup_as_predicted_and_the_broken_readout_flagged():
    d = gallery.load_data("torch_coordcheck", FIGS)
    assert d["quick"] and d["params"]["widths"] == [64, 128, 256, 512]
    data = d["data"]
    for net in ("mlp", "transformer"):
        assert data[f"{net}|SP|passed"] and data[f"{net}|muP|passed"]
        assert not data[f"{net}|broken muP|passed"]
    failing = {net: [str(f).split(" (")[0] for f in data[f"{net}|broken muP|failing"]] for net in ("mlp", "transformer")}
    assert "out" in failing["transformer"] and "4" in failing["mlp"]             # rows named, labels aside
    assert failing["transformer"][0] == "out.weight" and failing["mlp"][0] == "4.weight"   # the culprit first
    k = "transformer|SP|"
    i = list(data[k + "tensors"]).index("out")
    assert data[k + "predicted"][i] == 1.5 and data[k + "ci_low"][i] > 1.0        # SP's read-out change blows up
    k = "transformer|muP|"
    i = list(data[k + "tensors"]).index("out")
    assert data[k + "ci_low"][i] - 0.1 <= 0.0 <= data[k + "ci_high"][i] + 0.1     # μP's is flat
    assert sum(data[f"{n}|{c}|cpu_s"] for n in ("mlp", "transformer") for c in ("SP", "muP", "broken muP")) < 120


def test_without_torch_the_figure_is_listed_replotted_and_refused_with_one_line(tmp_path):
    for ext in ("npz", "json"):
        shutil.copy(FIGS / f"torch_coordcheck.{ext}", tmp_path)
    r = _run("from limits.cli import main; sys.exit(main(['figure', '--list']))", tmp_path)
    assert r.returncode == 0 and "torch_coordcheck" in r.stdout, r.stderr
    r = _run("from limits.cli import main; sys.exit(main(['figure', 'torch_coordcheck', '--quick', '--replot', "
             f"'--outdir', {str(tmp_path)!r}]))", tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "torch_coordcheck.png").stat().st_size > 10_000
    r = _run("from limits.cli import main; sys.exit(main(['figure', 'torch_coordcheck', '--quick', '--force', "
             f"'--outdir', {str(tmp_path / 'new')!r}]))", tmp_path)
    assert r.returncode != 0
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "needs the optional extra torch" in err[0], r.stderr
    assert "torch_coordcheck" not in json.dumps(gallery.default_names())          # not part of the main job


def test_readme_sentences_on_the_demo_transformer_are_generated_from_the_committed_data():
    from limits.gallery import torchbridge

    page = (ROOT / torchbridge.PAGE).read_text()
    block = page.split(torchbridge.BEGIN, 1)[1].split(torchbridge.END, 1)[0]
    assert block.strip() == torchbridge.readme_paragraph(gallery.load_data("torch_coordcheck", FIGS)), \
        f"{torchbridge.PAGE} is stale: python -m limits.gallery.torchbridge --write"
