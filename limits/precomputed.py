"""Kernels computed once and reused by every prediction (``kernel=`` of :mod:`limits.predict`).

    k = limits.kernels.kernel(m, np.concatenate([X_train, X_test]))      # 15 CPU-s for a CNN at P = 500 …
    p = limits.predict.nngp_posterior(m, X_train, Y_train, X_test, kernel=k)   # … then no kernel work at all
    g = limits.predict.gradient_descent(m, X_train, Y_train, X_test, t=np.inf, kernel=k)

A given kernel is the symmetric kernel ``limits.kernels.kernel(model, X_all)`` (X2 None; a Model's
:class:`~limits.kernels.cross.KernelResult` or a composition's
:class:`~limits.kernels.composed.SerialKernelResult`, also as loaded from its ``.npz`` + ``.json``) of any set
of inputs ``X_all`` holding every training and test row — the two stacked, or a pool from which several
training sets are drawn. Before it is used it is tied to the prediction:

* its model must be the prediction's model: the recorded model dicts are equal up to ``d_out`` and ``lr``
  (the read-out kernels do not depend on them); a model with a user-defined activation records only its
  name and is refused (nothing could verify it);
* every row of X_train and X_test must be a row of its recorded inputs, compared by the bytes of the
  float64 rows (−0.0 = 0.0), so a kernel of other inputs — or of inputs rounded on the way — is refused,
  naming the first missing row;
* it must hold the kernels the prediction needs (the NTK for gradient descent) and be finite.

Then K_XX, K_*X, K_** (and Θ_XX, Θ_*X) are its rows and columns at those indices: the entries are
entrywise functions of the two inputs, so they equal the kernels computed on X_train and X_test alone (to
rounding, ≤ 1e-12 relative; exactly for the stacked inputs of a Model). ``limits predict --kernel PATH``
keeps one in PATH.npz + PATH.json (computed and saved the first time, verified and reused afterwards).
"""
from __future__ import annotations

import numpy as np

# model fields the read-out NNGP/NTK do not depend on (the outputs share the kernel; η scales time only)
KERNEL_FREE_FIELDS = ("d_out", "lr")
KERNEL_TYPES = ("limits.kernels.cross.KernelResult", "limits.kernels.composed.SerialKernelResult")


class KernelMismatch(ValueError):
    """A given kernel that does not fit the prediction: ``reason`` says why (the message adds what to pass)."""

    def __init__(self, what, reason, hint):
        super().__init__(f"{what}: kernel= {reason}; {hint}")
        self.reason = reason


_POOL_HINT = ("pass limits.kernels.kernel(model, X_all) with every training and test row in X_all (e.g. "
              "np.concatenate([X_train, X_test]))")


def kernel_identity(d) -> dict | None:
    """The part of a recorded model dict that determines its kernels (None when the dict cannot tell: a
    user-defined activation recorded by name only)."""
    if not isinstance(d, dict):
        return None
    if "serial" in d:
        return d
    if "depth" not in d or not isinstance(d.get("activation"), str):
        return None
    return {k: v for k, v in d.items() if k not in KERNEL_FREE_FIELDS}


def _is_kernel_result(k) -> bool:
    from .results import Result

    return isinstance(k, Result) and type(k)._registry_name() in KERNEL_TYPES


def _row_keys(A):
    """Each row of ``A`` (P, …) as bytes of its float64 values, −0.0 folded into 0.0."""
    A = np.ascontiguousarray(np.asarray(A, dtype=np.float64).reshape(A.shape[0], -1)) + 0.0
    return [r.tobytes() for r in A]


def row_indices(pool, A, name, what) -> np.ndarray:
    """Index into ``pool``'s rows of every row of ``A`` (the first occurrence); ``ValueError`` naming the first
    row of ``A`` that is not there."""
    if pool.shape[1:] != A.shape[1:]:
        raise KernelMismatch(what, f"was computed on inputs of shape {pool.shape[1:]} per row, {name} has "
                                   f"{A.shape[1:]}", _POOL_HINT)
    if pool.shape == A.shape and np.array_equal(pool + 0.0, A + 0.0):
        return np.arange(A.shape[0])
    index = {}
    for i, key in enumerate(_row_keys(pool)):
        index.setdefault(key, i)
    out = np.empty(A.shape[0], dtype=np.intp)
    for j, key in enumerate(_row_keys(A)):
        i = index.get(key)
        if i is None:
            raise KernelMismatch(what, f"does not belong to these inputs: row {j} of {name} is not among the "
                                       f"{pool.shape[0]} inputs it was computed on", _POOL_HINT)
        out[j] = i
    return out


