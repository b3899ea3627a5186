"""Response functions of one hidden stage by reverse-mode differentiation along each path (docs/theory/dmft.rst §6).

A stage's single-site equations (per path; block rows = times, each block b = P·S entries)

    h(t) = u(t) + Σ_{s<t} C(t, s) g(s),   x = ψ(h),   z(t) = r(t) + Σ_{s≤t} D(t, s) x(s),   g = ψ'(h)ᵀ z

are differentiated backwards from an output at time t (seed: the identity on x(t) or g(t)); with adjoints
x̄, z̄, ḡ, h̄ of the fields, from s = t down to 0:

    ḡ(s) = [seed g, s = t] + Σ_{s<s'≤t} h̄(s') C(s', s)          z̄(s) = ḡ(s) ∂g/∂z(s)
    x̄(s) = [seed x, s = t] + Σ_{s≤s'≤t} z̄(s') D(s', s)          h̄(s) = x̄(s) ∂x/∂h(s) + ḡ(s) ∂g/∂h(s)

Then ∂x(t)/∂r(s) = z̄(s) and ∂g(t)/∂u(s) = h̄(s); their averages over paths are the rows t of the responses
⟨∂x/∂r⟩ (strictly causal: s < t) and ⟨∂g/∂u⟩ (causal: s ≤ t, the equal-time block carries φ''). One output time
costs O(m·b·t²·b²) per chunk of m paths: the whole trajectory O(M (n_t b)³ / 3), memory O(m·b·n_t·b).
"""
from __future__ import annotations

import numpy as np

CHUNK_BYTES = 64 * 2**20        # adjoint arrays of one chunk of paths stay below this


def response_row(st, t, kind):
    """Row t of ⟨∂x/∂r⟩ (``kind="A"``: b_x × t·b_x) or ⟨∂g/∂u⟩ (``kind="B"``: b_h × (t+1)·b_h) of the stage state
    ``st`` (:class:`limits.dmft.serial.march.Stage`), averaged over its M paths."""
    bh, bx = st.bh, st.bx
    bo = bx if kind == "A" else bh
    ncol = t * bx if kind == "A" else (t + 1) * bh
    out = np.zeros((bo, ncol))
    M = st.h.shape[0]
    per = 8.0 * bo * (t + 1) * (bh + bx) * 2
    chunk = int(max(1, min(M, CHUNK_BYTES // max(per, 1.0))))
    for c0 in range(0, M, chunk):
        Hb, Zb = _adjoint(st, t, kind, slice(c0, min(M, c0 + chunk)))
        out += (Zb[:, :, :t * bx] if kind == "A" else Hb[:, :, :(t + 1) * bh]).sum(axis=0)
    return out / M


def _adjoint(st, t, kind, sl):
    """Adjoints h̄ (m, o, (t+1)·b_h) and z̄ (m, o, (t+1)·b_x) of the paths ``sl`` (module docstring); stored as
    (m·o) × columns so that every sum over later times is one matrix product."""
    bh, bx, psi = st.bh, st.bx, st.psi
    a = st.a[sl, :t + 1]                          # (m, t+1, P, S_a)
    m = a.shape[0]
    bo = bx if kind == "A" else bh
    d1, d2w = psi.jacobian_factors(a, st.z[sl, :t + 1])
    Hb = np.zeros((m * bo, (t + 1) * bh))
    Zb = np.zeros((m * bo, (t + 1) * bx))
    C, D = st.C, st.D
    eye = np.eye(bo)
    for s in range(t, -1, -1):
        hs, xs = slice(s * bh, (s + 1) * bh), slice(s * bx, (s + 1) * bx)
        if s < t:
            gb = (Hb[:, (s + 1) * bh:] @ C[(s + 1) * bh:(t + 1) * bh, hs]).reshape(m, bo, bh)
        else:
            gb = np.broadcast_to(eye, (m, bo, bo)).copy() if kind == "B" else np.zeros((m, bo, bh))
        Zb[:, xs] = psi.bar_z_from_g(gb, d1[:, s]).reshape(m * bo, bx)
        xb = (Zb[:, s * bx:] @ D[s * bx:(t + 1) * bx, xs]).reshape(m, bo, bx)
        if kind == "A" and s == t:
            xb += eye
        Hb[:, hs] = (psi.bar_h_from_x(xb, d1[:, s]) + psi.bar_h_from_g(gb, d2w[:, s])).reshape(m * bo, bh)
    return Hb.reshape(m, bo, -1), Zb.reshape(m, bo, -1)
