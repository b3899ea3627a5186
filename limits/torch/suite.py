"""Held-out-style user modules, written as people write them today, on which :func:`limits.torch.parameterise`
and :func:`limits.torch.coord_check` are calibrated together (``benchmarks/torch_suite_calibration.py``, the table
in ``docs/torch_calibration.rst``): limits' own μP of each must pass limits' own check at the nominal rate, and
three bugs injected into each plan must be flagged with the culprit named first.

    llama        Meta-style Llama: RMSNorm written out, RoPE (rotate_half), own wq/wk/wv/wo, SDPA, SwiGLU with
                 hidden = 16·⌈(8N/3)/16⌉ (∝ width up to rounding)
    qwen_gqa     Qwen2/Mistral-style grouped-query attention: q/k/v projections with biases, 4 query heads over
                 2 key/value heads (HF's repeat_kv), ``nn.RMSNorm``, SwiGLU
    gpt2_tied    nanoGPT-style GPT-2: packed c_attn, explicit softmax(q·kᵀ/√d), final LayerNorm, read-out tied
                 to the token embedding (``wte.weight = lm_head.weight``)
    vit          ViT: Conv2d patch embedding, ``cls_token`` and ``pos_embed`` parameters on the root module,
                 ``nn.MultiheadAttention``, read-out on the class token
    convnext     ConvNeXt: 2×2 stem, depthwise 7×7 convolutions, channels-first LayerNorm written out,
                 inverted-bottleneck Linear pair, layer scale γ
    mixer        MLP-Mixer: token-mixing MLPs (fixed sizes) on transposed activations, channel-mixing MLPs
    unet         U-Net: GroupNorm/SiLU double convolutions, max-pool down, ConvTranspose2d up, skip concat
    resmlp       residual MLP ``factory(width, depth)`` for Depth-μP (``parameterise(…, "depth-muP", depths=…)``)

Every factory takes the width (``resmlp`` also the depth) and uses PyTorch's default initialisation (SP), except
where the architecture's authors set one (ViT's tokens, ConvNeXt's layer scale). :data:`CASES` says, per module,
its data, widths and the three bugs (:func:`inject` applies one to a :class:`limits.torch.Parameterised`;
``culprit``: fnmatch patterns of the rows a check should name first).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

import torch
from torch import nn
from torch.nn import functional as F

from ..registry import torch_data, torch_factory

VOCAB = 32
SEQ = 8
CLASSES = 10
IMAGE = 8


# ----------------------------------------------------------------------------------------------- Llama
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


def rope_tables(head_dim, seq, theta=10000.0):
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    freqs = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class LlamaAttention(nn.Module):
    def __init__(self, dim, n_heads, seq=SEQ):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        cos, sin = rope_tables(self.head_dim, seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, k, self.cos[:T], self.sin[:T])
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, multiple_of=16):
        super().__init__()
        hidden = multiple_of * ((int(2 * 4 * dim / 3) + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = LlamaAttention(dim, n_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, dim, n_layers=2, n_heads=2, vocab=VOCAB):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(TransformerBlock(dim, n_heads) for _ in range(n_layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


@torch_factory
def llama(width):
    """Meta-style Llama (module docstring): 2 layers, 2 heads (head dimension N/2), vocabulary 32."""
    return Llama(width)


# ----------------------------------------------------------------------------------------------- Qwen2 GQA
def repeat_kv(hidden, n_rep):
    b, n_kv, slen, hd = hidden.shape
    if n_rep == 1:
        return hidden
    hidden = hidden[:, :, None, :, :].expand(b, n_kv, n_rep, slen, hd)
    return hidden.reshape(b, n_kv * n_rep, slen, hd)


class Qwen2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads=4, num_kv_heads=2, seq=SEQ):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        cos, sin = rope_tables(self.head_dim, seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, k, self.cos[:q_len], self.sin[:q_len])
        k = repeat_kv(k, self.num_heads // self.num_kv_heads)
        v = repeat_kv(v, self.num_heads // self.num_kv_heads)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(bsz, q_len, -1))


class Qwen2MLP(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.down_proj = nn.Linear(3 * hidden_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen2DecoderLayer(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(hidden_size, eps=1e-6)
        self.self_attn = Qwen2Attention(hidden_size)
        self.post_attention_layernorm = nn.RMSNorm(hidden_size, eps=1e-6)
        self.mlp = Qwen2MLP(hidden_size)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states


class Qwen2Model(nn.Module):
    def __init__(self, hidden_size, layers=2, vocab=VOCAB):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden_size)
        self.layers = nn.ModuleList(Qwen2DecoderLayer(hidden_size) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden_size, eps=1e-6)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


class Qwen2ForCausalLM(nn.Module):
    def __init__(self, hidden_size, vocab=VOCAB):
        super().__init__()
        self.model = Qwen2Model(hidden_size, vocab=vocab)
        self.lm_head = nn.Linear(hidden_size, vocab, bias=False)

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids))


@torch_factory
def qwen_gqa(width):
    """Qwen2-style decoder with grouped-query attention (module docstring): 4 query heads, 2 key/value heads."""
    return Qwen2ForCausalLM(width)


# ----------------------------------------------------------------------------------------------- GPT-2, tied
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size=SEQ):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, n_embd, n_layer=2, n_head=2, vocab=VOCAB, block_size=SEQ):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList(GPT2Block(n_embd, n_head) for _ in range(n_layer)), ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight          # weight tying, as nanoGPT writes it

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


@torch_factory
def gpt2_tied(width):
    """nanoGPT-style GPT-2 with tied embedding/read-out (module docstring), PyTorch's default init."""
    return GPT2(width)


