"""``limits.torch`` — the PyTorch bridge (optional extra ``torch``; nothing here is imported by the core).

    net = limits.mlp(8, 2, parameterisation="muP").to_torch(256)        # == model.finite(256), as nn.Module
    P = limits.torch.parameterise(factory, "muP", widths=(64, 128))     # factory(width) -> nn.Module
    r = limits.torch.coord_check(P, widths=(64, 128, 256, 512), data=(X, Y), optimizer="adam", lr=1e-2)
    r.passed, r.failures(), r.to_markdown(), r.plot()
    P.optimizer(net, lr, weight_decay=wd); P.export_state_dict(net); P.import_state_dict(net, sd)
    limits.torch.find_attention(net, example_inputs), limits.torch.find_ties(net)     # from the traced graph
    limits.check(limits.kernels.kernel(model, X), network=MyMLP)        # a user's module declared equal to model
    t = limits.torch.transfer(factory, "muP", widths=(64, 128, 256), lrs=2.0 ** np.arange(-12, -3), data=(X, Y))
    t.drift, t.drift_ci, t.verdict, t.to_markdown(), t.plot()           # μTransfer: optimum lr per width, drift

Submodules import torch only when an attribute is first used (``import limits.torch`` alone does not),
so the command line can register ``limits coord-check`` without torch installed.
"""
from __future__ import annotations

from .._lazy import lazy_attributes

_EXPORTS = {
    "TorchNetwork": "network", "from_model": "network", "mse_loss": "network",
    "parameterise": "depth", "Parameterised": "apply_params", "TensorRule": "apply_params",
    "coord_check": "coordcheck", "TorchCoordCheck": "coordcheck",
    "resolve_factory": "resolve",
    "equivalent": "equivalence", "Equivalence": "equivalence", "NotEquivalent": "equivalence",
    "transfer": "transfer_study", "TransferResult": "transfer_result",
    "DepthParameterised": "depth", "depth_coord_check": "depth", "DepthCoordCheck": "depth_result",
}

_SUBMODULES = ("network", "apply_params", "coordcheck", "recording", "exponents", "kernels", "equivalence", "resolve",
               "demos", "handwritten", "cli", "transfer_study", "transfer_fit", "transfer_result", "transfer_cli",
               "transfer_demos", "depth", "depth_result")

_EXPORTS.update({"find_attention": "graph", "find_ties": "graph", "capture_logits": "graph"})
_SUBMODULES += ("graph", "structure", "optim", "checkpoint", "offsets", "plan", "suite", "roles")
_SUBMODULES += ("branches", "zoo")        # zoo: the optional extra "zoo" (transformers), imported when used
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, globals(), exports=_EXPORTS, submodules=_SUBMODULES)
del lazy_attributes
