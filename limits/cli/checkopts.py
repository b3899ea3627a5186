"""Options and the JSON summary shared by `limits check` and `limits predict --check` (one module both
command groups import, so neither imports the other)."""
from __future__ import annotations


def check_summary(c) -> dict:
    """The JSON of a check for `limits predict --check` and `limits check`: the verdict, the statistics
    and each block's own (in the user's units)."""
    return {"passed": c.passed, "verdict": c.verdict, "verdict_text": c.verdict_text(), "worst_z": c.worst_z,
            "rate": c.rate, "rate_ci": c.rate_ci, "rate_expected": c.rate_expected, "scale_bias": c.scale_bias,
            "scale_bias_se": c.scale_bias_se, "power": c.power, "reasons": list(c.reasons),
            "widths": c.widths, "inits": c.inits, "blocks": c.details.get("blocks"),
            "per_point": c.details.get("per_point"), "not_tested": c.not_tested}


def _target_power(text):
    import argparse

    from ..checking.core import MIN_TARGET_POWER

    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not MIN_TARGET_POWER <= v < 1:
        raise argparse.ArgumentTypeError(f"must be a relative error in [{MIN_TARGET_POWER:g}, 1), e.g. 0.02; "
                                         f"got {text!r}")
    return v


def add_check_options(s, what):
    """--widths/--inits/--seed/--target-power with the defaults of ``limits.check`` (None = its own)."""
    s.add_argument("--widths", type=int, nargs="+", default=None,
                   help=f"widths of the finite networks (default: those of limits.check — {what})")
    s.add_argument("--inits", type=int, default=None, help="initialisations per width (default: limits.check's)")
    s.add_argument("--target-power", type=_target_power, default=None, metavar="FRACTION",
                   help="smallest relative error the check must detect with 80 %% probability (e.g. 0.02); "
                        "inits are raised to reach it (at most 4096)")
