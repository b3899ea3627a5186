"""Graph paths that Hugging Face models take (found on transformers' BLOOM and Falcon, written here in plain
torch): a logit product ``alibi.baddbmm(batch1=q, batch2=kᵀ, alpha=s)`` with keyword operands is an attention
site with scale s (it was not seen at all, leaving the attention at its own scale under μP), and a tied read-out
fed through a slice ``lm_head(ln_f(h)[:, -k:])`` folds its multiplier into ``ln_f`` on export."""
import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from limits.torch import graph, parameterise  # noqa: E402


class AlibiAttention(nn.Module):
    def __init__(self, width, heads=2):
        super().__init__()
        self.h, self.d = heads, width // heads
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.h, self.d).transpose(1, 2).reshape(B * self.h, T, self.d)
        k = self.k(x).view(B, T, self.h, self.d).transpose(1, 2).reshape(B * self.h, T, self.d)
        v = self.v(x).view(B, T, self.h, self.d).transpose(1, 2).reshape(B * self.h, T, self.d)
        alibi = torch.zeros(B * self.h, 1, T, dtype=x.dtype)
        s = alibi.baddbmm(batch1=q, batch2=k.transpose(-1, -2), beta=1.0, alpha=1 / math.sqrt(self.d))
        a = torch.softmax(s, dim=-1) @ v
        return self.o(a.reshape(B, self.h, T, self.d).transpose(1, 2).reshape(B, T, -1))


class TiedLM(nn.Module):
    def __init__(self, width, vocab=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.attn = AlibiAttention(width)
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        h = self.wte(idx)
        h = h + self.attn(h)
        return self.lm_head(self.ln_f(h)[:, -idx.shape[1]:, :])


X = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(0))


def test_keyword_baddbmm_is_an_attention_site_with_its_alpha_and_logits():
    m = TiedLM(32)
    (site,) = graph.find_attention(m, (X,))
    assert site.kind == "explicit" and site.query.param == "attn.q.weight"
    assert math.isclose(site.scale, 1 / math.sqrt(16), rel_tol=1e-12)
    with graph.capture_logits(m, (site,)) as store:
        m(X)
    q = m.attn.q(m.wte(X)).view(2, 6, 2, 16).transpose(1, 2).reshape(4, 6, 16)
    k = m.attn.k(m.wte(X)).view(2, 6, 2, 16).transpose(1, 2).reshape(4, 6, 16)
    assert torch.allclose(store[site.name][0], q @ k.transpose(-1, -2) / 4, rtol=1e-6, atol=1e-6)


def test_mup_rescales_the_keyword_baddbmm_query_and_folds_the_tied_readout_through_a_slice():
    P = parameterise(TiedLM, "muP", widths=(32, 64), example_inputs=(X,))
    assert {q.name: q.query_exponent for q in P.rules if q.query_exponent} == {
        "attn.q.weight": -0.5, "attn.q.bias": -0.5}
    assert [(t.module, t.fold) for t in P.readouts] == [("lm_head", "ln_f")]
    m = P(128, seed=2)
    plain = TiedLM(128)
    plain.load_state_dict(P.export_state_dict(m), strict=True)
    with torch.no_grad():
        assert torch.allclose(plain(X), m(X), rtol=1e-5, atol=1e-6)
