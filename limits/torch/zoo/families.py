"""The zoo families measured in ``docs/zoo.rst`` (``benchmarks/zoo_study.py``): each a transformers class, a
small base config at width n₀ = 32 (2 layers), the config fields that grow with the width, its task
(:mod:`limits.torch.zoo.tasks`) and its depth field (for Depth-μP). One line per family in a user's code::

    f = zoo.families.factory("llama")        # == zoo.factory("transformers", "LlamaForCausalLM", …)

Head layouts: every attention family is built both ways — heads ∝ width with a fixed head dimension 16 (how the
field grows models; the family's own layout for GPT-2, Llama, Qwen2, GPT-J, BLOOM, BERT) and head dimension ∝
width with fixed heads (Falcon, BART, ViT); ``Family.layouts()``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

BASE_WIDTH = 32
OTHER = {"head dim ∝ N": "heads ∝ N", "heads ∝ N": "head dim ∝ N"}
SEQ = 16
VOCAB = 256


def swiglu_hidden(width):
    """Llama's feed-forward size: ⅔ · 4N rounded up to a multiple of 16 (not ∝ N: 96, 176, 352, 688 at 32…256)."""
    return 16 * math.ceil(8 * width / 3 / 16)


@dataclass(frozen=True)
class Family:
    """``key``: short name; ``class_name``: the transformers class; ``base``: config fields at width n₀;
    ``scale``: :func:`limits.torch.zoo.factory`'s rules; ``task``: a :mod:`~limits.torch.zoo.tasks` name;
    ``depth``: the depth field(s) or None; ``note``: what the family stands for."""

    key: str
    title: str
    class_name: str
    base: dict
    scale: dict
    task: str
    depth: tuple = ()
    note: str = ""
    refused: str = ""             # a family refused by name before anything is built: the reason
    other: dict | None = None     # the other head layout's scale (heads ∝ N ↔ head dimension ∝ N)
    layout: str = "head dim ∝ N"  # the head layout of ``scale``
    kw: dict = field(default_factory=dict)

    def layouts(self) -> dict:
        """{layout: scale} of both head layouts (the first is ``scale``; one for a network without attention)."""
        out = {self.layout: self.scale}
        if self.other is not None:
            out[OTHER[self.layout]] = self.other
        return out

    def scale_of(self, layout=None) -> dict:
        return self.scale if layout in (None, self.layout) else self.layouts()[layout]


