"""``limits.torch.zoo`` — μP / Depth-μP and their checks on the model zoos (optional extra ``zoo``: Hugging Face
transformers, built from configs at each width; no weights are downloaded):

    from limits.torch import zoo
    f = zoo.factory("transformers", "LlamaForCausalLM", base_config, scale={"hidden_size": 1, ...})
    P = limits.torch.parameterise(f, "muP", widths=(64, 128), example_inputs=zoo.tasks.example(f))
    r = limits.torch.coord_check(P, (64, 128, 256, 512), zoo.tasks.text(...)["train"], seeds=10)

Importing this package imports neither transformers nor torch; building a model does.
"""
from __future__ import annotations

from ..._lazy import lazy_attributes

_EXPORTS = {"factory": "factories", "ZooFactory": "factories", "model_class": "factories"}
_SUBMODULES = ("factories", "tasks", "families", "coverage")
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, globals(), exports=_EXPORTS, submodules=_SUBMODULES)
del lazy_attributes
