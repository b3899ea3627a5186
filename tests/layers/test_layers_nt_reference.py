"""Compositions against neural-tangents' own kernels, stored (tests/layers/data/nt_reference.npz, written by
``python benchmarks/nt_layers.py --fixture`` with neural-tangents 0.6.5 / jax 0.4.30 in float64, so these tests
need no neural-tangents): strided / VALID / CIRCULAR convolutions in 1-D and 2-D, pooling after them, Flatten and
GlobalAvgPool read-outs, residual blocks, attention with and without positional embeddings.

Criterion: max |ours − NT| ≤ 1e-10 · max |NT| for the NNGP and the NTK off the diagonal. The NTK's diagonal
(x = x') is held to 1e-10 too except after a ReLU, where it needs E[φ'(u)φ'(v)] at correlation exactly 1 (an
infinite derivative in c): there neural-tangents' separately rounded self-covariances carry errors up to
~1e-9 (benchmarks/nt_layers.py docstring), so the bound is 1e-8.
"""
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import limits

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("data") / "nt_reference.npz"
TOL = 1e-10


def _load():
    with np.load(FIXTURE, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    return json.loads(str(data.pop("meta"))), data


META, ARRAYS = _load()


def _digest(model, *arrays):
    h = hashlib.sha256(json.dumps(model, sort_keys=True).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()


def _has_relu(d):
    if isinstance(d, dict):
        return d.get("name") == "relu" or any(_has_relu(v) for v in d.values())
    if isinstance(d, list):
        return any(_has_relu(v) for v in d)
    return False


@pytest.mark.parametrize("i", range(len(META["cases"])), ids=[c["name"] for c in META["cases"]])
def test_composition_equals_neural_tangents(i):
    case = META["cases"][i]
    X, nngp, ntk = ARRAYS[f"X_{i}"], ARRAYS[f"nngp_{i}"], ARRAYS[f"ntk_{i}"]
    assert _digest(case["model"], X, nngp, ntk) == case["sha256"], "fixture entry does not match its digest"
    k = limits.kernels.kernel(limits.layers.Serial.from_dict(case["model"]), X)
    off = ~np.eye(X.shape[0], dtype=bool)
    assert np.max(np.abs(k.nngp - nngp)) <= TOL * np.max(np.abs(nngp))
    assert np.max(np.abs(k.ntk - ntk)[off]) <= TOL * np.max(np.abs(ntk))
    diag_tol = 1e-8 if _has_relu(case["model"]) else TOL
    assert np.max(np.abs(np.diag(k.ntk) - np.diag(ntk))) <= diag_tol * np.max(np.abs(ntk))


def test_fixture_is_the_benchmark_family_and_states_its_versions():
    """The stored cases are exactly benchmarks/nt_layers.py's (regenerate with --fixture after changing them)."""
    spec = importlib.util.spec_from_file_location("nt_layers", ROOT / "benchmarks" / "nt_layers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cases = mod.cases()
    assert [(c["name"], c["model"]) for c in META["cases"]] == [(n, m.to_dict()) for n, m, _ in cases]
    assert [ARRAYS[f"X_{i}"].shape for i in range(len(cases))] == [s for _, _, s in cases]
    assert META["neural_tangents"] == "0.6.5" and META["float"] == "float64"
    convs = [l for _, m, _ in cases for l in m.layers if isinstance(l, limits.layers.Conv)]
    assert {c.padding for c in convs} == {"SAME", "VALID", "CIRCULAR"}
    assert {s for c in convs for s in c.strides} == {1, 2, 3} and {len(c.filter_shape) for c in convs} == {1, 2}
    assert any(isinstance(l, limits.layers.Attention) and l.pos_emb_values for _, m, _ in cases for l in m.layers)
