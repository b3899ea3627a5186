"""Is a factory's own initialisation SP? :func:`limits.torch.parameterise` scales each tensor's init by
r^{b_SP − b}, taking the factory's init as SP's at every width (std ∝ N^0 for input-like weights and embeddings,
∝ N^{−½} for hidden and output-like weights). A factory that initialises with a width-independent std (nanoGPT's
N(0, 0.02²) everywhere) breaks that assumption: its hidden weights would keep std 0.02 at every width under "μP".

Per weight (roles input, hidden, output; biases and gains are not judged: torch's own bias init U(±1/√fan-in)
vanishes with width, which the tables' vector row tolerates, as ``mup`` does) the init exponent is measured from
the factory's modules at the two classification widths n_a < n_b,

    ê = ln(s_b / s_a) / ln(n_b / n_a),    SE(ê)² = Σ_w (κ_w − 1) / (4 n_w) / ln(n_b / n_a)²

(s_w: the entries' rms at width w, n_w their count, κ_w their kurtosis: SE(ln s)² = (κ − 1)/(4n) for iid entries),
and a tensor deviates when ê differs from SP's exponent by more than ¼ (half the smallest step, ½, between the
tables' exponents) *and* by more than 4 SE (a false refusal of an iid SP init has probability < 10⁻⁴ per tensor).
Tensors initialised to zero at either width are not judged (zero is zero at every width).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SP_EXPONENT = {"input": 0.0, "hidden": -0.5, "output": -0.5}      # std ∝ N^e under SP
TOLERANCE = 0.25
Z = 4.0


@dataclass(frozen=True)
class InitDeviation:
    """Tensor ``name`` (role ``role``): init std ∝ N^``measured`` (± ``se``) where SP has N^``expected``."""

    name: str
    role: str
    measured: float
    se: float
    expected: float

    def __str__(self):
        return f"{self.name} ({self.role}): std ∝ N^{self.measured:+.2f} ± {self.se:.2f}, SP N^{self.expected:+.2f}"


def _log_rms(t):
    """(ln rms, its SE) of a tensor's entries (module docstring)."""
    x = t.detach().double().reshape(-1)
    m2 = float(x.pow(2).mean())
    if m2 == 0.0:
        return None
    kurt = float(x.pow(4).mean()) / m2 ** 2
    return 0.5 * math.log(m2), math.sqrt(max(kurt - 1.0, 0.0) / (4 * x.numel()))


def measured_exponent(ma, mb, na, nb, name):
    """ê of the tensor ``name`` between modules ``ma`` (width na) and ``mb`` (nb), or None (zero at a width)."""
    a, b = _log_rms(dict(ma.named_parameters())[name]), _log_rms(dict(mb.named_parameters())[name])
    if a is None or b is None:
        return None
    return (b[0] - a[0]) / math.log(nb / na)


def init_deviations(ma, mb, na, nb, rules) -> tuple:
    """:class:`InitDeviation` of every input/hidden/output tensor of ``rules`` whose init in the modules ``ma``
    (width ``na``) and ``mb`` (``nb``) is not SP's (module docstring)."""
    pa, pb = dict(ma.named_parameters()), dict(mb.named_parameters())
    span = math.log(nb / na)
    out = []
    for q in rules:
        if q.role not in SP_EXPONENT or q.name not in pa or q.name not in pb:
            continue
        a, b = _log_rms(pa[q.name]), _log_rms(pb[q.name])
        if a is None or b is None:
            continue
        e = (b[0] - a[0]) / span
        se = math.hypot(a[1], b[1]) / span
        want = SP_EXPONENT[q.role] if getattr(q, "base_init", None) is None else q.base_init
        dev = abs(e - want)
        if dev > TOLERANCE and dev > Z * se:
            out.append(InitDeviation(q.name, q.role, e, se, want))
    return tuple(out)


def check_sp_init(factory, rules, na, nb, build, models=None):
    """Refuse (ValueError naming every tensor) a factory whose init is not SP (module docstring); ``models``: the
    factory's modules at na and nb (seed 0) if built already."""
    if models is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            models = build(factory, na), build(factory, nb)
    ma, mb = models
    bad = init_deviations(ma, mb, na, nb, rules)
    if bad:
        listed = "; ".join(str(d) for d in bad[:8]) + (f" (+{len(bad) - 8} more)" if len(bad) > 8 else "")
        raise ValueError(
            f"parameterise: the factory's init is not SP at widths {na}, {nb} — {listed}. parameterise scales "
            "the init as if it were SP (std ∝ N^0 for input weights and embeddings, ∝ fan-in^-½ for hidden and "
            "output weights), so these tensors would not get the table's init: initialise them as SP (e.g. "
            "nanoGPT's std 0.02 → 0.02·√(n₀/N) for hidden and output weights), or pass check_init=False "
            "(limits coord-check: --no-init-check) to take the init as SP anyway")


__all__ = ["InitDeviation", "init_deviations", "check_sp_init", "measured_exponent", "SP_EXPONENT"]
