"""parameterise on attention found in the graph (SDPA, explicit, nn.MultiheadAttention; heads or head dimension
∝ width) and on tied embeddings: the μP logit scale applied exactly where needed, refusals by name."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from limits.torch import demos, graph, parameterise  # noqa: E402

X = demos.byte_data()[0]


def _pair(factory, P, width, seed=1):
    """The factory's module and P's at ``width`` from the same seed, in float64."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        a = factory(width).double()
    b = P(width, seed=seed).double()
    return a, b


def _logits(m, x=X):
    with graph.capture_logits(m, graph.find_attention(m, x)) as st:
        m(x)
    return [v[0] for v in st.values()]


@pytest.mark.parametrize("factory", [demos.gpt, demos.gpt_explicit])
def test_mup_divides_sdpa_and_explicit_logits_by_the_head_dimension(factory):
    P = parameterise(factory, "muP", widths=(32, 64))
    assert {q.name: (q.query_exponent, q.query_rows) for q in P.rules if q.query_exponent} == {
        f"blocks.{i}.attn.c_attn.{t}": (-0.5, (0, 32)) for i in (0, 1) for t in ("weight", "bias")}
    a, b = _pair(factory, P, 128)
    la, lb = _logits(a), _logits(b)
    # block 0 sees the same input (μP leaves embeddings and hidden inits as the factory's): logits × r^{-1/2}
    assert torch.allclose(lb[0], la[0] * 0.5, rtol=1e-12, atol=1e-12)
    assert P.attention[0].site.method.startswith("torch.fx" if factory is demos.gpt else "function-mode")


def test_sdpa_and_explicit_parameterised_modules_compute_the_same_function():
    Ps = [parameterise(f, "muP", widths=(32, 64)) for f in (demos.gpt, demos.gpt_explicit)]
    outs = [P(96, seed=3).double()(X) for P in Ps]
    assert torch.allclose(outs[0], outs[1], rtol=0, atol=1e-10)


def test_heads_proportional_to_width_keep_the_head_scale():
    P = parameterise(demos.gpt_fixed_head_dim, "muP", widths=(32, 64))
    assert all(q.query_exponent == 0 for q in P.rules)
    assert [(a.heads, a.head_dim) for a in P.attention] == [("scales", "fixed")] * 2
    a, b = _pair(demos.gpt_fixed_head_dim, P, 128)
    assert torch.allclose(_logits(b)[0], _logits(a)[0], rtol=1e-12, atol=1e-12)


