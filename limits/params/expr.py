"""Exponent values: conversion to sympy and a RESTRICTED parser for user-typed expressions.

Exponents are exact sympy numbers (``Rational``) or linear expressions in a few declared symbols
(``gamma_bar_L``, ``e_B``, ``alpha``, ``gamma``, ...). Text typed by a user (``--a1 "-1/2"``) is
parsed by a tiny tokenizer + recursive-descent parser accepting only

    numbers (integers, decimals), + - * / unary minus, parentheses, declared symbol names

— no ``eval``, no ``sympify`` of raw text. Anything else raises ``ValueError``.
Decimals are converted exactly (``"0.25"`` → ``1/4``).
"""
from __future__ import annotations

import numbers
import re
from fractions import Fraction

import sympy as sp

#: symbols users may refer to by name (extend via ``parse(text, symbols={...})``)
HALF = sp.Rational(1, 2)

SYMBOLS = {
    "gamma_bar_L": sp.Symbol("gamma_bar_L", real=True),
    "e_B": sp.Symbol("e_B", real=True),
    "alpha": sp.Symbol("alpha", real=True),
    "gamma": sp.Symbol("gamma", real=True),
    "theta": sp.Symbol("theta", real=True),
}

_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|([A-Za-z_][A-Za-z_0-9]*)|(.))")
_MAX_LEN = 200


def _tokenize(text: str):
    if len(text) > _MAX_LEN:
        raise ValueError(f"expression too long (> {_MAX_LEN} characters)")
    tokens = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the regex always matches one char
            raise ValueError(f"cannot parse {text!r} at position {pos}")
        num, name, op = m.groups()
        if num is not None:
            tokens.append(("num", num))
        elif name is not None:
            tokens.append(("name", name))
        elif op in "+-*/()":
            tokens.append(("op", op))
        else:
            raise ValueError(f"unexpected character {op!r} in {text!r}; allowed: numbers, + - * / ( ) "
                             f"and declared symbols")
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, tokens, symbols, text):
        self.t = tokens
        self.i = 0
        self.symbols = symbols
        self.text = text
        self.depth = 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self):          # expr := term (('+'|'-') term)*
        v = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            w = self.term()
            v = v + w if op == "+" else v - w
        return v

    def term(self):          # term := unary (('*'|'/') unary)*
        v = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            w = self.unary()
            if op == "*":
                v = v * w
            else:
                if w == 0:
                    raise ValueError(f"division by zero in {self.text!r}")
                if not w.is_number:
                    raise ValueError(f"division by a symbol is not allowed in {self.text!r}")
                v = v / w
        return v

    def unary(self):         # unary := ('+'|'-') unary | atom
        self.depth += 1
        if self.depth > 50:
            raise ValueError(f"expression nested too deeply: {self.text!r}")
        try:
            tok = self.peek()
            if tok == ("op", "-"):
                self.take()
                return -self.unary()
            if tok == ("op", "+"):
                self.take()
                return self.unary()
            return self.atom()
        finally:
            self.depth -= 1

    def atom(self):          # atom := number | symbol | '(' expr ')'
        kind, val = self.take()
        if kind == "num":
            return sp.Rational(Fraction(val))
        if kind == "name":
            if val not in self.symbols:
                raise ValueError(f"unknown symbol {val!r} in {self.text!r}; declared symbols: "
                                 f"{', '.join(sorted(self.symbols)) or '(none)'}")
            return self.symbols[val]
        if (kind, val) == ("op", "("):
            self.depth += 1
            v = self.expr()
            self.depth -= 1
            if self.take() != ("op", ")"):
                raise ValueError(f"missing ')' in {self.text!r}")
            return v
        if kind is None:
            raise ValueError(f"unexpected end of expression {self.text!r}")
        raise ValueError(f"unexpected token {val!r} in {self.text!r}")


def parse(text: str, symbols=None, name: str = "expression") -> sp.Expr:
    """Parse user text into an exact sympy expression (restricted grammar, see module doc)."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a string, got {type(text).__name__}")
    table = dict(SYMBOLS if symbols is None else symbols)
    try:
        tokens = _tokenize(text)
        if not tokens:
            raise ValueError("empty expression")
        p = _Parser(tokens, table, text)
        v = p.expr()
        if p.i != len(tokens):
            raise ValueError(f"unexpected trailing input {tokens[p.i][1]!r} in {text!r}")
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    v = sp.expand(v)
    if not _is_linear(v):
        raise ValueError(f"{name}: exponents must be linear in the symbols, got {v}")
    return v


def _is_linear(v) -> bool:
    syms = list(v.free_symbols)
    if not syms:
        return True
    try:
        return sp.Poly(v, *syms).total_degree() <= 1
    except sp.PolynomialError:
        return False


def as_exponent(value, name: str = "exponent") -> sp.Expr:
    """Exact exponent from an int, Fraction, float (converted exactly via its shortest decimal),
    sympy Rational/Symbol/linear expression, or a string (restricted parser)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name} must be a number, fraction or symbolic expression, got {value!r}")
    if isinstance(value, str):
        return parse(value, name=name)
    if isinstance(value, sp.Basic):
        if not isinstance(value, sp.Expr):
            raise ValueError(f"{name} must be a sympy expression, got {type(value).__name__}")
        v = sp.nsimplify(value, rational=True) if value.has(sp.Float) else value
        if v.has(sp.I) or v.is_real is False:
            raise ValueError(f"{name} must be real, got {value}")
        if v.has(sp.zoo, sp.oo, -sp.oo, sp.nan) or not _is_linear(sp.expand(v)):
            raise ValueError(f"{name} must be finite and linear in its symbols, got {value}")
        return sp.expand(v)
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, numbers.Integral):
        return sp.Integer(int(value))
    if isinstance(value, numbers.Real):
        f = float(value)
        if f != f or f in (float("inf"), float("-inf")):
            raise ValueError(f"{name} must be finite, got {value}")
        return sp.Rational(Fraction(repr(f)))
    raise ValueError(f"{name} must be a number, fraction or symbolic expression, got {type(value).__name__}")


def fmt(v) -> str:
    """Plain-text rendering: ``-1/2``, ``-gamma_bar_L - 1``."""
    return str(v if isinstance(v, sp.Basic) else as_exponent(v, "value"))


def latex(v) -> str:
    s = sp.latex(v if isinstance(v, sp.Basic) else as_exponent(v, "value")).replace("gamma_{bar L}", r"\bar{\gamma}_L")
    return s.replace(r"\gamma_{bar L}", r"\bar{\gamma}_L")
