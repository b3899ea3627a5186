"""Per-layer parameterisation tables of compositions (limits.params.layer_table)."""
import numpy as np
import pytest

import limits
from limits import layers as L
from limits.errors import ModelError
from limits.params import layer_table

CNN = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu"), L.Conv((3,), "VALID"), L.LayerNorm(),
                    L.Attention(2, pos_emb="SUM"), L.GlobalAvgPool(), L.Dense(1.0, 0.1))


def _rows(t):
    return {(r.layer, r.tensor): (r.role, r.fan_in, r.fan_out) for r in t.rows}


def test_roles_follow_fan_in_and_fan_out():
    got = _rows(layer_table(CNN, "muP"))
    assert got == {
        ("0", "W"): ("input", "D·3·3", "N"), ("0", "b"): ("vector", "1", "N"),
        ("2", "W"): ("hidden", "N·3", "N"), ("2", "b"): ("vector", "1", "N"),
        ("4", "K"): ("hidden", "N", "N"), ("4", "V"): ("hidden", "N", "N"), ("4", "O"): ("hidden", "2·N", "N"),
        ("4", "b"): ("vector", "1", "N"), ("4", "E"): ("input", "positions", "N"),
        ("6", "W"): ("output", "N", "d_out"), ("6", "b"): ("constant", "1", "d_out")}


@pytest.mark.parametrize("name", ["SP", "NTK", "MF", "muP"])
@pytest.mark.parametrize("convention", ["variance", "std"])
def test_exponents_are_the_rows_of_the_table(name, convention):
    p = limits.params.named(name, convention=convention)
    t = layer_table(CNN, name, convention=convention)
    row = {"input": "input", "vector": "input", "hidden": "hidden", "output": "output"}
    for r in t.rows:
        want = ["0"] * 3 if r.role == "constant" else [str(p.exponent(row[r.role], s)) for s in "abc"]
        assert [r.a, r.b, r.c] == want, (r.layer, r.tensor)
        s = p.to_std()
        assert r.std == (tuple(0.0 for _ in "abc") if r.role == "constant" else
                         tuple(float(s.exponent(row[r.role], k)) for k in "abc"))
    assert t.logits == {"4": 1.0 if name in ("MF", "muP") else 0.5}


def _table_cell(tab, key, col):
    for k in (key, key.split("_")[0]):            # merged rows ("c" when every layer has one learning rate)
        try:
            return tab.cell(k, col)
        except KeyError:
            pass
    if key.endswith("_output"):                   # hidden and output merged
        return tab.cell(key.replace("_output", "_hidden"), col)
    raise KeyError(key)


@pytest.mark.parametrize("model", [limits.mlp(4, 2, activation="tanh", parameterisation="muP", sigma_b2=0.1),
                                   limits.resnet(3, 3, activation="relu", parameterisation="SP"),
                                   limits.mlp(5, 1, parameterisation="MF"), limits.resnet(2, 2)])
def test_model_table_agrees_with_the_named_table(model):
    t = layer_table(model)                         # the model's own parameterisation
    assert t.name == model.param_name
    tab = limits.params.table([model.param_name])
    for r in t.rows:
        if r.role == "constant":
            continue
        row = "input" if r.role == "vector" else r.role
        for s in "abc":
            assert getattr(r, s) == str(_table_cell(tab, f"{s}_{row}", model.param_name)), (r.layer, r.tensor, s)
    assert t.composition == model.composition.to_dict()
    n_dense = 2 + model.depth
    assert sum(r.tensor == "W" for r in t.rows) == n_dense


def test_own_update_predictions_are_the_std_one_step_exponents_of_the_role():
    """dWh:<layer> takes dWh:in / dWh:hidden / dWh:out of the std convention (a composition has no output scale
    1/γ), whatever the table's convention: μP every contribution Θ(1), SP N^{-1/2}, N^{1/2}, N."""
    comp = limits.serial(L.Conv((3, 3)), L.Activation("relu"), L.Dense(), L.Activation("relu"), L.Flatten(), L.Dense())
    for name, want in (("muP", (0.0, 0.0, 0.0)), ("SP", (-0.5, 0.5, 1.0))):
        one = limits.params.named(name).to_std().one_step_exponents()
        assert tuple(float(one[k]) for k in ("dWh:in", "dWh:hidden", "dWh:out")) == want
        for conv in ("variance", "std"):
            t = layer_table(comp, name, convention=conv)
            assert tuple(t.predicted[f"dWh:{i}"] for i in (0, 2, 5)) == want, (name, conv)


def test_defaults_save_load_and_text(tmp_path):
    t = layer_table(limits.serial(L.Dense(), L.Activation("erf"), L.Dense(), L.Activation("erf"), L.Dense()))
    assert t.name == "NTK" and t.regime == "kernel"          # a composition's layers are NTK-parameterised
    assert t.predicted == {"df": 0.0, "dh:0": -0.5, "dh:2": -0.5, "dWh:0": -0.5, "dWh:2": -0.5, "dWh:4": 0.0}
    t.save(tmp_path / "t")
    back = type(t).load(tmp_path / "t")
    assert back.equals(t) and str(back) == str(t)
    assert "| 2 | Dense | W | N | N | hidden | 1/2 | 0 | 0 |" in t.to_markdown()
    assert r"\begin{tabular}" in t.to_latex() and '"role": "output"' in t.to_json()


def test_refusals():
    from dataclasses import dataclass

    from limits.layers.base import Layer

    @dataclass(frozen=True)
    class Gated(Layer):
        parametric = True

    with pytest.raises(ValueError, match=r"layer 1 \(Gated\(\)\): no per-layer parameterisation rule"):
        layer_table(limits.serial(L.Dense(), Gated(), L.Dense()), "muP")
    with pytest.raises(ValueError, match="algorithm 'pc'"):
        layer_table(CNN, limits.params.named("muP", algorithm="pc"))
    with pytest.raises(ValueError, match="no trained tensor"):
        layer_table(limits.serial(L.Activation("relu")))
    with pytest.raises(ValueError, match="limits.serial composition or a limits.Model"):
        layer_table(np.zeros(3))
    with pytest.raises(ModelError, match="Model.composition"):
        layer_table(limits.mlp(3, 1, post_activation=True))


def test_model_composition_is_the_architecture():
    m = limits.resnet(4, 2, activation="relu", rho=0.5, depth_scaling="sqrt")
    mu = m.with_(parameterisation="muP")
    assert mu.composition == m.composition == m.to_serial()
    with pytest.raises(ModelError, match="Model.composition for the architecture"):
        mu.to_serial()
    assert layer_table(mu).name == "muP" and layer_table(mu, "SP").name == "SP"
