"""limits.torch.graph: attention and ties found in the traced forward (torch.fx, else the function-mode trace)."""
import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from limits.torch import demos, graph  # noqa: E402

X = demos.byte_data()[0]


def _sites(factory, width, x=X):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = factory(width)
    return m, graph.find_attention(m, x)


def test_nanogpt_sdpa_found_by_fx_with_its_packed_query_rows():
    m, sites = _sites(demos.gpt, 32)
    assert [s.name for s in sites] == ["blocks.0.attn:sdpa", "blocks.1.attn:sdpa"]
    s = sites[0]
    assert s.method == "torch.fx" and s.kind == "sdpa" and s.reason is None
    assert s.query == graph.Projection("blocks.0.attn.c_attn.weight", "blocks.0.attn.c_attn", 0, 0, 32,
                                       "blocks.0.attn.c_attn.bias")
    assert (s.key.start, s.key.stop) == (32, 64)
    assert (s.heads, s.head_dim) == (2, 16) and s.scale == pytest.approx(0.25)


def test_explicit_attention_falls_back_to_the_function_trace():
    _, sites = _sites(demos.gpt_explicit, 32)
    s = sites[0]
    assert s.kind == "explicit" and s.method.startswith("function-mode (torch.fx failed")
    assert s.scale == pytest.approx(1 / math.sqrt(16)) and "× 0.25" in s.scale_expr
    assert (s.query.start, s.query.stop, s.key.start, s.key.stop) == (0, 32, 32, 64)


def test_function_trace_agrees_with_fx():
    m, fx_sites = _sites(demos.gpt, 32)
    t = graph._function_trace(m, (X,))
    fm = graph._sites(t, m)
    strip = lambda s: (s.name, s.ordinal, s.query, s.key, s.scale, s.heads, s.head_dim)  # noqa: E731
    assert [strip(s) for s in fm] == [strip(s) for s in fx_sites]


def test_width_scaling_heads_or_head_dimension():
    a, b = _sites(demos.gpt, 32)[1], _sites(demos.gpt, 64)[1]
    sc = graph.width_scaling(a, b, 32, 64)[0]
    assert (sc.head_dim, sc.heads, sc.scale_exponent) == ("scales", "fixed", 0.5)
    assert sc.query_exponent() == -0.5                # 1/√d_h → μP's 1/d_h
    a, b = _sites(demos.gpt_fixed_head_dim, 32)[1], _sites(demos.gpt_fixed_head_dim, 64)[1]
    sc = graph.width_scaling(a, b, 32, 64)[0]
    assert (sc.head_dim, sc.heads, sc.scale_exponent) == ("fixed", "scales", 0.0)
    assert sc.query_exponent() == 0.0                 # fixed head dimension: 1/√d_h stays


def test_multihead_attention_sites():
    x = demos.transformer_data()[0]
    _, sites = _sites(demos.transformer, 32, x)
    assert [s.kind for s in sites] == ["multihead", "multihead"]
    assert sites[0].query.param == "enc.layers.0.self_attn.in_proj_weight"
    assert (sites[0].query.start, sites[0].query.stop, sites[0].key.start) == (0, 32, 32)