_TEXT = dict(vocab_size=VOCAB)
_MLM = dict(vocab_size=VOCAB + 1)
HEADS = "heads ∝ N"
HEAD_DIM = "head dim ∝ N"
FAMILIES = (
    Family("gpt2", "GPT-2", "GPT2LMHeadModel",
           dict(_TEXT, n_embd=32, n_inner=128, n_head=2, n_layer=2, n_positions=SEQ, bos_token_id=0, eos_token_id=0),
           {"n_embd": 1, "n_inner": 4, "n_head": 1 / 16}, "next_bytes", ("n_layer",),
           "tied embeddings (lm_head = wte), Conv1D projections (weights stored (in, out)), learned positions",
           other={"n_embd": 1, "n_inner": 4}, layout=HEADS),
    Family("llama", "Llama", "LlamaForCausalLM",
           dict(_TEXT, hidden_size=32, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=2, head_dim=16, max_position_embeddings=SEQ),
           {"hidden_size": 1, "intermediate_size": 3, "num_attention_heads": 1 / 16, "num_key_value_heads": 1 / 16},
           "next_bytes", ("num_hidden_layers",), "RoPE, RMSNorm, SwiGLU, untied read-out",
           other={"hidden_size": 1, "intermediate_size": 3, "head_dim": 0.5}, layout=HEADS),
    Family("qwen2", "Qwen2 (GQA)", "Qwen2ForCausalLM",
           dict(_TEXT, hidden_size=32, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=8, max_position_embeddings=SEQ),
           {"hidden_size": 1, "intermediate_size": 3, "num_attention_heads": 1 / 8, "num_key_value_heads": 1 / 16},
           "next_bytes", ("num_hidden_layers",),
           "grouped-query attention (2 query heads per key/value head), q/k/v biases",
           other={"hidden_size": 1, "intermediate_size": 3, "head_dim": 0.25}, layout=HEADS),
    Family("gptj", "GPT-J", "GPTJForCausalLM",
           dict(_TEXT, n_embd=32, n_inner=128, n_head=2, n_layer=2, rotary_dim=8, n_positions=SEQ,
                bos_token_id=0, eos_token_id=0),
           {"n_embd": 1, "n_inner": 4, "n_head": 1 / 16}, "next_bytes", ("n_layer",),
           "parallel attention/MLP, partial rotary; an inlined-scale family of the HF μP pull request",
           other={"n_embd": 1, "n_inner": 4}, layout=HEADS),
    Family("bloom", "BLOOM", "BloomForCausalLM",
           dict(_TEXT, hidden_size=32, n_head=2, n_layer=2, bos_token_id=0, eos_token_id=0),
           {"hidden_size": 1, "n_head": 1 / 16}, "next_bytes", ("n_layer",),
           "ALiBi, fused per-head query_key_value, scale inlined as baddbmm's alpha, tied embeddings",
           other={"hidden_size": 1}, layout=HEADS),
    Family("falcon", "Falcon", "FalconForCausalLM",
           dict(_TEXT, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, max_position_embeddings=SEQ,
                bos_token_id=0, eos_token_id=0),
           {"hidden_size": 1}, "next_bytes", ("num_hidden_layers",),
           "multi-query attention (one key/value head), parallel attention, tied embeddings",
           other={"hidden_size": 1, "num_attention_heads": 1 / 16}),
    Family("bert", "BERT", "BertForMaskedLM",
           dict(_MLM, hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=SEQ),
           {"hidden_size": 1, "intermediate_size": 4, "num_attention_heads": 1 / 16}, "masked_bytes",
           ("num_hidden_layers",), "encoder, post-LN, MLM head (dense + LayerNorm) tied to the word embeddings",
           other={"hidden_size": 1, "intermediate_size": 4}, layout=HEADS),
    Family("bart", "BART", "BartForConditionalGeneration",
           dict(_MLM, d_model=32, encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_layers=1, decoder_layers=1,
                encoder_attention_heads=2, decoder_attention_heads=2, max_position_embeddings=SEQ,
                pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2),
           {"d_model": 1, "encoder_ffn_dim": 4, "decoder_ffn_dim": 4}, "masked_bytes",
           ("encoder_layers", "decoder_layers"),
           "encoder–decoder, cross-attention; one embedding shared by encoder, decoder and read-out",
           other={"d_model": 1, "encoder_ffn_dim": 4, "decoder_ffn_dim": 4, "encoder_attention_heads": 1 / 16,
                  "decoder_attention_heads": 1 / 16}),
    Family("t5", "T5", "T5ForConditionalGeneration",
           dict(_MLM, d_model=32, d_kv=16, d_ff=128, num_layers=1, num_heads=2),
           {"d_model": 1, "d_kv": 0.5, "d_ff": 4}, "masked_bytes", ("num_layers",),
           "encoder–decoder without a 1/√d logit scale",
           refused="T5ForConditionalGeneration's forward needs decoder_input_ids (it does not shift its input "
                   "as BART does), and the bridge feeds one input tensor; BART stands for encoder–decoders"),
    Family("vit", "ViT", "ViTForImageClassification",
           dict(hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, image_size=8,
                patch_size=2, num_channels=1, num_labels=10),
           {"hidden_size": 1, "intermediate_size": 4}, "digit_images", ("num_hidden_layers",),
           "Conv2d patch embedding, cls_token and position embeddings (raw parameters), pre-LN",
           other={"hidden_size": 1, "intermediate_size": 4, "num_attention_heads": 1 / 16}),
    Family("convnext", "ConvNeXt", "ConvNextForImageClassification",
           dict(hidden_sizes=[32, 64], depths=[1, 1], num_stages=2, patch_size=2, image_size=8, num_channels=1,
                num_labels=10),
           {"hidden_sizes": (1, 2)}, "digit_images", (),
           "depthwise 7×7 convolutions, channel LayerNorm, layer scale (a raw gain per channel)", layout="no attention"),
)
BY_KEY = {f.key: f for f in FAMILIES}


def family(key) -> Family:
    if key not in BY_KEY:
        raise ValueError(f"family {key!r}: known {', '.join(BY_KEY)}")
    return BY_KEY[key]


def factory(key, *, depth=False, layout=None, **kw):
    """The :class:`~limits.torch.zoo.factories.ZooFactory` of family ``key`` (``depth=True``: width and depth;
    ``layout``: "heads ∝ N" or "head dim ∝ N", default the family's own)."""
    from .factories import factory as _factory

    f = family(key)
    if f.refused:
        raise ValueError(f"family {key!r} ({f.class_name}) is refused: {f.refused}")
    if depth and not f.depth:
        raise ValueError(f"family {key!r} has no depth field")
    return _factory("transformers", f.class_name, f.base, f.scale_of(layout), depth=f.depth if depth else None,
                    **{**f.kw, **kw})


def data(key, seed=0, **kw):
    """The family's task {"train": (X, Y), "test": (X, Y)}."""
    from .tasks import task

    return task(family(key).task, seed=seed, **kw)


__all__ = ["Family", "FAMILIES", "BY_KEY", "family", "factory", "data", "swiglu_hidden", "BASE_WIDTH"]
