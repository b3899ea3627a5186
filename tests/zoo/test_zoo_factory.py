"""limits.torch.zoo.factory: configs at each width (and depth), the base model reproduced at the base width, SP
init (measured by the bridge's own init check), the logits output, refusals by name."""
import math
import pickle

import pytest
import torch

from limits.torch import zoo
from limits.torch.initscale import init_deviations
from limits.torch.apply_params import classify
from limits.torch.zoo import families as F

LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=96, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=16)


def test_sizes_follow_the_rules_and_the_base_width_is_the_library_model():
    f = zoo.factory("transformers", "LlamaForCausalLM", LLAMA,
                    scale={"hidden_size": 1, "intermediate_size": 3, "head_dim": 0.5})
    assert f.base_width == 32
    c = f.config(128)
    assert (c.hidden_size, c.intermediate_size, c.head_dim, c.num_attention_heads) == (128, 384, 64, 2)
    assert c._attn_implementation == "eager" and c.use_cache is False
    torch.manual_seed(3)
    a = f(32)
    torch.manual_seed(3)
    b = zoo.model_class("transformers", "LlamaForCausalLM")(f.config(32)).double()
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    x = torch.randint(0, 64, (2, 5))
    out = a(x)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 5, 64) and out.dtype == torch.float64
    assert torch.equal(out, b(x).logits)


def test_heads_proportional_callables_lists_and_the_tuple_shorthand():
    g = zoo.factory("transformers", "LlamaForCausalLM", LLAMA, scale=("hidden_size", "intermediate_size"))
    assert g.config(64).intermediate_size == 192
    h = zoo.factory("transformers", "LlamaForCausalLM", LLAMA,
                    scale={"hidden_size": 1, "intermediate_size": F.swiglu_hidden, "num_attention_heads": 1 / 16})
    assert [h.config(n).intermediate_size for n in (32, 64, 256)] == [96, 176, 688]
    assert h.config(256).num_attention_heads == 16 and h.config(256).head_dim == 16
    assert list(F.factory("convnext").config(128).hidden_sizes) == [128, 256]


@pytest.mark.parametrize("kw, match", [
    (dict(scale={"hidden_size": 1, "intermediate_size": 4}), "base config has 96"),
    (dict(scale={"hidden_size": 1, "head_dim": 0.25}), "base config has 16"),
    (dict(scale={"hidden_size": 1.5}), "not an integer width"),
    (dict(scale={"hidden_size": 1}, init="xavier"), "init must be one of"),
    (dict(scale={"hidden_size": 1}, dtype="float65"), "not a torch dtype"),
    (dict(scale={}), "at least the width field"),
])
def test_inconsistent_rules_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        zoo.factory("transformers", "LlamaForCausalLM", LLAMA, **kw)


def test_a_size_the_width_does_not_divide_is_refused_when_built():
    f = zoo.factory("transformers", "LlamaForCausalLM", LLAMA, scale={"hidden_size": 1, "intermediate_size": 3,
                                                                      "num_attention_heads": 1 / 16})
    with pytest.raises(ValueError, match="is not a positive integer"):
        f.config(40)


@pytest.mark.parametrize("lib, name, match", [
    ("timm", "LlamaForCausalLM", "library 'timm'"), ("transformers", "os.system", "not a public identifier"),
    ("transformers", "NoSuchModel", "no model class"), ("transformers", "LlamaConfig", "not a model class"),
    ("transformers", "AutoTokenizer", "not a model class")])
def test_only_library_model_classes_resolve(lib, name, match):
    with pytest.raises(ValueError, match=match):
        zoo.model_class(lib, name)


@pytest.mark.parametrize("key", ["llama", "convnext"])
def test_sp_init_passes_the_bridges_init_check_and_the_library_init_does_not(key):
    """The library's width-independent std 0.02 is not SP; init="sp" rescales exactly the weights whose fan-in
    grows (measured by limits.torch.initscale at widths 64 and 256): Linear, Conv2d; embeddings and depthwise
    convolutions (fixed fan-in) keep theirs."""
    sp, lib = F.factory(key), F.factory(key, init="library")
    rules, _ = classify(sp, (64, 256))
    torch.manual_seed(0)
    ma, mb = sp(64), sp(256)
    assert init_deviations(ma, mb, 64, 256, rules) == ()
    torch.manual_seed(0)
    bad = init_deviations(lib(64), lib(256), 64, 256, rules)
    assert {d.role for d in bad} == {"hidden", "output"}
    assert {d.name for d in bad} == {q.name for q in rules if q.role in ("hidden", "output")}
    fixed = [q.name for q in rules if q.role == "input"]
    with torch.no_grad():
        for n in fixed:          # input-like weights keep the library's std at every width
            assert math.isclose(float(mb.get_parameter(n).std()), float(ma.get_parameter(n).std()), rel_tol=0.2)


def test_depth_factory_and_pickling():
    f = F.factory("llama", depth=True)
    m = f(32, 3)
    assert m.config.num_hidden_layers == 3 and len(m.model.layers) == 3
    with pytest.raises(ValueError, match="factory\\(width, depth\\)"):
        f(32)
    g = pickle.loads(pickle.dumps(f))
    torch.manual_seed(1)
    a = f(64, 2)
    torch.manual_seed(1)
    b = g(64, 2)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert f.digest() == g.digest() and f.__qualname__ != F.factory("qwen2").__qualname__


def test_output_none_keeps_the_model_output_and_t5_is_refused_by_name():
    m = F.factory("gpt2", output=None)(32)
    out = m(torch.randint(0, 256, (1, 4)))
    assert hasattr(out, "logits") and not isinstance(out, torch.Tensor)
    with pytest.raises(ValueError, match="decoder_input_ids"):
        F.factory("t5")


def test_conv1d_roles_from_the_stored_orientation():
    """transformers' Conv1D stores (in, out): its roles come from the zoo factory (the bridge leaves them open)."""
    roles = F.factory("gpt2").roles()
    assert roles["transformer.h.0.attn.c_attn.weight"] == "hidden" and len(roles) == 8
    assert set(roles.values()) == {"hidden"} and F.factory("llama").roles() == {}
