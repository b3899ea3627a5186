"""Memory and time of the DMFT of a composition, from shapes alone, before anything is allocated
(docs/theory/dmft.rst §6.5; the pattern of :func:`limits.kernels.composed.check_cost`).

With b = P·S entries per time block of a stage (P samples, S positions) and n = n_t·b:

* one hidden stage (L = 1): fields of the current time only, M·(4 b_h + 4 b_x) floats; flops ≈ 4 M n_t (b_h² + b_x²)
  per replica (the march and the equal-time kernels);
* L ≥ 2: per stage the paths' histories M·n_t·(2 b_h + 3 b_x) floats, the causal operators C, D and the source
  factors 2 (n_h² + n_x²) floats; flops ≈ 3 M (n_h² + n_x²) (march and two-time rows) + (n_h³ + n_x³)/3 (factors)
  + (1/3) M n_t³ b_o (b_h² + b_x²) per response (b_o = b_x for ⟨∂x/∂r⟩, b_h for ⟨∂g/∂u⟩; the dominant term);

plus the kept equal-time kernels n_t (b_x² + b_h²) per stage and replica. ``FLOPS_PER_SECOND`` is the lowest rate
measured on the 2-core reference machine with one BLAS thread (``benchmarks/dmft_serial_validation.py --cost``: these
counts per CPU-second were 2·10¹⁰ for a one-stage CNN, 10¹⁰ for two conv stages, 4·10⁹ for small blocks, where
element-wise passes dominate): seconds are an estimate, usually above the time taken.
"""
from __future__ import annotations

FLOPS_PER_SECOND = 4e9
MAX_SECONDS = 3600.0
KEEP_SPATIAL_BYTES = 64 * 2**20       # equal-time spatial kernels are kept (keep_spatial="auto") below this size


def estimate(chain, n_t, M, replicas) -> dict:
    """{"bytes", "flops", "seconds", "worst", "kept_bytes"} of a solve (module docstring); "worst" names the stage
    whose responses or fields cost most."""
    P, L = chain.P, chain.L
    mem, flops, kept, worst = 0.0, 0.0, 0.0, (0.0, "")
    for k in range(L):
        bh, bx = P * chain.stages[k].S_out, P * chain.maps[k].S_x
        kept += 8.0 * n_t * (bh * bh + bx * bx) * replicas
        if L == 1:
            mem += 8.0 * (M * (4 * bh + 4 * bx) + 3 * (bh * bh + bx * bx))
            f = 4.0 * M * n_t * (bh * bh + bx * bx)
        else:
            nh, nx = n_t * bh, n_t * bx
            mem += 8.0 * (M * n_t * (2 * bh + 3 * bx) + 2 * (nh * nh + nx * nx))
            f = 3.0 * M * (nh * nh + nx * nx) + (nh ** 3 + nx ** 3) / 3.0
            for bo, want in ((bx, k + 1 < L), (bh, k > 0)):
                if want:
                    f += (1.0 / 3.0) * M * n_t ** 3 * bo * (bh * bh + bx * bx)
        flops += f
        if f > worst[0]:
            worst = (f, f"{chain.stages[k].name} ({chain.stages[k].S_out} positions × {P} samples × {n_t} times)")
    flops *= replicas
    return {"bytes": mem + 64 * 2**20, "flops": flops, "seconds": flops / FLOPS_PER_SECOND, "worst": worst[1],
            "kept_bytes": kept}


def check_cost(est, max_memory=None, max_seconds=None, what="limits.dmft.solve") -> None:
    """ValueError with the estimate and what to change when a solve needs more than ``max_memory`` bytes (default
    half the available memory) or about ``max_seconds`` (default one hour)."""
    from ...memory import available_memory
    from ...progress import format_seconds
    from ...readfile import human

    if max_memory is None:
        avail = available_memory()
        limit, src = (None, "") if avail is None else (0.5 * avail, f"half the available memory ({human(avail)})")
    else:
        limit, src = float(max_memory), f"max_memory = {human(max_memory)}"
    need = est["bytes"]
    if limit is not None and need > limit:
        raise ValueError(f"{what}: this composition's DMFT needs ≈ {human(need)} (costliest stage: {est['worst']}), "
                         f"more than {src}; use fewer samples, time steps (larger dt), paths M or positions (pool or "
                         "stride earlier), or pass max_memory= (bytes) if the memory is there")
    budget = MAX_SECONDS if max_seconds is None else float(max_seconds)
    if est["seconds"] > budget:
        raise ValueError(f"{what}: this composition's DMFT would take about {format_seconds(est['seconds'])} "
                         f"({est['flops']:.2g} flops at {FLOPS_PER_SECOND:.0e}/s; costliest stage: {est['worst']}), "
                         f"more than the {format_seconds(budget)} allowed; use fewer samples, time steps, paths M, "
                         "replicas or positions, or pass max_seconds= to allow it")
