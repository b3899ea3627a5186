"""Checkpoints of parameterised zoo models: ``P.export_state_dict`` loads into the unmodified transformers class
(strict) and computes the same logits; ``save_pretrained``/``from_pretrained`` round-trips exactly (a temp dir)."""
import torch

import limits.torch as lt
from limits.torch.zoo import families as F, model_class


def _trained(key, layout=None, width=64):
    f = F.factory(key, layout=layout)
    X, Y = F.data(key, n_train=8)["train"]
    P = lt.parameterise(f, "muP", widths=(32, 64), example_inputs=(X[:4],), roles=f.roles() or None)
    m = P(width, seed=1)
    opt = P.optimizer(m, 1e-2)
    for _ in range(2):
        opt.zero_grad()
        f.loss(m(X), Y).backward()
        opt.step()
    return f, P, m, X


def _roundtrip(f, P, m, X, width, tmp_path):
    cls = model_class("transformers", f.class_name)
    plain = cls(f.config(width)).double()
    plain.load_state_dict(P.export_state_dict(m), strict=True)
    with torch.no_grad():
        want = m(X)
        got = plain(X).logits
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    plain.save_pretrained(tmp_path)
    back = cls.from_pretrained(tmp_path, attn_implementation=f.attn_implementation)
    assert back.dtype == torch.float64
    for (k, a), (k2, b) in zip(plain.state_dict().items(), back.state_dict().items()):
        assert k == k2 and torch.equal(a, b), k
    with torch.no_grad():
        assert torch.equal(back(X).logits, got)
    # and back into the parameterised module: the same function again
    m2 = P(width, seed=5)
    P.import_state_dict(m2, plain.state_dict())
    with torch.no_grad():
        assert torch.allclose(m2(X), want, rtol=1e-12, atol=1e-12)


def test_untied_llama_round_trips(tmp_path, one_thread):
    f, P, m, X = _trained("llama", layout="heads ∝ N")
    _roundtrip(f, P, m, X, 64, tmp_path)


def test_tied_gpt2_round_trips_with_the_readout_multiplier_folded_into_ln_f(tmp_path, one_thread):
    """GPT-2's read-out is the token embedding wte (μP: a 1/r multiplier on the read-out use) and its projections
    are Conv1D (roles from the zoo factory); the export moves the multiplier into ln_f (read through
    transformers' logits_to_keep slice), so the checkpoint stays tied and loads into GPT2LMHeadModel."""
    f, P, m, X = _trained("gpt2")
    assert [(t.module, t.fold) for t in P.readouts] == [("lm_head", "transformer.ln_f")]
    _roundtrip(f, P, m, X, 64, tmp_path)
