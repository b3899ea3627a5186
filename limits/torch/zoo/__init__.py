"""``limits.torch.zoo`` — μP / Depth-μP and their checks on the model zoos (optional extra ``zoo``: Hugging Face
transformers, built from configs at each width; no weights are downloaded):

    from limits.torch import zoo
    f = zoo.factory("transformers", "LlamaForCausalLM", base_config, scale={"hidden_size": 1, ...})
    P = limits.torch.parameterise(f, "muP", widths=(64, 128), example_inputs=zoo.tasks.example(f))
    r = limits.torch.coord_check(P, (64, 128, 256, 512), zoo.tasks.text(...)["train"], seeds=10)

Importing this package imports neither transformers nor torch; building a model does.
"""
from __future__ import annotations

import importlib

_EXPORTS = {"factory": "factories", "ZooFactory": "factories", "model_class": "factories"}
_SUBMODULES = ("factories", "tasks", "families", "coverage")
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'limits.torch.zoo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