def check_kernel(k, model_dict, what, ntk):
    """``k`` checked as a reusable kernel of the model recorded as ``model_dict`` (module docstring)."""
    if isinstance(k, str):
        raise ValueError(f"{what}: kernel= takes a kernel result (limits.kernels.kernel(model, X_all)), got the "
                         f"string {k[:40]!r}")
    if not _is_kernel_result(k):
        raise ValueError(f"{what}: kernel= must be the result of limits.kernels.kernel(model, X_all) (a "
                         f"KernelResult or SerialKernelResult), got {type(k).__name__}")
    if not k.symmetric or k.X2 is not None or k.X1 is None:
        raise KernelMismatch(what, "must be the symmetric kernel of one input set holding the training and the "
                                   "test rows (a cross kernel lacks K_XX or K_**)", _POOL_HINT + " and X2=None")
    mine, theirs = kernel_identity(model_dict), kernel_identity(k.model)
    if mine is None or theirs is None:
        raise KernelMismatch(what, "cannot be verified for a model with a user-defined activation (its record "
                                   "names the function only)", "leave it out to compute the kernels")
    if mine != theirs:
        diff = sorted(f for f in set(mine) | set(theirs) if mine.get(f) != theirs.get(f))
        raise KernelMismatch(what, f"belongs to another model (differing: {', '.join(diff)[:200]})",
                             "pass the kernel of this model")
    missing = [g for g in (("nngp", "ntk") if ntk else ("nngp",)) if getattr(k, g) is None]
    if missing:
        raise KernelMismatch(what, f"holds no {' and no '.join(g.upper() for g in missing)}",
                             "compute it with get=('nngp', 'ntk')")
    for g in ("nngp", "ntk") if ntk else ("nngp",):
        if not np.all(np.isfinite(getattr(k, g))):
            raise KernelMismatch(what, f"has a {g.upper()} that overflowed (chaotic/deep regime)",
                                 "use smaller sigma_w2 or depth")


def split_kernel(k, model_dict, X, Xs, what, ntk, test_cov=True) -> dict:
    """The dict of :func:`limits.predict.train_test_kernels` (``K``, ``K_sx``, ``K_ss``, ``T``, ``T_sx``) read
    from the reusable kernel ``k`` at the rows of ``X`` (training) and ``Xs`` (test; None: none), after
    :func:`check_kernel`; ``test_cov="diag"``: ``K_ss`` is the diagonal only (P_test,)."""
    check_kernel(k, model_dict, what, ntk)
    pool = np.asarray(k.X1)
    i = row_indices(pool, X, "X_train", what)
    j = row_indices(pool, Xs, "X_test", what) if Xs is not None else np.empty(0, dtype=np.intp)
    K, T = np.asarray(k.nngp), (np.asarray(k.ntk) if ntk else None)

    def block(A, a, b):
        if a.size and b.size and np.array_equal(a, np.arange(a[0], a[0] + a.size)) and \
                np.array_equal(b, np.arange(b[0], b[0] + b.size)):
            return np.ascontiguousarray(A[a[0]:a[0] + a.size, b[0]:b[0] + b.size])
        return A[np.ix_(a, b)]

    K_ss = K[j, j].copy() if test_cov == "diag" else (block(K, j, j) if test_cov else None)
    return {"K": block(K, i, i), "K_sx": block(K, j, i), "K_ss": K_ss,
            "T": None if T is None else block(T, i, i), "T_sx": None if T is None else block(T, j, i)}


def load_kernel(path, option="--kernel"):
    """A kernel saved by ``limits kernel ... --save PATH`` or ``limits predict ... --kernel PATH``: only the
    kernel result types are accepted (the type is read before anything is imported)."""
    from .results import load_result, read_payload

    payload = read_payload(path, option)
    kind = payload.get("type") if isinstance(payload, dict) else None
    if kind not in KERNEL_TYPES:
        raise ValueError(f"{option}: {path} holds {str(kind)[:80]!r}, not a kernel of `limits kernel` "
                         f"({', '.join(KERNEL_TYPES)})")
    return load_result(path, option)
