"""Width (and depth) factories of model-zoo classes built from their configs — no weights are downloaded.

    f = zoo.factory("transformers", "LlamaForCausalLM", base_config,
                    scale={"hidden_size": 1, "intermediate_size": 4, "num_attention_heads": 1 / 16},
                    depth="num_hidden_layers")
    net = f(256)             # LlamaForCausalLM(config at width 256), its forward returns the logits tensor
    net = f(256, 4)          # with depth=: factory(width, depth)

**Sizes.** ``scale`` maps each config field that grows with the width N to its rule: a number k (the field is
k·N, e.g. ``intermediate_size: 4``, ``num_attention_heads: 1/16`` for heads ∝ width, ``head_dim: 1/4`` for a
head dimension ∝ width), a sequence of numbers (a list field: ConvNeXt's ``hidden_sizes: (1, 2)`` → [N, 2N]),
or a callable ``width -> value`` (rounded sizes, e.g. SwiGLU's 16·⌈8N/48⌉). A tuple of field names is the
shorthand "each ∝ N with the base config's ratio". The first field is the width: the base width n₀ is its
base-config value divided by its multiple, and at n₀ every rule must give the base config's own value (else
refused), so ``f(n₀)`` is exactly ``cls(base_config)``. Fields not named stay fixed.

**Init.** Zoo models initialise every weight with one width-independent std (``initializer_range``, 0.02);
:func:`limits.torch.parameterise` takes a factory's init as SP's (std ∝ fan-in^−½). With ``init="sp"``
(default) a weight whose fan-in grows is rescaled at width N by √(fan-in(n₀)/fan-in(N)) — the model's own init
at the base width, extended in SP (embeddings, depthwise convolutions and every fixed fan-in keep it; gains,
biases and other tensors are untouched); ``init="library"`` keeps the library's.

**Output.** A forward hook (``output="logits"``, default) makes the module return the ``logits`` tensor of its
``ModelOutput`` (the first tensor when there is no ``logits``), which is what the bridge's checks and losses
read; ``output=None`` keeps the ``ModelOutput``. Inputs are the model's first positional argument
(``input_ids`` or ``pixel_values``). The class, its parameters and its ``state_dict`` are the library's own.

**Attention.** ``attn_implementation`` is set explicitly ("eager" by default: the logits are a visible
``matmul`` → ``softmax`` the graph reads; "sdpa" is ``F.scaled_dot_product_attention``). Dropout is set to 0
(the checks compare deterministic forwards) and ``use_cache`` off.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers

LIBRARIES = ("transformers",)
INITS = ("sp", "library")
_DROPOUT_FIELDS = ("attention_dropout", "attention_probs_dropout_prob", "hidden_dropout", "hidden_dropout_prob",
                   "attn_pdrop", "resid_pdrop", "embd_pdrop", "dropout", "activation_dropout", "dropout_rate",
                   "classifier_dropout", "drop_path_rate", "summary_first_dropout", "layerdrop", "encoder_layerdrop",
                   "decoder_layerdrop", "ffn_dropout", "mlp_dropout")


def model_class(library, name):
    """The model class ``name`` of ``library``: a public class of the library that is a ``PreTrainedModel``
    with a config class (the allowlist: nothing else resolves)."""
    if library not in LIBRARIES:
        raise ValueError(f"library {library!r}: known {', '.join(LIBRARIES)}")
    if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")):
        raise ValueError(f"model class name {name!r} is not a public identifier")
    try:
        import transformers
    except ImportError:          # pragma: no cover — depends on the install
        raise ValueError('the model zoo needs the optional extra: python -m pip install -e ".[zoo]"') from None
    try:
        cls = getattr(transformers, name)
    except (AttributeError, ImportError, RuntimeError) as exc:
        raise ValueError(f"transformers has no model class {name!r} ({type(exc).__name__})") from None
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)
            and getattr(cls, "config_class", None) is not None):
        raise ValueError(f"transformers.{name} is not a model class (a PreTrainedModel with a config_class)")
    return cls


def _value(rule, width, field):
    if callable(rule):
        return rule(width)
    if isinstance(rule, (list, tuple)):
        return [_value(k, width, f"{field}[{i}]") for i, k in enumerate(rule)]
    if isinstance(rule, numbers.Real) and not isinstance(rule, bool) and rule > 0:
        v = rule * width
        if abs(v - round(v)) > 1e-9 or round(v) < 1:
            raise ValueError(f"config field {field!r}: {rule:g} × width {width} = {v:g} is not a positive integer; "
                             "choose widths it divides, or give a callable width -> size that rounds")
        return int(round(v))
    raise ValueError(f"scale[{field!r}]: a positive number (a multiple of the width), a sequence of them or a "
                     f"callable width -> size, got {rule!r}")


def _multiples(scale, base):
    """``scale`` as {field: rule}; the shorthand tuple of names takes each ratio from ``base`` (module docstring)."""
    if isinstance(scale, dict):
        if not scale:
            raise ValueError("scale: name at least the width field (e.g. {'hidden_size': 1})")
        return dict(scale)
    names = list(scale) if isinstance(scale, (list, tuple)) else None
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError("scale: a dict {config field: multiple of the width | sequence | callable} or a tuple of "
                         "config field names")
    n0 = base.get(names[0])
    if not isinstance(n0, int):
        raise ValueError(f"scale: the width field {names[0]!r} has no integer value in the base config")
    out = {}
    for n in names:
        v = base.get(n)
        if isinstance(v, (list, tuple)):
            out[n] = tuple(x / n0 for x in v)
        elif isinstance(v, int):
            out[n] = v / n0
        else:
            raise ValueError(f"scale: config field {n!r} has no integer (or list) value in the base config")
    return out


def _base_dict(base_config, cls):
    if isinstance(base_config, dict):
        return dict(base_config)
    cfg_cls = cls.config_class
    if isinstance(base_config, cfg_cls):
        return base_config.to_diff_dict()
    raise ValueError(f"base_config: a dict of {cfg_cls.__name__} fields or a {cfg_cls.__name__}, got "
                     f"{type(base_config).__name__}")


class ZooFactory:
    """``factory(width[, depth]) -> nn.Module``: the library class at a width (and depth) built from its config
    (module docstring); picklable (process pools). ``config(width, depth=None)``: the config it builds;
    ``base_width``; ``loss``: the default loss of the bridge on the returned logits."""

    def __init__(self, library, class_name, base_config, scale, *, depth=None, init="sp",
                 attn_implementation="eager", dtype="float64", output="logits"):
        import torch

        cls = model_class(library, class_name)
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if output not in ("logits", None):
            raise ValueError(f"output must be 'logits' or None, got {output!r}")
        if not isinstance(getattr(torch, str(dtype), None), torch.dtype):
            raise ValueError(f"dtype {dtype!r} is not a torch dtype name")
        self.library, self.class_name = library, class_name
        self.base = _base_dict(base_config, cls)
        self.scale = _multiples(scale, self.base)
        self.depth_fields = (depth,) if isinstance(depth, str) else tuple(depth or ())
        self.init, self.attn_implementation, self.dtype, self.output = init, attn_implementation, str(dtype), output
        self.base_width = _base_width(self.scale, self.base)
        for f, r in self.scale.items():            # the rules reproduce the base config at the base width
            if f in self.base and _value(r, self.base_width, f) != _norm(self.base[f]):
                raise ValueError(f"scale[{f!r}] gives {_value(r, self.base_width, f)} at the base width "
                                 f"{self.base_width} but the base config has {self.base[f]}")
        self.__qualname__ = f"ZooFactory[{class_name}:{self.digest()}]"    # names the study stores apart
        self._base_fan_in = None

    def digest(self) -> str:
        """Digest of what the factory builds (class, base config, rules, depth fields, init, attention, dtype)."""
        rules = {k: (getattr(v, "__qualname__", None) or repr(v)) for k, v in self.scale.items()}
        key = json.dumps([self.library, self.class_name, self.base, rules, self.depth_fields, self.init,
                          self.attn_implementation, self.dtype, self.output], sort_keys=True, default=repr)
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    def __repr__(self):
        return (f"zoo.factory({self.library!r}, {self.class_name!r}, base width {self.base_width}, scale "
                f"{sorted(self.scale)}, depth {list(self.depth_fields) or None}, init {self.init!r}, attention "
                f"{self.attn_implementation!r}, {self.dtype})")

    # ------------------------------------------------------------------ configs and modules
    def config(self, width, depth=None):
        """The library config at ``width`` (and ``depth``: every depth field set to it)."""
        cls = model_class(self.library, self.class_name)
        kw = dict(self.base)
        kw.update({f: _value(r, int(width), f) for f, r in self.scale.items()})
        if depth is not None:
            if not self.depth_fields:
                raise ValueError("this factory has no depth field: zoo.factory(..., depth='num_hidden_layers')")
            kw.update({f: int(depth) for f in self.depth_fields})
        kw.update(use_cache=False, attn_implementation=self.attn_implementation)
        cfg = cls.config_class(**kw)
        for f in _DROPOUT_FIELDS:          # the config class's own defaults too (GPT-2's 0.1)
            if isinstance(getattr(cfg, f, None), float) and getattr(cfg, f) > 0:
                setattr(cfg, f, 0.0)
        return cfg

    def __call__(self, width, depth=None):
        import torch

        if self.depth_fields and depth is None:
            raise ValueError(f"factory(width, depth): this factory scales depth ({', '.join(self.depth_fields)})")
        cls = model_class(self.library, self.class_name)
        cfg = self.config(width, depth)
        model = cls(cfg).to(getattr(torch, self.dtype))
        if self.init == "sp":
            _sp_init(model, self._fan_in_at_base(depth))
        if self.output == "logits":
            model.register_forward_hook(logits_only)
        model.train()
        return model

    def _fan_in_at_base(self, depth):
        """{parameter name: fan-in} of the model at the base width (built on the meta device, no memory)."""
        if self._base_fan_in is None:
            import torch

            cls = model_class(self.library, self.class_name)
            d = None if not self.depth_fields else (depth if depth is not None else 1)
            with torch.device("meta"):
                m = cls(self.config(self.base_width, d))
            self._base_fan_in = {n: fi for n, fi in _fan_ins(m)}
        return self._base_fan_in

    def roles(self, widths=(32, 64)) -> dict:
        """{parameter: role} for the weights of transformers' ``Conv1D`` (GPT-2's projections, stored (in, out):
        fan-in is dimension 0), which the bridge does not classify itself: pass ``roles=f.roles()`` to
        :func:`limits.torch.parameterise` (from the shapes at two widths, built on the meta device)."""
        import torch

        na, nb = sorted({int(w) for w in widths})[:2]
        shapes = []
        for n in (na, nb):
            with torch.device("meta"):
                m = self._build_plain(n)
            shapes.append({name: tuple(mod.weight.shape) for name, mod in m.named_modules() if _is_conv1d(mod)})
        out = {}
        for name, sa in shapes[0].items():
            sb = shapes[1][name]
            s_in, s_out = sa[0] != sb[0], sa[1] != sb[1]
            role = {(False, True): "input", (True, True): "hidden", (True, False): "output"}.get((s_in, s_out))
            if role:
                out[(f"{name}." if name else "") + "weight"] = role
        return out

    def _build_plain(self, width):
        cls = model_class(self.library, self.class_name)
        return cls(self.config(width, 1 if self.depth_fields else None))

    def __getstate__(self):
        s = dict(self.__dict__)
        s["_base_fan_in"] = None
        return s

    @property
    def loss(self):
        """The bridge's default loss (integer targets: cross-entropy over the last axis; else ½ MSE)."""
        from ..coordcheck import default_loss

        return default_loss


