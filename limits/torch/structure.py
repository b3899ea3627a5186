"""What a parameterisation does to the structures :mod:`limits.torch.graph` finds: attention logit scales and
tied read-outs (used by :func:`limits.torch.parameterise`).

**Attention.** Under a feature-learning table every attention site must follow μP (TP5): logits ∝ q·k/d_h when
the head dimension d_h ∝ width, a fixed scale when d_h is fixed (heads ∝ width). The site's query projection
rows are multiplied in the forward by r^{q} (r = N/N₀, q = :meth:`AttentionScaling.query_exponent`:
−½ for 1/√d_h with d_h ∝ N) — the same function as multiplying the logits by r^{q}, with the same gradients.
A site whose query cannot be traced to a Linear's rows, or whose logits cannot be read ("unrecognised"),
is refused by name when it needs a change; kernel-regime tables (SP, NTK) keep the module's own scale.

**Tied read-out** (``lm_head.weight is wte.weight``, as ``mup``'s shared read-out). The one tensor w follows the
embedding's row (a_in, b_in, c_in); the read-out use is multiplied in the forward by r^{−a_r} with
a_r = a_out + b_out − b_in, so the effective read-out r^{−a_r} w has the table's init r^{−(a_out + b_out)}.
Its learning rate then matches the table iff a_r + c_in = a_out + c_out (Adam) or 2a_r + c_in = 2a_out + c_out
(SGD) — true for μP, MF and NTK; μP (Adam): a_r = 1, the read-out multiplier 1/r (mup's 1/width_mult).
Under a table that leaves the factory unchanged (SP) the tie is kept as built (a_r = 0): the factory's tied
read-out has the embedding's init, which no multiplier with one learning rate can turn into SP's read-out row;
:func:`limits.torch.coord_check` then predicts the read-out's rows by that rule (the embedding's row, its scale at
init moved from the read-out row's by (a+b)_out − (a+b)_in). Either way the read-out reads the embedding the stream
carries, a coherent self-term: its scale at init is predicted in [e, e + ½] (:mod:`limits.torch.plan`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TiedReadout:
    """The read-out use ``name`` (of ``module``) of the tensor stored as rule ``storage``: forward multiplier
    r^{−exponent}; ``fold``: the affine module feeding only the read-out (where a checkpoint export stores the
    multiplier), or None with ``fold_reason``."""

    name: str
    storage: str
    module: str
    exponent: float
    fold: str | None = None
    fold_reason: str | None = None


def tie_roles(ties, first_names) -> dict:
    """{storage name: (role, module path, module type)} forced by the ties; other ties refused with the reason.
    ``first_names``: the parameter names of ``named_parameters()`` (one per tensor)."""
    forced = {}
    for tie in ties:
        storage = next(n for n in tie.names if n in first_names) if tie.kind != "functional" else None
        if tie.kind == "embedding-readout":
            forced[storage] = ("input", tie.embedding, "Embedding")
        elif tie.kind == "other":
            raise ValueError(f"parameterise: tensor {storage!r} is shared with "
                             f"{[n for n in tie.names if n != storage]} ({tie.detail}); one tensor cannot take two "
                             "rows of the table — only a token embedding shared with a Linear read-out "
                             "(lm_head.weight = wte.weight) or the same layer type reused are parameterised")
    return forced


def tied_readouts(ties, rules, table, optimizer, folds, identity) -> tuple:
    """:class:`TiedReadout` of every embedding-readout tie (module docstring); ``folds``: {read-out path:
    (fold path, reason)}; ``identity``: the table leaves the factory unchanged (SP)."""
    by_name = {q.name: q for q in rules}
    out = []
    for tie in ties:
        if tie.kind != "embedding-readout":
            continue
        storage = next(n for n in tie.names if n in by_name)
        readout = next(n for n in tie.names if n.rpartition(".")[0] == tie.readout)
        emb = by_name[storage]
        a_out, b_out, c_out = (float(table.exponent("output", s)) for s in "abc")
        a_r = 0.0 if identity else a_out + b_out - emb.b
        k = 2.0 if optimizer == "sgd" else 1.0
        if not identity and abs(k * a_r + emb.c - (k * a_out + c_out)) > 1e-9:
            raise ValueError(
                f"parameterise: the read-out {readout!r} is the embedding's tensor {storage!r}; with the embedding's "
                f"learning rate N^-{emb.c:g} and the read-out multiplier N^-{a_r:g} its learning rate cannot be the "
                f"table's (a, b, c)_out = ({a_out:g}, {b_out:g}, {c_out:g}) — untie them")
        fold, why = folds.get(tie.readout, (None, "the forward was not traced"))
        out.append(TiedReadout(readout, storage, tie.readout, a_r, fold, why))
    return tuple(out)


def attention_rules(scalings, rules, feature_learning) -> dict:
    """{parameter name: (query exponent, (start, stop) at the first width)} for the query projections of the
    attention sites that need a μP scale (module docstring); refuses by name what cannot be rewritten."""
    if not feature_learning:
        return {}
    names = {q.name for q in rules}
    out = {}
    for sc in scalings:
        s = sc.site
        if s.kind == "unrecognised":
            raise ValueError(f"parameterise: attention {s.name!r}: {s.reason}; a feature-learning parameterisation "
                             "must set every attention's logit scale — write it as F.scaled_dot_product_attention "
                             "or softmax(q @ kᵀ · s)")
        qe = sc.query_exponent()
        if qe == 0.0:
            continue
        if s.query is None:
            raise ValueError(f"parameterise: attention {s.name!r} ({s.scale_expr}, head dimension ∝ width) needs its "
                             f"logits multiplied by N^{qe:g} for μP, but {s.reason}; the scale cannot be applied")
        (na, nb), qb = sc.widths, sc.site_b.query if sc.site_b is not None else None
        if qb is None or (qb.param, qb.start * na, qb.stop * na) != (s.query.param, s.query.start * nb, s.query.stop * nb):
            raise ValueError(f"parameterise: attention {s.name!r}: the query rows of {s.query.param!r} are "
                             f"[{s.query.start}, {s.query.stop}) at width {na} but "
                             f"{'unknown' if qb is None else f'[{qb.start}, {qb.stop})'} at width {nb}, not "
                             "proportional to the width")
        for pname in (s.query.param, s.query.bias):
            if pname is None:
                continue
            if pname not in names:
                raise ValueError(f"parameterise: attention {s.name!r}: its query projection {pname!r} is not a "
                                 "parameter of its own (shared?); the μP scale cannot be applied to it")
            new = (qe, (s.query.start, s.query.stop))
            if out.get(pname, new) != new:
                raise ValueError(f"parameterise: {pname!r} feeds queries of attentions that need different μP "
                                 f"scales ({out[pname]} and {new})")
            out[pname] = new
    return out


__all__ = ["TiedReadout", "tie_roles", "tied_readouts", "attention_rules"]
