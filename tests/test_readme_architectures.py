"""The README's "Architectures and your own network" section runs as written, and its numbers, the docs' accuracy
table for noise="auto" and the limits.layers docstring example come from data and code that say the same.
(Its torch part: tests/torch_bridge/test_torch_readme.py.)"""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import limits

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _section():
    return README.read_text().split("## Architectures and your own network", 1)[1].split("\n## ", 1)[0]


def _figure_data(name):
    from limits.gallery import load_data

    return load_data(name, ROOT / "figures")


def test_cnn_example_runs_and_says_what_the_readme_says(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = re.findall(r"```python\n(.*?)```", _section(), re.S)[0]
    assert "limits.serial" in code and "limits.predict" in code and "limits.check" in code
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    p, c = ns["p"], ns["c"]
    acc = float(np.mean(p.mean.argmax(1) == ns["digits"].target[1000:1100]))
    assert p.fitted == ("output_scale", "noise") and acc >= 0.85
    assert c.verdict == "pass", c.to_markdown()
    assert (tmp_path / "cnn_check.png").stat().st_size > 1000
    # the committed figure is these lines' output, and the README's numbers are its data
    d = _figure_data("layers_cnn_digits_check")["data"]
    assert d["accuracy"] == pytest.approx(acc, abs=1e-12)
    assert d["output_scale"] == pytest.approx(p.output_scale, rel=1e-6) and d["check"].verdict == c.verdict
    text = _section()
    c0 = d["check"]
    assert f"d_eff = {c0.details['d_eff']:.0f} fitted directions: N = {int(c0.widths[0])}–{int(c0.widths[-1])}" in text
    assert f"{100 * d['accuracy']:.0f} % test accuracy" in text and f"gives {100 * d['accuracy_noise_alone']:.0f} %" in text


def test_section_names_committed_figures_and_the_gallery():
    text = _section()
    for name in re.findall(r"figures/([A-Za-z0-9_]+)\.png", text):
        assert (ROOT / "figures" / f"{name}.png").is_file(), name
        assert name in limits.gallery.figures()
    assert "layers_cnn_digits_learning_curves" in text


def test_layers_docstring_example_runs():
    doc = limits.layers.__doc__
    block = doc.split("::\n", 1)[1].split("\n\n(", 1)[0]
    code = "\n".join(line[4:] for line in block.splitlines())
    ns = {}
    exec(compile(code, "limits/layers/__init__.py", "exec"), ns)
    assert ns["k"].nngp.shape == (5, 5) and ns["net"].width == 256


def test_docs_accuracy_table_is_the_committed_data():
    """docs/theory/predict.rst §3 prints gallery.hyperparameters.table of the committed figure data, and the
    fitted scale and noise are within one point of the best fixed noise on every kernel."""
    from limits.gallery.hyperparameters import table

    payload = _figure_data("predict_noise_auto_digits")
    data = payload["data"]
    rst = (ROOT / "docs" / "theory" / "predict.rst").read_text()
    block = "\n".join("    " + line for line in table(data).splitlines())
    assert block in rst
    assert f"{payload['params']['P']} training and {payload['params']['P_test']} test images" in rst
    for name in data["kernels"]:
        best = float(np.max(data[f"{name}_fixed"]))
        assert data[f"{name}_new"][2] >= best - 0.01, name
    # §2 quotes the smallest correlations of the pooled CNN-GPs (rounded down)
    c1, c3 = (np.floor(100 * data[f"{n}_corr"][0]) / 100 for n in ("cnn1_gap", "cnn3_gap"))
    assert f"above {c1:.2f} (one convolution) or {c3:.2f} (three)" in " ".join(rst.split())
    meta = json.loads((ROOT / "figures" / "predict_noise_auto_digits.json").read_text())
    assert meta["quick"] is True
