"""The result of :func:`limits.torch.depth.depth_coord_check` — torch-free, so saved checks (the gallery's
``torch_transfer_depth``) load and replot without torch."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..results import Result
from ..stats import mean_se

QUANTITIES = ("stream scale at init", "stream change", "output change")


@dataclass(frozen=True)
class DepthCoordCheck(Result):
    """Per depth and seed: the rms of the stream (the last block's output h_L) at init and its change, and the output's
    change, after each step (``samples`` (D, S, steps+1, 3)); fitted exponents of L at the last step with 95 %
    CIs, TP6's predictions and verdicts (1 consistent within ``tol``, 0 not, −1 no prediction)."""

    name: str
    depths: np.ndarray
    width: int
    steps: int
    seeds: int
    samples: np.ndarray
    slope: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    predicted: np.ndarray
    consistent: np.ndarray
    tol: float
    cpu_seconds: float
    settings: dict

    @property
    def passed(self) -> bool:
        return not np.any(self.consistent == 0)

    def to_markdown(self) -> str:
        ds = ", ".join(str(int(d)) for d in self.depths)
        rows = [f"**coord check across depth — {self.name}**: depths {ds}, width {self.width}; {self.seeds} seeds, "
                f"{self.steps} step(s); fitted exponent of L (95 % CI, tol ±{self.tol:g}). CPU {self.cpu_seconds:.1f} s\n",
                "| quantity | fitted [CI] | predicted | verdict |", "|---|---|---|---|"]
        for q, name in enumerate(QUANTITIES):
            p = self.predicted[q]
            v = {1: "ok", 0: "**NO**", -1: "—"}[int(self.consistent[q])]
            rows.append(f"| {name} | {self.slope[q]:+.2f} [{self.ci_low[q]:+.2f}, {self.ci_high[q]:+.2f}] | "
                        f"{'—' if not np.isfinite(p) else f'{p:+.2f}'} | {v} |")
        return "\n".join(rows) + "\n"

    def plot(self, ax=None):
        """rms of each quantity against depth (log–log, mean ± SE over seeds)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(4.5, 3.4))
        for q, name in enumerate(QUANTITIES):
            y = self.samples[:, :, 0 if q == 0 else -1, q]
            m, se = mean_se(y, axis=1)
            ax.errorbar(self.depths, m, yerr=se, fmt="o-", ms=3, capsize=2,
                        label=f"{name}: L^{self.slope[q]:+.2f}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("depth L")
        ax.set_ylabel("rms")
        ax.set_title(self.name, fontsize=8)
        ax.legend(fontsize=6)
        return ax


__all__ = ["DepthCoordCheck", "QUANTITIES"]