def _base_width(scale, base):
    """n₀ = the first field's base value over its multiple (its first entry for a list field)."""
    first, rule = next(iter(scale.items()))
    v = base.get(first)
    if isinstance(rule, (list, tuple)) and rule and isinstance(v, (list, tuple)) and v:
        rule, v = rule[0], v[0]
    if not (isinstance(rule, numbers.Real) and rule > 0 and isinstance(v, int)):
        raise ValueError(f"scale: the first field {first!r} is the width — give it a positive multiple (a sequence "
                         "of them for a list field) and an integer base value")
    n0 = v / rule
    if abs(n0 - round(n0)) > 1e-9:
        raise ValueError(f"scale: base {first} = {v} over its multiple {rule:g} is not an integer width")
    return int(round(n0))


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def logits_only(module, args, out):
    """Forward hook: a ``ModelOutput``'s ``logits`` (or first tensor) as the module's output."""
    if isinstance(out, dict):
        if out.get("logits") is not None:
            return out["logits"]
        return next(v for v in out.values() if v is not None)
    return out


def _fan_ins(model):
    """(weight name, fan-in) of every weight whose module's contraction is known: ``nn.Linear``, ``Conv*d``
    (in/groups · kernel), transformers' ``Conv1D`` (weight stored (in, out)); embeddings are not listed."""
    from torch import nn

    emb = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    out = []
    for name, mod in model.named_modules():
        w = getattr(mod, "weight", None)
        if w is None or id(w) in emb or not isinstance(w, nn.Parameter):
            continue
        pre = f"{name}." if name else ""
        if isinstance(mod, nn.Linear):
            out.append((pre + "weight", mod.in_features))
        elif isinstance(mod, nn.modules.conv._ConvNd):
            out.append((pre + "weight", int(w[0].numel()) if not isinstance(mod, nn.modules.conv._ConvTransposeNd)
                        else int(w.shape[0]) * math.prod(mod.kernel_size) // mod.groups))
        elif _is_conv1d(mod):
            out.append((pre + "weight", int(w.shape[0])))
    return out


def _is_conv1d(mod):
    """transformers' ``Conv1D`` (a Linear whose weight is stored (in, out))."""
    w = getattr(mod, "weight", None)
    return (type(mod).__name__ == "Conv1D" and type(mod).__module__.startswith("transformers.")
            and w is not None and w.dim() == 2)


def _sp_init(model, base_fan_in):
    """Rescale every weight with a growing fan-in by √(fan-in(n₀)/fan-in(N)) (module docstring)."""
    import torch

    with torch.no_grad():
        for name, fan_in in _fan_ins(model):
            f0 = base_fan_in.get(name, _block0(name, base_fan_in))
            if f0 is None:
                raise ValueError(f"zoo init: no weight {name!r} at the base width to take the init from")
            if f0 != fan_in:
                model.get_parameter(name).mul_(math.sqrt(f0 / fan_in))


def _block0(name, base):
    """A deeper block's weight takes block 0's base fan-in (``layers.7.mlp.up_proj.weight`` → ``layers.0.…``)."""
    parts = name.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            alt = ".".join(parts[:i] + ["0"] + parts[i + 1:])
            if alt in base:
                return base[alt]
    return None


def factory(library, class_name, base_config, scale, *, depth=None, init="sp", attn_implementation="eager",
            dtype="float64", output="logits") -> ZooFactory:
    """A :class:`ZooFactory`: ``library`` ("transformers"), its model ``class_name``, the ``base_config`` (a dict
    of config fields or a config object), ``scale`` {field: rule} (module docstring), ``depth``: the config
    field(s) set to the depth (then ``factory(width, depth)``), ``init``: "sp" or "library",
    ``attn_implementation``: "eager" or "sdpa", ``dtype``: torch dtype name, ``output``: "logits" or None."""
    return ZooFactory(library, class_name, base_config, scale, depth=depth, init=init,
                      attn_implementation=attn_implementation, dtype=dtype, output=output)


__all__ = ["factory", "ZooFactory", "model_class", "logits_only", "LIBRARIES", "INITS"]
