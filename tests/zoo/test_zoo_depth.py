"""Depth-μP on transformers' decoder layers: the blocks (``model.layers``) from the parameter names, the branches
(attention and MLP) by running the network (torch.fx cannot trace a LlamaDecoderLayer), their multiplier, and the
coordinate check across depth on the residual stream (the last layer's output, before the final RMSNorm)."""
import torch

import limits.torch as lt
from limits.torch.zoo import families as F


def test_llama_decoder_layers_get_depth_mup(one_thread):
    f = F.factory("llama", depth=True)
    X, Y = F.data("llama", n_train=8)["train"]
    P = lt.parameterise(f, "depth-muP", widths=(32, 64), depths=(2, 4), example_inputs=(X[:4],))
    assert P.layout.prefix == "model.layers" and P.branches == ("self_attn", "mlp")
    m = P(32, 8, seed=2)
    torch.manual_seed(2)
    ref = f(32, 8)
    for layer in ref.model.layers:            # (8/2)^-1/2 on each branch's output by hand
        layer.self_attn.register_forward_hook(lambda mod, a, o: (o[0] * 0.5,) + tuple(o[1:]))
        layer.mlp.register_forward_hook(lambda mod, a, o: o * 0.5)
    with torch.no_grad():
        assert torch.allclose(m(X), ref(X), rtol=1e-10, atol=1e-10)
    r = lt.depth_coord_check(P, (2, 4, 8), (X, Y), width=32, lr=1e-2, steps=1, seeds=3)
    assert r.passed, r.to_markdown()
