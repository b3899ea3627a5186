"""Why the byte-level μP GPT's final LayerNorm gain is outside the coordinate check's asymptotic regime at widths
32–256 (``docs/theory/params.rst`` §8). A validation report, not a timing::

    python benchmarks/coordcheck_gain_crossover.py            # ~2 CPU-minutes

For the hand-written μP GPT (:mod:`limits.torch.handwritten`) at widths 32…1024 (4 inits each), on the
calibration's two data sets — byte-level (vocabulary 256, 8 × 32 tokens) and the small one (16, 16 × 8) — it prints
per width, for the gain γ of ``ln_f`` (the LayerNorm feeding the read-out W, logits z = W(γ ⊙ x̂)):

* N·mean_i g_i and N·std_i g_i of its first gradient g = ∂L/∂γ (L the mean cross-entropy over the T tokens);
* N·mean_i c_i, c_i = mean_v W_vi² · mean_t x̂_ti² — the self-interaction the softmax puts into g: z_v contains
  W_vi γ_i x̂_ti, so ∂p/∂z feeds W_vi² x̂_ti² back into g_i, always ≥ 0 (the predicted mean of g);
* the ratio mean/std: Adam's first step is −η·sign(g), biased towards one sign by Φ(mean/std);
* rms(Δγ)/η after 3 Adam steps — what the check's row ``ln_f.weight`` measures (its effect, x̂ having rms 1).

With the read-out's entries W_vi of std σ_W = c_W/N (μP; c_W ≈ 4.6 here) the random part of g averages T_eff
independent token terms, std ≈ σ_W/√T_eff, and the self-interaction is ≈ σ_W², so mean/std ≈ c_W√T_eff/N =: κ/N:
the limit N → ∞ has an unbiased first step and finite widths approach it as κ/N, not as the N^{-1/2} the exponent
test allows for. T_eff is at most the batch's tokens (256 byte-level: κ ≈ 75, so N = 32–256 is not asymptotic for
this row) and smaller when targets repeat (a vocabulary of 16: tokens with one target share W's row).
"""
from __future__ import annotations

import sys

import numpy as np

WIDTHS = (32, 64, 128, 256, 512, 1024)
CASES = {"byte-level (vocab 256, 8 × 32 tokens)": dict(batch=8, vocab=256, seq=32),
         "small (vocab 16, 16 × 8 tokens)": dict(batch=16, vocab=16, seq=8)}


def _one(N, seed, batch, vocab, seq, lr=1e-2, steps=3):
    import torch
    import torch.nn.functional as F

    from limits.torch import handwritten as hw

    X, Y = hw.gpt_data(batch, vocab=vocab, seq=seq, seed=0)
    torch.manual_seed(seed)
    m, groups = hw.gpt(N, "sdpa", vocab=vocab, seq=seq)
    groups = [{"params": g["params"], "lr": lr * g["lr_mult"]} for g in groups]
    opt = torch.optim.Adam(groups, lr=lr)
    g0 = m.ln_f.weight.detach().clone()
    with torch.no_grad():
        h = m.wte(X) + m.wpe(torch.arange(X.shape[1]))
        for b in m.blocks:
            h = b(h)
        xh = F.layer_norm(h, (N,)).double().reshape(-1, N)
        coh = (m.out.weight.double().pow(2).mean(0) * xh.pow(2).mean(0)).mean().item()
    g = None
    for t in range(steps):
        opt.zero_grad()
        out = m(X)
        F.cross_entropy(out.reshape(-1, vocab), Y.reshape(-1)).backward()
        if t == 0:
            g = m.ln_f.weight.grad.double().clone()
        opt.step()
    du = (m.ln_f.weight.detach() - g0).double().pow(2).mean().sqrt().item() / lr
    return N * g.mean().item(), N * g.std().item(), N * coh, (g.mean() / g.std()).item(), du


def main(argv=None):
    import torch

    torch.set_num_threads(1)
    for name, kw in CASES.items():
        print(f"\n{name}\n\n| N | N·mean g | N·std g | N·mean c (predicted mean) | mean/std | rms Δγ/η after 3 steps |\n"
              "|---:|---:|---:|---:|---:|---:|", flush=True)
        for N in WIDTHS:
            v = np.mean([_one(N, 1007 * 1_000_003 + s, **kw) for s in range(4)], axis=0)
            print(f"| {N} | {v[0]:.3f} | {v[1]:.3f} | {v[2]:.3f} | {v[3]:.2f} | {v[4]:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
