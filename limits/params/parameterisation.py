"""The :class:`Parameterisation` object: width exponents per layer class, output scale, depth
exponents, learning algorithm and optimiser, in one of two conventions.

Layer classes: ``"input"`` (fan-in = data dimension, fixed), ``"hidden"`` (fan-in N),
``"output"`` (read-out, fan-out O(1)).

**variance convention** (seed 000 Eqs. 7–14, Bordelon–Pehlevan):
``h_l = N^{-a_l} W_l h_{l-1}``, ``W_ij ~ N(0, N^{-b_l})``, ``f = h_L / γ``, ``γ = γ0 N^d``,
SGD/gradient flow on ``W`` with ``η_l = η0 γ² N^{-c_l}`` (seed 000 has one global ``c``);
for Adam the γ² factor is dropped (Adam is invariant to the loss scale): ``η_l = η0 N^{-c_l}``.

**std convention** (Tensor Programs IV, seed 003 Eq. 9): ``W_l = N^{-a_l} w_l``,
``w_ij ~ N(0, N^{-2 b_l})``, ``η_l = η' N^{-c_l}``, output ``f = W_out h`` (no separate γ: d ≡ 0).

Conversion (derived, :func:`Parameterisation.to_std` / :func:`to_variance`): both conventions
train the same raw weights (variance ``W`` ≡ std ``w``) on the same output, so
``a^std_l = a^var_l`` (input, hidden), ``a^std_out = a^var_out + d`` (γ is a read-out multiplier),
``b^std = b^var / 2`` (std dev vs variance), and since ``η^var = η0 γ0² N^{2d - c}`` is the raw-weight
learning rate, ``c^std = c^var − 2d`` (SGD) or ``c^std = c^var`` (Adam).
The inverse is one-to-one once ``d`` is fixed; the canonical choice makes the pre-output
``h_L = Θ(1)`` (seed 000 Desideratum 1 on the read-out, ``2 a^var_out + b^var_out = 1``), i.e.
``d = a^std_out + b^std_out − 1/2``.

**θ-shift symmetry** (TP4): ``(a_l, b_l, c_l) → (a_l+θ, b_l−θ, c_l−2θ)`` in std convention
(``c_l − θ`` for Adam) leaves the function and the training trajectory unchanged; in variance
convention it reads ``(a_l+θ, b_l−2θ, c_l−2θ)`` (SGD). With per-layer learning rates θ may differ
per layer. :meth:`Parameterisation.gauge` ``("a0")`` picks θ_l = −a_l (seed 003's gauge).

Depth exponents (residual networks): ``depth_alpha`` = α, branch multiplier ``L^{-α}``;
``depth_gamma`` = γ, effective per-layer update ``L^{-γ}`` (Tensor Programs VI);
:attr:`depth_lr_exponent` = exponent of L in the learning rate (SGD ``α − γ``, Adam ``−γ``).
``None`` for plain MLPs.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import sympy as sp

from ..vocabulary import ALGORITHMS, CONVENTIONS, LAYERS, OPTIMIZERS, SYMBOLS, check_choice  # noqa: F401 (re-exported)
from .expr import HALF, as_exponent, fmt  # noqa: F401 (HALF re-exported)



def _triple(values, name):
    if isinstance(values, dict):
        missing = [k for k in LAYERS if k not in values]
        extra = [k for k in values if k not in LAYERS]
        if missing or extra:
            raise ValueError(f"{name} must give exactly the layers {LAYERS}; missing {missing}, unknown {extra}")
        values = [values[k] for k in LAYERS]
    elif isinstance(values, (str, int, float)) or isinstance(values, sp.Basic):
        values = [values] * 3
    values = list(values)
    if len(values) != 3:
        raise ValueError(f"{name} needs 3 entries (input, hidden, output), got {len(values)}")
    return tuple(as_exponent(v, f"{name}[{lay}]") for v, lay in zip(values, LAYERS))


@dataclass(frozen=True)
class Parameterisation:
    """Exponents ``a, b, c`` per layer class (tuples ordered input, hidden, output), output
    exponent ``d`` (variance convention; 0 in std), convention, algorithm, optimiser, depth
    exponents and algorithm extras (``gamma_bar_L`` for PC, ``e_B`` for GNT)."""

    a: tuple
    b: tuple
    c: tuple
    d: sp.Expr = sp.Integer(0)
    convention: str = "std"
    algorithm: str = "bp"
    optimizer: str = "sgd"
    name: str = "custom"
    depth_alpha: sp.Expr | None = None
    depth_gamma: sp.Expr | None = None
    gamma_bar_L: sp.Expr | None = None
    e_B: sp.Expr | None = None
    pc_model: str | None = None
    notes: tuple = field(default=(), compare=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def make(cls, a, b, c, d=0, *, convention="std", algorithm="bp", optimizer="sgd", name="custom",
             depth_alpha=None, depth_gamma=None, gamma_bar_L=None, e_B=None, pc_model=None, notes=()):
        """Validated constructor: numbers, fractions, strings (restricted parser) or sympy."""
        check_choice(convention, CONVENTIONS, "convention")
        check_choice(algorithm, ALGORITHMS, "algorithm")
        check_choice(optimizer, OPTIMIZERS, "optimizer")
        d = as_exponent(d, "d")
        if convention == "std" and d != 0:
            raise ValueError("d must be 0 in the std convention (the read-out multiplier is a_out); "
                             "use convention='variance' or fold d into a_out")
        if gamma_bar_L is not None and algorithm != "pc":
            raise ValueError("gamma_bar_L is only meaningful for algorithm='pc'")
        if e_B is not None and algorithm != "gnt":
            raise ValueError("e_B is only meaningful for algorithm='gnt'")
        if pc_model is not None:
            check_choice(pc_model, ("equilibrium", "single-shot"), "pc_model")
            if algorithm != "pc":
                raise ValueError("pc_model is only meaningful for algorithm='pc'")
        if algorithm == "pc" and pc_model is None:
            pc_model = "single-shot" if gamma_bar_L is not None else "equilibrium"
        if algorithm == "pc" and pc_model == "single-shot" and gamma_bar_L is None:
            gamma_bar_L = sp.Integer(0)
        if algorithm == "gnt" and e_B is None:
            e_B = sp.Integer(1)
        if optimizer == "adam" and algorithm not in ("bp",):
            raise ValueError("optimizer='adam' is supported for algorithm='bp' only")
        return cls(_triple(a, "a"), _triple(b, "b"), _triple(c, "c"), d, convention, algorithm, optimizer,
                   str(name),
                   None if depth_alpha is None else as_exponent(depth_alpha, "depth_alpha"),
                   None if depth_gamma is None else as_exponent(depth_gamma, "depth_gamma"),
                   None if gamma_bar_L is None else as_exponent(gamma_bar_L, "gamma_bar_L"),
                   None if e_B is None else as_exponent(e_B, "e_B"),
                   pc_model, tuple(notes))

    # ------------------------------------------------------------------ access
    def exponent(self, layer: str, symbol: str) -> sp.Expr:
        """Exponent ``symbol`` ∈ {a, b, c, d} of layer class ``layer`` ∈ {input, hidden, output}
        (``d`` is global: the same for every layer; always 0 in the std convention)."""
        check_choice(layer, LAYERS, "layer")
        check_choice(symbol, SYMBOLS, "symbol")
        if symbol == "d":
            return self.d
        return getattr(self, symbol)[LAYERS.index(layer)]

    def exponents(self) -> dict:
        """``{"a_input": ..., ..., "c_output": ..., "d": ...}``."""
        out = {f"{s}_{lay}": self.exponent(lay, s) for s in "abc" for lay in LAYERS}
        out["d"] = self.d
        return out

    def theta(self, layer: str) -> sp.Expr:
        """Shift-invariant learning-rate exponent (std convention): ``2a + c`` (SGD) or ``a + c`` (Adam)."""
        s = self.to_std()
        i = LAYERS.index(check_choice(layer, LAYERS, "layer"))
        return sp.expand((2 if self.optimizer == "sgd" else 1) * s.a[i] + s.c[i])

    @property
    def output_scale(self) -> sp.Expr:
        """``a_out + b_out`` in std convention: read-out entries are ``Θ(N^{-(a+b)})``; f_0 = Θ(N^{1/2 − (a+b)})."""
        s = self.to_std()
        return sp.expand(s.a[2] + s.b[2])

    @property
    def depth_lr_exponent(self):
        """Exponent of L in the learning rate (TP6): SGD ``α − γ``, Adam ``−γ``; None without depth."""
        if self.depth_alpha is None or self.depth_gamma is None:
            return None
        return sp.expand(self.depth_alpha - self.depth_gamma if self.optimizer == "sgd" else -self.depth_gamma)

    @property
    def free_symbols(self) -> set:
        out = set()
        for v in (*self.a, *self.b, *self.c, self.d, self.depth_alpha, self.depth_gamma, self.gamma_bar_L, self.e_B):
            if v is not None:
                out |= v.free_symbols
        return out

    def subs(self, mapping) -> "Parameterisation":
        """Substitute values for symbols (e.g. ``{gamma_bar_L: -1}``)."""
        byname = {s.name: s for s in self.free_symbols}
        unknown = [k for k in mapping if isinstance(k, str) and k not in byname]
        if unknown:
            raise ValueError(f"subs: no symbol named {', '.join(map(repr, unknown))} in this parameterisation "
                             f"(its symbols: {', '.join(sorted(byname)) or 'none'})")
        m = {(byname.get(k, sp.Symbol(k, real=True)) if isinstance(k, str) else k): as_exponent(v, str(k))
             for k, v in mapping.items()}
        f = lambda v: None if v is None else sp.expand(as_exponent(v).subs(m))  # noqa: E731
        return replace(self, a=tuple(map(f, self.a)), b=tuple(map(f, self.b)), c=tuple(map(f, self.c)),
                       d=f(self.d), depth_alpha=f(self.depth_alpha), depth_gamma=f(self.depth_gamma),
                       gamma_bar_L=f(self.gamma_bar_L), e_B=f(self.e_B))

    # ------------------------------------------------------------------ conventions
    def _c_shift_factor(self):
        return 2 if self.optimizer == "sgd" else 0

    def to_std(self) -> "Parameterisation":
        """Same network and training in the std convention (derivation in the module docstring)."""
        if self.convention == "std":
            return self
        d = self.d
        a = (self.a[0], self.a[1], sp.expand(self.a[2] + d))
        b = tuple(sp.expand(x / 2) for x in self.b)
        c = tuple(sp.expand(x - self._c_shift_factor() * d) for x in self.c)
        return replace(self, a=a, b=b, c=c, d=sp.Integer(0), convention="std")

    def to_variance(self, d=None) -> "Parameterisation":
        """Same network in the variance convention. ``d`` defaults to the canonical
        ``a_out + b_out − 1/2`` (std exponents), which makes the pre-output ``h_L = Θ(1)``."""
        if self.convention == "variance":
            if d is None or as_exponent(d, "d") == self.d:
                return self
            return self.to_std().to_variance(d)
        d = sp.expand(self.a[2] + self.b[2] - HALF) if d is None else as_exponent(d, "d")
        a = (self.a[0], self.a[1], sp.expand(self.a[2] - d))
        b = tuple(sp.expand(2 * x) for x in self.b)
        c = tuple(sp.expand(x + self._c_shift_factor() * d) for x in self.c)
        return replace(self, a=a, b=b, c=c, d=d, convention="variance")

    def convert(self, convention: str, **kw) -> "Parameterisation":
        check_choice(convention, CONVENTIONS, "convention")
        return self.to_std() if convention == "std" else self.to_variance(**kw)

    # ------------------------------------------------------------------ symmetry
    def shift(self, theta, layer: str | None = None) -> "Parameterisation":
        """TP4 symmetry: ``(a, b, c) → (a+θ, b−θ, c−2θ)`` (std, SGD), ``c−θ`` for Adam; variance
        convention ``(a+θ, b−2θ, c−2θ)``. ``layer=None`` shifts every layer class by the same θ."""
        th = as_exponent(theta, "theta")
        layers = LAYERS if layer is None else (check_choice(layer, LAYERS, "layer"),)
        bf = 1 if self.convention == "std" else 2
        cf = 2 if self.optimizer == "sgd" else 1
        a, b, c = list(self.a), list(self.b), list(self.c)
        for lay in layers:
            i = LAYERS.index(lay)
            a[i] = sp.expand(a[i] + th)
            b[i] = sp.expand(b[i] - bf * th)
            c[i] = sp.expand(c[i] - cf * th)
        return replace(self, a=tuple(a), b=tuple(b), c=tuple(c))

    def gauge(self, kind: str = "a0") -> "Parameterisation":
        """Representative of the θ-shift orbit: ``"a0"`` sets every ``a_l = 0`` (seed 003 Table 1
        gauge) by a per-layer shift. Only valid with per-layer learning rates (always the case here)."""
        check_choice(kind, ("a0",), "gauge")
        p = self
        for i, lay in enumerate(LAYERS):
            p = p.shift(-p.a[i], lay)
        return p

    def equivalent(self, other: "Parameterisation") -> bool:
        """Same training dynamics up to conventions and θ-shifts."""
        if not isinstance(other, Parameterisation):
            return False
        x, y = self.to_std().gauge("a0"), other.to_std().gauge("a0")
        same = lambda u, v: sp.simplify(u - v) == 0  # noqa: E731
        key = ("algorithm", "optimizer", "pc_model")
        if any(getattr(x, k) != getattr(y, k) for k in key):
            return False
        for k in ("depth_alpha", "depth_gamma", "gamma_bar_L", "e_B"):
            u, v = getattr(x, k), getattr(y, k)
            if (u is None) != (v is None) or (u is not None and not same(u, v)):
                return False
        return all(same(u, v) for u, v in zip((*x.a, *x.b, *x.c), (*y.a, *y.b, *y.c)))

    def one_step_exponents(self) -> dict:
        """Predicted growth exponents of one-step BP updates (see
        :func:`limits.params.constraints.one_step_exponents`); used by ``limits.finite.coordcheck``."""
        from .constraints import one_step_exponents

        return one_step_exponents(self)

    def multipliers(self) -> dict:
        """Symbolic per-layer numbers in terms of width ``N``, depth ``L`` (residual branches) and
        the data dimension ``D``: ``{layer: {"multiplier", "init_variance", "learning_rate"}}`` in
        this object's convention (std: ``N^{-a}``, ``N^{-2b}``, ``N^{-c}``; variance: ``N^{-a}``,
        ``N^{-b}``, ``γ0² N^{2d-c}`` for SGD), hidden multipliers including ``L^{-α}`` and the
        learning rate including ``L^{depth_lr_exponent}``; the read-in multiplier includes ``D^{-1/2}``
        and (variance) the read-out includes ``1/γ = N^{-d}``. Seed 001 Table 1 in exponent form."""
        N, L, D = sp.Symbol("N", positive=True), sp.Symbol("L", positive=True), sp.Symbol("D", positive=True)
        out = {}
        for i, lay in enumerate(LAYERS):
            mult = N ** (-self.a[i])
            if lay == "input":
                mult = mult / sp.sqrt(D)
            if lay == "hidden" and self.depth_alpha is not None:
                mult = mult * L ** (-self.depth_alpha)
            if lay == "output" and self.convention == "variance":
                mult = mult * N ** (-self.d)
            var = N ** (-(2 if self.convention == "std" else 1) * self.b[i])
            lr = N ** (-self.c[i])
            if self.convention == "variance" and self.optimizer == "sgd":
                lr = lr * N ** (2 * self.d)
            if lay == "hidden" and self.depth_lr_exponent is not None:
                lr = lr * L ** self.depth_lr_exponent
            out[lay] = {"multiplier": sp.simplify(mult), "init_variance": sp.simplify(var),
                        "learning_rate": sp.simplify(lr)}
        return out

    # ------------------------------------------------------------------ display
    def to_dict(self) -> dict:
        out = {"name": self.name, "convention": self.convention, "algorithm": self.algorithm,
               "optimizer": self.optimizer}
        out.update({k: fmt(v) for k, v in self.exponents().items()})
        for k in ("depth_alpha", "depth_gamma", "gamma_bar_L", "e_B"):
            v = getattr(self, k)
            if v is not None:
                out[k] = fmt(v)
        if self.pc_model:
            out["pc_model"] = self.pc_model
        return out

    def __str__(self):
        rows = [f"{self.name} ({self.convention} convention, {self.algorithm}/{self.optimizer})"]
        for s in "abc":
            rows.append(f"  {s}: " + ", ".join(f"{lay}={fmt(self.exponent(lay, s))}" for lay in LAYERS))
        if self.convention == "variance":
            rows.append(f"  d: {fmt(self.d)}")
        for k in ("depth_alpha", "depth_gamma", "gamma_bar_L", "e_B"):
            v = getattr(self, k)
            if v is not None:
                rows.append(f"  {k}: {fmt(v)}")
        return "\n".join(rows)