def _mha_heads_scale(width):
    return demos.TinyTransformer(width, heads=width // 16)


def test_multihead_attention_with_heads_proportional_to_width_is_not_rescaled():
    P = parameterise(_mha_heads_scale, "muP", widths=(32, 64))
    assert all(q.query_exponent == 0 for q in P.rules)
    P2 = parameterise(demos.transformer, "muP", widths=(32, 64))        # 2 heads: head dimension ∝ width
    assert {q.name for q in P2.rules if q.query_exponent == -0.5} == {
        f"enc.layers.{i}.self_attn.in_proj_{t}" for i in (0, 1) for t in ("weight", "bias")}


class _CrossAttention(nn.Module):
    """nn.MultiheadAttention over a fixed-width memory (kdim = vdim = 8): separate q/k/v projection weights (the
    k/v projections re-initialised as SP's input weights, std 1/√8: torch's xavier init ∝ N^-½ is not SP there)."""

    def __init__(self, width):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.mem = nn.Linear(8, 8)
        self.att = nn.MultiheadAttention(width, 2, kdim=8, vdim=8, batch_first=True)
        self.out = nn.Linear(width, 3)
        with torch.no_grad():
            self.att.k_proj_weight.normal_(0.0, 8 ** -0.5)
            self.att.v_proj_weight.normal_(0.0, 8 ** -0.5)

    def forward(self, idx):
        x = self.emb(idx)
        m = self.mem(torch.ones(idx.shape[0], 4, 8, dtype=x.dtype))
        return self.out(self.att(x, m, m, need_weights=False)[0])


def test_multihead_attention_with_separate_projections():
    P = parameterise(_CrossAttention, "muP", widths=(32, 64))
    q = {r.name: r for r in P.rules}
    assert (q["att.q_proj_weight"].query_exponent, q["att.q_proj_weight"].query_rows) == (-0.5, (0, 32))
    assert q["att.in_proj_bias"].query_rows == (0, 32) and q["att.k_proj_weight"].query_exponent == 0
    m = P(128)
    W, W0 = m.att.q_proj_weight, m.att.parametrizations.q_proj_weight.original
    assert torch.allclose(W, W0 * 0.5)
    b, b0 = m.att.in_proj_bias, m.att.parametrizations.in_proj_bias.original
    assert torch.allclose(b[:128], b0[:128] * 0.5) and torch.equal(b[128:], b0[128:])


class _Odd(nn.Module):
    """Attention with QK-norm (``qknorm``) or tanh-capped logits; ``heads`` fixed (2) or ∝ width."""

    def __init__(self, width, mode, fixed_head_dim=False):
        super().__init__()
        h = width // 8 if fixed_head_dim else 2
        self.emb = nn.Embedding(256, width)
        self.qkv = nn.Linear(width, 3 * width)
        self.norm = nn.LayerNorm(width // h)
        self.out = nn.Linear(width, 4)
        self.mode, self.h = mode, h

    def forward(self, idx):
        x = self.emb(idx)
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.h, -1).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        if self.mode == "qknorm":
            q, k = self.norm(q), self.norm(k)
        att = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        if self.mode == "capped":
            att = 10 * torch.tanh(att / 10)
        return self.out((att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))


def test_attention_that_cannot_be_rewritten_is_refused_by_name():
    with pytest.raises(ValueError, match=r"attention ':explicit'.*needs its logits multiplied by N\^-0.5.*LayerNorm 'norm'"):
        parameterise(lambda n: _Odd(n, "qknorm"), "muP", widths=(32, 64))
    with pytest.raises(ValueError, match=r"attention ':unrecognised'.*'tanh'"):
        parameterise(lambda n: _Odd(n, "capped"), "muP", widths=(32, 64))
    # needing no change (heads ∝ width), or a kernel-regime table, it is accepted
    parameterise(lambda n: _Odd(n, "qknorm", fixed_head_dim=True), "muP", widths=(32, 64))
    assert parameterise(lambda n: _Odd(n, "qknorm"), "SP", widths=(32, 64)).attention[0].site.query is None


class _TwoInputs(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.a = nn.Linear(4, width)
        self.b = nn.Linear(width, 2)

    def forward(self, x, y):
        return self.b(torch.tanh(self.a(x) + self.a(y)))


def test_untraceable_forward_needs_example_inputs_under_mup():
    with pytest.raises(ValueError, match="cannot trace factory\\(16\\)'s forward.*pass example_inputs"):
        parameterise(_TwoInputs, "muP", widths=(16, 32))
    x = torch.randn(3, 4)
    assert parameterise(_TwoInputs, "muP", widths=(16, 32), example_inputs=(x, x)).traced == "torch.fx"
    assert parameterise(_TwoInputs, "SP", widths=(16, 32)).traced.startswith("not traced (TypeError")


def test_tied_readout_is_muP_shared_readout():
    P = parameterise(demos.gpt_tied, "muP", widths=(32, 64))
    assert [(t.name, t.storage, t.exponent, t.fold) for t in P.readouts] == [("lm_head.weight", "wte.weight", 1.0,
                                                                              "ln_f")]
    rule = {q.name: q for q in P.rules}["wte.weight"]
    assert (rule.role, rule.module, rule.init_exponent, rule.c) == ("input", "wte", 0.0, 0.0)
    m = P(128, seed=0)
    assert m.lm_head.parametrizations.weight.original is m.wte.weight          # still one tensor
    assert torch.allclose(m.lm_head.weight, m.wte.weight / 4)                   # read-out × 1/r (mup's 1/width_mult)
    lrs = {g["name"]: g["lr"] for g in P.param_groups(m, 1e-2)}
    assert lrs["wte.weight"] == 1e-2 and len(lrs) == len(list(m.parameters()))
    # SP leaves the tied module as built
    sp = parameterise(demos.gpt_tied, "SP", widths=(32, 64))
    assert sp.readouts[0].exponent == 0.0
    a, b = _pair(demos.gpt_tied, sp, 64)
    assert torch.equal(a(X), b(X))


class _ReadoutFirst(nn.Module):
    """lm_head registered before the embedding: named_parameters() names the shared tensor 'lm_head.weight'."""

    def __init__(self, width):
        super().__init__()
        self.lm_head = nn.Linear(width, 256, bias=False)
        self.wte = nn.Embedding(256, width)
        self.wte.weight = self.lm_head.weight
        nn.init.normal_(self.wte.weight)              # the shared tensor initialised as the embedding (SP: N(0, 1))
        self.mix = nn.Linear(width, width)

    def forward(self, idx):
        return self.lm_head(torch.tanh(self.mix(self.wte(idx))))


def test_tie_registered_readout_first_and_functional_readout():
    P = parameterise(_ReadoutFirst, "muP", widths=(32, 64), example_inputs=(X,))
    rule = {q.name: q for q in P.rules}["lm_head.weight"]
    assert (rule.role, rule.module, rule.module_type) == ("input", "wte", "Embedding")
    assert P.readouts[0].name == "lm_head.weight" and P.readouts[0].fold is None          # tanh∘mix feeds it
    m = P(64)
    assert torch.allclose(m.lm_head.weight, m.wte.weight / 2)

    class Functional(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.wte = nn.Embedding(256, width)
            self.mix = nn.Linear(width, width)

        def forward(self, idx):
            return torch.tanh(self.mix(self.wte(idx))) @ self.wte.weight.T

    with pytest.raises(ValueError, match="'wte.weight' is also multiplied by 'matmul'.*must be an nn.Linear"):
        parameterise(Functional, "muP", widths=(32, 64))
