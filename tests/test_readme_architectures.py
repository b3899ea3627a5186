"""The README's "A layer composition" example runs as written and prints what the README shows; its numbers and its
check are the committed figure's data (every array bit for bit, every number of the JSON but the recorded run
times), and docs/architectures.rst, the docs' accuracy table for noise="auto" and the limits.layers docstring example
say what the data say. (The torch examples: tests/torch_bridge/test_torch_readme.py.)"""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import doc_examples as D
import limits

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGE = ROOT / "docs/architectures.rst"
TIMES = {"wall_time_s", "seconds", "cpu_seconds"}          # run times: the only numbers a rerun may change


def _section():
    return README.read_text().split("## A layer composition", 1)[1].split("\n## ", 1)[0]


def _figure_data(name):
    from limits.gallery import load_data

    return load_data(name, ROOT / "figures")


def _same(a, b, path=""):
    """Differences between two encoded results (JSON values, arrays by name), run times skipped."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}: keys {sorted(set(a) ^ set(b))}"] if set(a) != set(b) else []
        return out + [d for k in a if k in b and k not in TIMES for d in _same(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        return [f"{path}: length"] if len(a) != len(b) else [d for i, (x, y) in enumerate(zip(a, b))
                                                              for d in _same(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _encoded(result):
    from limits.results import encode_value

    arrays = {}
    return encode_value(result, arrays, "r"), arrays


def test_cnn_example_runs_and_is_the_committed_figure(tmp_path):
    block = next(b for b in D.blocks("README.md") if b.key == D_KEY)
    ns = {}
    D.run_block(block, tmp_path, ns)                      # runs as written; prints what the README shows
    p, c = ns["p"], ns["c"]
    assert p.fitted == ("output_scale", "noise") and c.verdict == "pass", c.to_markdown()
    assert (tmp_path / "cnn_check.png").stat().st_size > 1000
    # the committed figure is these lines' output: the same posterior and the same check, number for number
    payload = _figure_data("layers_cnn_digits_check")
    d = payload["data"]
    assert payload["params"]["check_seed"] == 0 and "seed=0" in block.code
    acc = float(np.mean(p.mean.argmax(1) == ns["digits"].target[1000:1100]))
    assert d["accuracy"] == acc and d["output_scale"] == p.output_scale and d["noise"] == p.noise
    (new, new_arrays), (old, old_arrays) = _encoded(c), _encoded(d["check"])
    assert not _same(new, old), _same(new, old)[:10]
    assert new_arrays.keys() == old_arrays.keys()
    for k in new_arrays:
        assert np.array_equal(new_arrays[k], old_arrays[k]), k
    # docs/architectures.rst's numbers are the data's
    text = " ".join(PAGE.read_text().split())
    c0 = d["check"]
    assert f"d_eff = {c0.details['d_eff']:.0f} fitted directions: N = {int(c0.widths[0])}–{int(c0.widths[-1])}" in text
    assert f"{100 * d['accuracy']:.0f} % test accuracy" in text and f"gives {100 * d['accuracy_noise_alone']:.0f} %" in text


D_KEY = "README.md § A layer composition: import numpy as np, limits"


def test_section_names_committed_figures_and_the_gallery():
    for text in (_section(), PAGE.read_text()):
        for name in re.findall(r"figures/(?:full/)?([A-Za-z0-9_]+)\.png", text):
            assert name in limits.gallery.figures(), name
    assert "layers_cnn_digits_learning_curves" in PAGE.read_text()


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