class _Attn(nn.Module):
    """Separate q/k/v projections; ``mode`` picks einsum, rotary, QK-norm or tanh-capped logits."""

    def __init__(self, width, mode="einsum", heads=2):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.norm = nn.LayerNorm(width // heads)
        self.router = nn.Linear(width, 4)
        self.out = nn.Linear(width, 3)
        self.mode, self.h = mode, heads

    def forward(self, idx):
        x = self.emb(idx)
        B, T, C = x.shape
        q, k, v = (f(x).view(B, T, self.h, C // self.h).transpose(1, 2) for f in (self.q, self.k, self.v))
        if self.mode == "rotary":
            cos = torch.cos(torch.arange(C // self.h, dtype=x.dtype))
            sin = torch.sin(torch.arange(C // self.h, dtype=x.dtype))
            rot = lambda t: torch.cat([-t[..., 1::2], t[..., ::2]], dim=-1)  # noqa: E731
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        if self.mode == "qknorm":
            q, k = self.norm(q), self.norm(k)
        att = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(C // self.h)
        if self.mode == "capped":
            att = 5.0 * torch.tanh(att / 5.0)
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        gate = F.softmax(self.router(y), dim=-1)            # a softmax that is not attention
        return self.out(y) * gate.sum(-1, keepdim=True)


@pytest.mark.parametrize("mode", ["einsum", "rotary"])
def test_separate_projections_einsum_and_rotary(mode):
    _, sites = _sites(lambda n: _Attn(n, mode), 16)
    assert len(sites) == 1                      # the router's softmax is not an attention
    s = sites[0]
    assert s.kind == "explicit" and s.reason is None
    assert s.query == graph.Projection("q.weight", "q", 0, 0, 16, "q.bias") and s.key.param == "k.weight"
    assert s.scale == pytest.approx(1 / math.sqrt(8))


def test_qk_norm_and_capped_logits_are_named_not_guessed():
    _, sites = _sites(lambda n: _Attn(n, "qknorm"), 16)
    assert sites[0].query is None and "LayerNorm 'norm'" in sites[0].reason
    _, sites = _sites(lambda n: _Attn(n, "capped"), 16)
    assert sites[0].kind == "unrecognised" and "'tanh'" in sites[0].reason


def test_capture_logits_sdpa_explicit_and_multihead():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        a = demos.gpt(32)
        torch.manual_seed(0)
        b = demos.gpt_explicit(32)
    stores = []
    for m in (a, b):
        with graph.capture_logits(m, graph.find_attention(m, X)) as st:
            m(X)
            m(X)
        stores.append(list(st.values()))
    for la, lb in zip(*stores):
        assert len(la) == 2 and la[0].shape == (8, 2, 16, 16)
        assert torch.allclose(la[0], lb[0], atol=1e-5)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    sites = graph.find_attention(mha, (x, x, x))
    with graph.capture_logits(mha, sites) as st:
        _, w = mha(x, x, x, need_weights=True, average_attn_weights=False)
    assert torch.allclose(st[sites[0].name][0].softmax(-1), w, atol=1e-6)


class _FunctionalReadout(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.wte = nn.Embedding(256, width)
        self.wpe = nn.Embedding(16, width)
        self.mix = nn.Linear(width, width)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe.weight[: idx.shape[1]]        # an embedding use: not a tie
        return self.mix(x) @ self.wte.weight.T                      # the embedding as read-out: a tie


def test_ties_module_and_functional():
    ties = graph.find_ties(demos.gpt_tied(16))
    assert ties == (graph.Tie(("wte.weight", "lm_head.weight"), "embedding-readout", "wte", "lm_head",
                              ties[0].detail),)
    assert graph.find_ties(demos.gpt(16), X) == ()
    ties = graph.find_ties(_FunctionalReadout(16), X)
    assert [(t.names, t.kind) for t in ties] == [(("wte.weight",), "functional")]
    lin = nn.Linear(4, 4)
    shared = nn.Sequential(lin, nn.Tanh(), lin)
    assert graph.find_ties(shared)[0].kind == "same-module-type"


def test_example_inputs_guess():
    assert graph.example_inputs(demos.gpt(16))[0].dtype == torch.long
    assert graph.example_inputs(demos.mlp(16))[0].shape == (2, demos.D_IN)
    with pytest.raises(ValueError, match="pass them"):
        graph.example_inputs(nn.Tanh())


class _Styles(nn.Module):
    """timm (``q = q * scale`` before ``q @ kᵀ``), HF-style separate projections with ``baddbmm``, and GQA SDPA."""

    def __init__(self, width, style):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width // 2), nn.Linear(width, width // 2)
        self.out = nn.Linear(width, 3)
        self.style, self.h = style, 4

    def forward(self, idx):
        x = self.emb(idx)
        B, T, C = x.shape
        d = C // self.h
        q = self.q(x).view(B, T, self.h, d).transpose(1, 2)
        k, v = (f(x).view(B, T, self.h // 2, d).transpose(1, 2) for f in (self.k, self.v))
        if self.style == "gqa":
            y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        else:
            k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
            if self.style == "timm":
                att = (q * d ** -0.5) @ k.transpose(-2, -1)
            else:
                qb, kb = q.reshape(B * self.h, T, d), k.reshape(B * self.h, T, d)
                att = torch.baddbmm(torch.zeros(B * self.h, T, T), qb, kb.transpose(1, 2), beta=0.0,
                                    alpha=1 / math.sqrt(d)).view(B, self.h, T, T)
            y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(B, T, C))


@pytest.mark.parametrize("style", ["timm", "baddbmm", "gqa"])
def test_query_path_scale_baddbmm_and_grouped_query_attention(style):
    m, sites = _sites(lambda n: _Styles(n, style), 32)
    s = sites[0]
    assert s.scale == pytest.approx(1 / math.sqrt(8)) and s.head_dim == 8 and s.heads == 4
    assert s.query == graph.Projection("q.weight", "q", 0, 0, 32, "q.bias") and s.key.param == "k.weight"
    assert s.path_factor == (pytest.approx(1 / math.sqrt(8)) if style == "timm" else 1.0)
    with graph.capture_logits(m, sites) as st:
        m(X)
    q = m.q(m.emb(X)).view(8, 16, 4, 8).transpose(1, 2)
    k = m.k(m.emb(X)).view(8, 16, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    got = st[s.name][0].reshape(8, 4, 16, 16)                  # baddbmm's logits are (B·heads, T, T)
    assert torch.allclose(got, (q @ k.transpose(-2, -1)) / math.sqrt(8), atol=1e-5)
    a, b = sites, _sites(lambda n: _Styles(n, style), 64)[1]
    assert graph.width_scaling(a, b, 32, 64)[0].query_exponent() == -0.5


class _CastedLinear(nn.Linear):
    """A user's Linear subclass (modded-nanogpt style): traced as one Linear call."""

    def forward(self, x):
        return F.linear(x, self.weight.type_as(x), self.bias.type_as(x))


class _Functional(nn.Module):
    """q from a Linear subclass through dropout; k from F.linear of a cast raw parameter."""

    def __init__(self, width):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.q = _CastedLinear(width, width)
        self.wk = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(width, 3)

    def forward(self, idx):
        x = self.emb(idx)
        q, k = self.drop(self.q(x)), F.linear(x, self.wk.to(x.dtype))
        return self.out(F.scaled_dot_product_attention(q[:, None], k[:, None], x[:, None])[:, 0])


def test_linear_subclass_functional_weight_dropout_and_modes_restored():
    m = _Functional(16).train()
    s = graph.find_attention(m, X)[0]
    assert s.query == graph.Projection("q.weight", "q", 0, 0, 16, "q.bias")
    assert s.key == graph.Projection("wk", "", 0, 0, 16, None) and s.heads == 1
    assert m.training and m.drop.training                      # traced in eval mode, mode restored


class _DtypeRead(nn.Module):
    """Reads an embedding's dtype and shape in the forward: not a functional read-out."""

    def __init__(self, width):
        super().__init__()
        self.wte = nn.Embedding(256, width)
        self.q, self.k = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, idx):
        x = self.wte(idx) * self.wte.weight.shape[1] ** -0.5
        q = self.q(x).to(self.wte.weight.dtype)
        return (q @ self.k(x).transpose(-2, -1)).softmax(-1) @ x


def test_reading_a_weights_dtype_is_not_a_tie():
    assert graph.find_ties(_DtypeRead(16), X) == ()


class _SoftmaxOfAttentionOutput(nn.Module):
    """A functional read-out: softmax over a pooled attention output is not a second attention."""

    def __init__(self, width):
        super().__init__()
        self.wte = nn.Embedding(256, width)
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, idx):
        q, k, v = self.qkv(self.wte(idx)).chunk(3, dim=-1)
        y = (q @ k.transpose(-2, -1) / 4.0).softmax(-1) @ v
        return y.mean(1).softmax(-1)


def test_softmax_over_an_attention_output_is_not_attention():
    sites = _sites(_SoftmaxOfAttentionOutput, 16)[1]
    assert [(s.kind, s.scale, s.query.stop, s.key.start) for s in sites] == [("explicit", 0.25, 16, 16)]
