"""The roles a tensor can take in a width parameterisation, and ``--role NAME=ROLE`` options (torch-free: the
command line checks them before importing torch).

    input     fan-in fixed, fan-out ∝ width (embeddings, read-in weights, class/register tokens, position embeddings)
    hidden    fan-in and fan-out ∝ width
    output    fan-in ∝ width, fan-out fixed (read-out weights)
    vector    one dimension ∝ width, added or multiplied elementwise (biases, gains)
    constant  nothing ∝ width
"""
from __future__ import annotations

ROLES = ("input", "hidden", "output", "vector", "constant")


def parse_roles(values, option="--role") -> dict:
    """{tensor name: role} from ``NAME=ROLE`` strings (ValueError naming ``option`` and the bad value)."""
    out = {}
    for v in values or ():
        name, sep, role = str(v).partition("=")
        name, role = name.strip(), role.strip()
        if not sep or not name or role not in ROLES:
            raise ValueError(f"{option} {v!r}: expected NAME=ROLE with ROLE one of {', '.join(ROLES)}")
        if name in out and out[name] != role:
            raise ValueError(f"{option}: tensor {name!r} given two roles ({out[name]}, {role})")
        out[name] = role
    return out


__all__ = ["ROLES", "parse_roles"]