# ----------------------------------------------------------------------------------------------- ViT
class PatchEmbed(nn.Module):
    def __init__(self, patch, in_chans, embed_dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViTBlock(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, embed_dim, img_size=IMAGE, patch=2, in_chans=3, depth=2, num_heads=2, num_classes=CLASSES):
        super().__init__()
        self.patch_embed = PatchEmbed(patch, in_chans, embed_dim)
        n = (img_size // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, embed_dim) * 0.02)
        self.blocks = nn.ModuleList(ViTBlock(embed_dim, num_heads) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        return self.head(x[:, 0])


@torch_factory
def vit(width):
    """ViT on 8×8 images, 2×2 patches, class token and position embedding on the root (module docstring)."""
    return VisionTransformer(width)


# ----------------------------------------------------------------------------------------------- ConvNeXt
class LayerNormChannelsFirst(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim, layer_scale_init_value=0.1):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones(dim))

    def forward(self, x):
        inp = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        x = self.gamma * x
        return inp + x.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, dim, depth=2, in_chans=3, num_classes=CLASSES):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_chans, dim, kernel_size=2, stride=2), LayerNormChannelsFirst(dim))
        self.stages = nn.Sequential(*[ConvNeXtBlock(dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(self.norm(x.mean([-2, -1])))


@torch_factory
def convnext(width):
    """ConvNeXt (module docstring): 2 blocks at N channels on 8×8 images; layer scale initialised to 0.1."""
    return ConvNeXt(width)


# ----------------------------------------------------------------------------------------------- MLP-Mixer
class MlpBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MixerBlock(nn.Module):
    def __init__(self, dim, n_tokens, token_hidden=32):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mixing = MlpBlock(n_tokens, token_hidden)
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mixing = MlpBlock(dim, 4 * dim)

    def forward(self, x):
        y = self.token_mixing(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        x = x + y
        return x + self.channel_mixing(self.norm2(x))


class MlpMixer(nn.Module):
    def __init__(self, dim, depth=2, patch=2, img_size=IMAGE, in_chans=3, num_classes=CLASSES):
        super().__init__()
        self.stem = nn.Conv2d(in_chans, dim, kernel_size=patch, stride=patch)
        n_tokens = (img_size // patch) ** 2
        self.blocks = nn.Sequential(*[MixerBlock(dim, n_tokens) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(dim=1))


@torch_factory
def mixer(width):
    """MLP-Mixer (module docstring): 16 tokens (token-mixing MLP 16 → 32 → 16, fixed), channels N → 4N → N."""
    return MlpMixer(width)


# ----------------------------------------------------------------------------------------------- U-Net
class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, groups=8):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1), nn.GroupNorm(groups, out_channels),
            nn.SiLU(), nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            nn.GroupNorm(groups, out_channels), nn.SiLU())

    def forward(self, x):
        return self.double_conv(x)


class UNet(nn.Module):
    def __init__(self, width, in_channels=3, out_channels=3):
        super().__init__()
        self.inc = DoubleConv(in_channels, width)
        self.pool = nn.MaxPool2d(2)
        self.down = DoubleConv(width, 2 * width)
        self.up = nn.ConvTranspose2d(2 * width, width, kernel_size=2, stride=2)
        self.dec = DoubleConv(2 * width, width)
        self.outc = nn.Conv2d(width, out_channels, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down(self.pool(x1))
        x = self.dec(torch.cat([x1, self.up(x2)], dim=1))
        return self.outc(x)


@torch_factory
def unet(width):
    """U-Net (module docstring): N and 2N channels, 8×8 → 4×4 → 8×8, image-to-image (3 channels)."""
    return UNet(width)


# ----------------------------------------------------------------------------------------------- residual MLP
class ResBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc2(F.relu(self.fc1(self.norm(x))))


class ResMLP(nn.Module):
    def __init__(self, width, depth, d_in=8, d_out=2):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.blocks = nn.ModuleList(ResBlock(width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, d_out)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(self.norm(h))


def resmlp(width, depth=4):
    """Residual MLP (module docstring): ``factory(width, depth)``; depth 4 when called with a width alone."""
    return ResMLP(width, depth)


# ----------------------------------------------------------------------------------------------- data
@torch_data
def token_data(batch=8, seq=SEQ, vocab=VOCAB, seed=0):
    """``batch`` random token sequences and their next tokens (integer targets: cross-entropy)."""
    g = torch.Generator().manual_seed(int(seed))
    x = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    return x[:, :-1], x[:, 1:]


@torch_data
def image_data(batch=8, seed=0):
    """``batch`` 3×8×8 N(0, 1) images and labels in 0…9 (cross-entropy)."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(batch, 3, IMAGE, IMAGE, generator=g), torch.randint(0, CLASSES, (batch,), generator=g)


@torch_data
def image_pair_data(batch=4, seed=0):
    """``batch`` 3×8×8 N(0, 1) images and N(0, 1) target images (½ squared error)."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(batch, 3, IMAGE, IMAGE, generator=g), torch.randn(batch, 3, IMAGE, IMAGE, generator=g)


@torch_data
def vector_data(batch=16, seed=0):
    """``batch`` N(0, 1) inputs in R^8 and N(0, 1) targets in R^2."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(batch, 8, generator=g), torch.randn(batch, 2, generator=g)


# ----------------------------------------------------------------------------------------------- bugs
@dataclass(frozen=True)
class Bug:
    """A mistake injected into a plan: ``kind`` "lr" (rates of the tensors matching ``pattern`` × r^delta),
    "init" (their init × r^delta), "readout_sp" (the read-out left as SP: init × r^½, rate × r), "query" (the
    attention query multiplier left out: logits as the module's own 1/√d) or "tie" (a tied read-out's multiplier
    left out); ``culprit``: the rows a check should name first (fnmatch patterns, "|"-separated)."""

    name: str
    kind: str
    pattern: str
    culprit: str
    what: str
    delta: float = 0.0


def _matches(name, pattern):
    return any(fnmatchcase(name, p) for p in pattern.split("|"))


def inject(P, bug):
    """``P`` (a :class:`limits.torch.Parameterised`) with ``bug`` (:class:`Bug`) in its plan."""
    rules = list(P.rules)
    hit = False
    for i, q in enumerate(rules):
        if not _matches(q.name, bug.pattern):
            continue
        hit = True
        if bug.kind == "lr":
            rules[i] = replace(q, c=q.c - bug.delta)
        elif bug.kind == "init":
            rules[i] = replace(q, init_exponent=q.init_exponent + bug.delta)
        elif bug.kind == "readout_sp":
            rules[i] = replace(q, init_exponent=q.init_exponent + 0.5, c=q.c - 1.0)
        elif bug.kind == "query":
            rules[i] = replace(q, query_exponent=0.0, query_rows=None)
    readouts = P.readouts
    if bug.kind == "tie":
        readouts = tuple(replace(t, exponent=0.0) for t in P.readouts if _matches(t.module, bug.pattern))
        hit = bool(readouts)
        readouts += tuple(t for t in P.readouts if not _matches(t.module, bug.pattern))
    if not hit:
        raise ValueError(f"inject: bug {bug.name!r} matches no tensor of the plan ({bug.pattern!r})")
    return replace(P, rules=tuple(rules), readouts=readouts)


@dataclass(frozen=True)
class Case:
    """One module of the suite: ``factory``, ``data`` function, check ``widths``, ``bugs`` (three
    :class:`Bug`), ``roles`` for ``parameterise``, ``depths`` for a Depth-μP module."""

    name: str
    factory: object
    data: object
    bugs: tuple
    widths: tuple = (32, 64, 128, 256)
    roles: tuple = ()
    depths: tuple = ()


def _readout_sp(row):
    return Bug("readout_sp", "readout_sp", row, row, "read-out left as SP (init ∝ N^−½, rate η)")


CASES = {
    "llama": Case("Llama (RoPE, SDPA, RMSNorm, SwiGLU)", llama, token_data, (
        Bug("sdpa_sqrt_d", "query", "layers.*.attention.wq.weight", "layers.*.attention:logits",
            "attention left at 1/√d (no query multiplier)"),
        _readout_sp("output.weight"),
        Bug("norm_hidden_lr", "lr", "*norm.weight", "*norm.weight", "RMSNorm gains at the hidden rate η/r", -1.0))),
    "qwen_gqa": Case("Qwen2/Mistral-style GQA block", qwen_gqa, token_data, (
        Bug("k_proj_lr", "lr", "*.k_proj.weight", "*.k_proj.weight", "key projection at rate η (not η/r)", 1.0),
        Bug("embedding_hidden_lr", "lr", "model.embed_tokens.weight", "model.embed_tokens.weight",
            "token embedding at the hidden rate η/r", -1.0),
        Bug("sdpa_sqrt_d", "query", "*.q_proj.*", "*.self_attn:logits", "attention left at 1/√d"))),
    "gpt2_tied": Case("GPT-2, tied embeddings after a final LayerNorm", gpt2_tied, token_data, (
        Bug("tie_multiplier", "tie", "lm_head", "lm_head", "tied read-out without its multiplier 1/r"),
        Bug("c_fc_lr", "lr", "*.mlp.c_fc.weight", "*.mlp.c_fc.weight", "MLP up-projection at rate η", 1.0),
        Bug("explicit_sqrt_d", "query", "*.attn.c_attn.*", "*.attn:logits", "attention left at 1/√d"))),
    "vit": Case("ViT (Conv2d patches, cls/pos tokens on the root, MHA)", vit, image_data, (
        Bug("cls_hidden_lr", "lr", "cls_token", "cls_token", "class token at the hidden rate η/r", -1.0),
        _readout_sp("head.weight"),
        Bug("mha_sqrt_d", "query", "blocks.*.attn.in_proj_*", "blocks.*.attn:logits", "attention left at 1/√d"))),
    "convnext": Case("ConvNeXt-style CNN", convnext, image_data, (
        Bug("dwconv_hidden_lr", "lr", "stages.*.dwconv.weight", "stages.*.dwconv.weight",
            "depthwise convolutions at the hidden rate η/r", -1.0),
        Bug("gamma_hidden_lr", "lr", "stages.*.gamma", "stages.*.gamma", "layer scale at the hidden rate η/r", -1.0),
        _readout_sp("head.weight"))),
    "mixer": Case("MLP-Mixer", mixer, image_data, (
        Bug("channel_fc1_lr", "lr", "blocks.*.channel_mixing.fc1.weight", "blocks.*.channel_mixing.fc1.weight",
            "channel-mixing up-projection at rate η", 1.0),
        Bug("stem_hidden_lr", "lr", "stem.weight", "stem.weight", "patch embedding at the hidden rate η/r", -1.0),
        _readout_sp("head.weight"))),
    "unet": Case("U-Net-style conv net", unet, image_pair_data, (
        Bug("up_lr", "lr", "up.weight", "up.weight", "transposed convolution at rate η", 1.0),
        Bug("groupnorm_hidden_lr", "lr", "*.double_conv.1.weight|*.double_conv.4.weight",
            "*.double_conv.1.weight|*.double_conv.4.weight", "GroupNorm gains at the hidden rate η/r", -1.0),
        _readout_sp("outc.weight"))),
    "resmlp": Case("residual MLP (Depth-μP)", resmlp, vector_data, (
        Bug("fc1_lr", "lr", "blocks.*.fc1.weight", "blocks.*.fc1.weight", "hidden rate η (not η/r)", 1.0),
        Bug("inp_hidden_lr", "lr", "inp.weight", "inp.weight", "read-in at the hidden rate η/r", -1.0),
        _readout_sp("out.weight")), depths=(2, 4, 8, 16)),
}


def is_culprit(row, bug) -> bool:
    """Whether the row named ``row`` (its label's part before " (") is one of ``bug``'s culprits."""
    return _matches(row.split(" (")[0], bug.culprit)


__all__ = ["CASES", "Case", "Bug", "inject", "is_culprit", "llama", "qwen_gqa", "gpt2_tied", "vit", "convnext",
           "mixer", "unet", "resmlp", "token_data", "image_data", "image_pair_data", "vector_data"]
