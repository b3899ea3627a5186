"""The result of a μTransfer study (:func:`limits.torch.transfer`): a frozen dataclass that saves to .npz + .json,
prints as Markdown and draws loss against log2 learning rate, one curve per size (as Tensor Programs V, Fig. 1).
No torch here: saved results load and plot without it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..results import Result


def _pct(x):
    return f"{100 * x:.0f} %"


@dataclass(frozen=True)
class TransferResult(Result):
    """Per size ``sizes[k]`` (``axis`` "width" or "depth"), log2 learning rate ``log2_lrs[m]`` and seed: the raw
    losses ``train_loss``/``test_loss`` (K, M, S; test NaN without held-out data), ``loss0`` at init,
    ``diverged`` and ``failed`` (bool), ``cpu_s`` per run, minibatch ``trajectory`` (K, M, S, T); the analysed
    curve of ``criterion`` (``curve_mean``/``curve_se``, diverged runs entered at ``cap``), ``optimum`` per size
    with ``optimum_ci``, ``at_edge``; ``drift`` per doubling with ``drift_ci``; the prediction
    (``predicted_drift``, ``prediction_kind`` "exact"/"bound"/"none", ``prediction`` its derivation);
    ``verdict`` ("transfers", "drifts", "inconclusive") and ``as_predicted`` (1 yes, 0 contradicted, −1 undecided:
    inconclusive or no prediction);
    ``target_optimum`` at size ``target`` with ``target_ci``; ``calibration`` (verdict rates of simulated
    studies of this design: ``drifts``, ``rates`` (n, 3: transfers, drifts, inconclusive), ``se``, ``n_sim``)."""

    name: str
    parameterisation: str
    optimizer: str
    axis: str
    sizes: np.ndarray
    fixed_size: int | None
    log2_lrs: np.ndarray
    seeds: int
    steps: int
    criterion: str
    train_loss: np.ndarray
    test_loss: np.ndarray
    loss0: np.ndarray
    diverged: np.ndarray
    failed: np.ndarray
    cap: np.ndarray
    cpu_s: np.ndarray
    trajectory: np.ndarray
    curve_mean: np.ndarray
    curve_se: np.ndarray
    optimum: np.ndarray
    optimum_ci: np.ndarray
    at_edge: np.ndarray
    drift: float
    drift_ci: np.ndarray
    intercept: float
    other_optimum: np.ndarray | None
    other_drift: float
    other_drift_ci: np.ndarray
    predicted_drift: float
    prediction_kind: str
    prediction: str
    verdict: str
    verdict_reason: str
    as_predicted: int
    margin: float
    level: float
    n_boot: int
    target: float
    target_optimum: float
    target_ci: np.ndarray
    calibration: dict | None
    settings: dict

    @property
    def passed(self) -> bool:
        """The verdict is the predicted one (μP-like: transfers; SP-like: drifts downwards)."""
        return self.as_predicted == 1

    @property
    def cpu_seconds(self) -> float:
        return float(np.nansum(self.cpu_s))

    def _sizes_text(self):
        s = ", ".join(str(int(n)) for n in self.sizes)
        fixed = "" if self.fixed_size is None else f" ({'depth' if self.axis == 'width' else 'width'} {self.fixed_size})"
        return f"{self.axis}s {s}{fixed}"

    def _pred_text(self):
        if self.prediction_kind == "exact":
            return f"predicted {self.predicted_drift:+.2f} (exact)"
        if self.prediction_kind == "bound":
            return f"predicted ≤ {self.predicted_drift:+.2f} as {self.axis} → ∞ (a bound; the sign is tested)"
        return "no prediction"

    def __repr__(self):
        lo, hi = self.drift_ci
        ok = {1: "as predicted", 0: "NOT as predicted", -1: "undecided"}[self.as_predicted]
        return (f"TransferResult({self.name}, {self.axis} {int(self.sizes[0])}–{int(self.sizes[-1])}: drift "
                f"{self.drift:+.2f} [{lo:+.2f}, {hi:+.2f}] per doubling, {self._pred_text()} → {self.verdict}, {ok})")

    def _calibration_text(self):
        c = self.calibration
        if not c:
            return ""
        parts = []
        for d, r, se in zip(np.asarray(c["drifts"]), np.asarray(c["rates"]), np.asarray(c["se"])):
            what = "flat optimum (the null)" if d == 0 else f"true drift {d:+.2f}"
            parts.append(f"{what}: transfers {_pct(r[0])}, drifts {_pct(r[1])} (± {_pct(se[1])}), "
                         f"inconclusive {_pct(r[2])}")
        return (f"Calibration ({int(c['n_sim'])} simulated studies of this design at its own seed noise): "
                + "; ".join(parts) + ".\n")

    def to_markdown(self) -> str:
        lr0, lr1 = self.log2_lrs[0], self.log2_lrs[-1]
        cpu = self.cpu_s[np.isfinite(self.cpu_s)]
        head = (f"**μTransfer — {self.name}**: {self._sizes_text()}; {len(self.log2_lrs)} learning rates "
                f"2^{lr0:g}…2^{lr1:g}; {self.seeds} seeds × {self.steps} steps; verdict on the {self.criterion} "
                f"loss. CPU {self.cpu_seconds:.0f} s ({cpu.size} runs, {np.min(cpu) if cpu.size else 0:.2f}–"
                f"{np.max(cpu) if cpu.size else 0:.2f} s each)\n\n")
        pct = int(round(100 * self.level))
        other = self.other_optimum is not None
        cols = f"| {self.axis} | optimum log2 lr [{pct} % CI] | min {self.criterion} loss ± SE |" + (
            " optimum on the other loss |" if other else "") + " diverged | failed |"
        rows = [cols, "|" + "---|" * (cols.count("|") - 1)]
        for k, n in enumerate(self.sizes):
            i = int(np.nanargmin(self.curve_mean[k])) if np.any(np.isfinite(self.curve_mean[k])) else 0
            edge = " (edge)" if self.at_edge[k] else ""
            cells = [f"{int(n)}", f"{self.optimum[k]:+.2f} [{self.optimum_ci[k, 0]:+.2f}, "
                     f"{self.optimum_ci[k, 1]:+.2f}]{edge}",
                     f"{self.curve_mean[k, i]:.4g} ± {self.curve_se[k, i]:.2g}"]
            if other:
                cells.append(f"{self.other_optimum[k]:+.2f}")
            cells += [f"{int(self.diverged[k].sum())}/{self.diverged[k].size}", f"{int(self.failed[k].sum())}"]
            rows.append("| " + " | ".join(cells) + " |")
        lo, hi = self.drift_ci
        ok = {1: "yes", 0: "**no**", -1: "undecided"}[self.as_predicted]
        tail = [f"\nDrift of the optimum per doubling of {self.axis}: **{self.drift:+.2f} [{lo:+.2f}, {hi:+.2f}]** "
                f"({self._pred_text()}). Verdict: **{self.verdict}** ({self.verdict_reason}); as predicted: {ok}.",
                f"Prediction: {self.prediction}.",
                f"Predicted optimum at {self.axis} {int(self.target)}: log2 lr {self.target_optimum:+.2f} "
                f"[{self.target_ci[0]:+.2f}, {self.target_ci[1]:+.2f}] (lr {2 ** self.target_optimum:.3g})."]
        if other and np.isfinite(self.other_drift):
            o = "held-out" if self.criterion == "train" else "training"
            tail.append(f"On the {o} loss: drift {self.other_drift:+.2f} [{self.other_drift_ci[0]:+.2f}, "
                        f"{self.other_drift_ci[1]:+.2f}].")
        cal = self._calibration_text()
        return head + "\n".join(rows) + "\n" + "\n".join(tail) + "\n" + (("\n" + cal) if cal else "")

    def __str__(self):
        return self.to_markdown()

    # ------------------------------------------------------------------ figures
    def plot_curves(self, ax):
        """Mean loss ± SE against log2 learning rate, one curve per size; × = a diverged run (at the cap),
        ◆ with a bar = the fitted optimum and its CI."""
        import matplotlib.pyplot as plt

        cmap = plt.get_cmap("viridis")
        K = len(self.sizes)
        x = self.log2_lrs
        for k, n in enumerate(self.sizes):
            col = cmap(k / max(K - 1, 1) * 0.9)
            m, se = self.curve_mean[k], self.curve_se[k]
            ax.plot(x, m, "-o", ms=3, color=col, label=f"{self.axis} {int(n)}")
            ax.fill_between(x, m - se, m + se, color=col, alpha=0.2, lw=0)
            dv = self.diverged[k].any(-1)
            if np.any(dv):
                ax.plot(x[dv], m[dv], "x", color=col, ms=7, mew=1.5)
            j = int(np.argmin(np.abs(x - self.optimum[k]))) if np.isfinite(self.optimum[k]) else None
            if j is not None:
                yopt = float(np.nanmin(m))
                ax.errorbar([self.optimum[k]], [yopt], xerr=[[self.optimum[k] - self.optimum_ci[k, 0]],
                                                             [self.optimum_ci[k, 1] - self.optimum[k]]],
                            fmt="D", ms=5, color=col, mec="k", capsize=2, zorder=5)
        ax.set_yscale("log")
        from matplotlib.ticker import FuncFormatter, LogLocator

        lo, hi = ax.get_ylim()
        if hi / lo < 100:                          # less than two decades: plain labels at 1, 2, 5 × 10^k
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("log2 learning rate")
        ax.set_ylabel(f"{self.criterion} loss after {self.steps} steps")
        ax.set_title(f"{self.name}: drift {self.drift:+.2f} [{self.drift_ci[0]:+.2f}, {self.drift_ci[1]:+.2f}] "
                     f"per doubling — {self.verdict}", fontsize=8)
        ax.legend(fontsize=6)
        return ax

    def plot_optima(self, ax):
        """Optimum ± CI against log2 size, the fitted line and the predicted slope."""
        u = np.log2(self.sizes)
        o, ci = self.optimum, self.optimum_ci
        ax.errorbar(u, o, yerr=[o - ci[:, 0], ci[:, 1] - o], fmt="o", color="C0", capsize=2, label="optimum (CI)")
        uu = np.linspace(u.min(), math.log2(self.target), 50)
        ax.plot(uu, self.intercept + self.drift * uu, "-", color="C0", lw=1, label=f"fit {self.drift:+.2f}/doubling")
        ax.errorbar([math.log2(self.target)], [self.target_optimum],
                    yerr=[[self.target_optimum - self.target_ci[0]], [self.target_ci[1] - self.target_optimum]],
                    fmt="s", mfc="none", color="C0", capsize=2, label=f"predicted at {int(self.target)}")
        if self.prediction_kind in ("exact", "bound"):
            c = float(np.nanmean(o) - self.predicted_drift * np.mean(u))
            ax.plot(uu, c + self.predicted_drift * uu, "--", color="C3", lw=1,
                    label=f"theory {self.predicted_drift:+.2f}" + (" (bound)" if self.prediction_kind == "bound" else ""))
        ax.set_xlabel(f"log2 {self.axis}")
        ax.set_ylabel("optimal log2 learning rate")
        ax.legend(fontsize=6)
        return ax

    def plot(self, path_or_ax=None):
        """Loss curves (on an Axes given), or the curves and the optima side by side (a new figure, saved to a
        path when one is given). Returns the Axes or the Figure."""
        import matplotlib.pyplot as plt

        if path_or_ax is not None and hasattr(path_or_ax, "plot"):
            return self.plot_curves(path_or_ax)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1.6, 1]})
        self.plot_curves(axes[0])
        self.plot_optima(axes[1])
        fig.tight_layout()
        if path_or_ax is not None:
            from ..results import atomic_write_bytes
            import io

            path = Path(path_or_ax)
            buf = io.BytesIO()
            fig.savefig(buf, format=path.suffix.lstrip(".") or "png")
            atomic_write_bytes(path, buf.getvalue())
            plt.close(fig)
        return fig


__all__ = ["TransferResult"]
