"""``transfer``: μTransfer as a tested prediction — does the optimal learning rate of a parameterised torch network
stay put as the width (or depth) grows?

For every size n (width, or depth with ``depths=``), learning rate 2^x and seed s one run is trained: the module
``P(n)`` of :func:`limits.torch.parameterise` (init, forward multipliers, per-tensor rates ``lr · r^{−c}``; for
depth, :mod:`limits.torch.depth`'s block multiplier and rate), ``steps`` steps of the parameterisation's optimizer
on ``data`` (full batch, or ``batch_size`` rows drawn with replacement from a per-run generator), then its loss
on the whole training set (and on ``held_out``). A run is *diverged* when a loss is non-finite or its final loss
exceeds ``diverge`` × its loss at initialisation; it is kept, entering the fit at that threshold.

The runs go through :func:`limits.sweep.run` — resumable (``store=``: finished runs are stored atomically and
reused), serial / loky / dask backends, per-run seeds from ``SeedSequence(seed)`` by seed index (the same seeds
at every size and rate), a progress bar or periodic line — so a study survives interruption and scales out to a
dask cluster (``backend="dask", scheduler="tcp://…"``) unchanged. Each run reports its CPU time.

The statistics (optimum per size, drift per doubling, verdict, calibration) are :mod:`limits.torch.transfer_fit`;
the prediction is :func:`limits.params.lr_drift` of the parameterisation's table.
"""
from __future__ import annotations

import hashlib
import inspect
import math
import time

import numpy as np
import torch

from ..params.lr_drift import lr_drift
from .apply_params import Parameterised
from .depth import DepthParameterised, parameterise
from .coordcheck import default_loss
from .measured import fingerprints, transfer_unmeasured, unchanged_tensors
from .network import torch_threads
from .progress_lines import announce, sizes_text
from .transfer_fit import (calibrate as _calibrate, capped, fit_drift, quiet as _quiet, resolving_seeds, verdict,
                           within_power)
from .transfer_result import TransferResult

HOPELESS = 1e4           # a run whose minibatch loss exceeds this × its initial loss stops early (still diverged)
N_TRAJECTORY = 16        # minibatch losses kept per run (evenly spaced steps)


def _as_tensor(a, dtype):
    t = a if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a))
    return t.to(dtype) if t.is_floating_point() else t


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _code_id(fn) -> str:
    """module.qualname of a callable and a digest of its source (an edited factory never reuses stale runs)."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        src = ""
    return f"{name}@{hashlib.sha256(src.encode()).hexdigest()[:12]}"


class TrainRun:
    """One run of a study (picklable: the loky and dask workers receive it). ``self(width, log2_lr, seed,
    depth=None)`` → ``{train_loss, test_loss, loss0, diverged, diverged_step, cpu_s, trajectory}``."""

    def __init__(self, P, data, held_out, steps, batch_size, loss, diverge, threads):
        self.P, self.steps, self.batch_size = P, int(steps), batch_size
        self.data, self.held_out = data, held_out
        self.loss, self.diverge, self.threads = loss, float(diverge), threads

    def _build(self, width, depth, seed):
        torch.manual_seed(seed)
        if depth is None:
            m = self.P(int(width))
        else:
            m = self.P(int(width), int(depth))
        return m, self.P.optimizer(m, 1.0)

    def _full_loss(self, model, X, Y):
        model.eval()
        with torch.no_grad():
            out = model(X)
            out = out[0] if isinstance(out, tuple) else out
            v = float(self.loss(out, Y))
        model.train()
        return v

    def __call__(self, width, log2_lr, seed, depth=None):
        t0 = time.process_time()
        seed = int(seed) % (2 ** 63)
        with torch.random.fork_rng(devices=[]), torch_threads(self.threads):
            model, opt = self._build(width, depth, seed)
            for g in opt.param_groups:                  # rates lr · multiplier (the groups were built at lr = 1)
                g["lr"] = g["lr"] * 2.0 ** float(log2_lr)
            dtype = next((q.dtype for q in model.parameters() if q.is_floating_point()), torch.float32)
            X, Y = (_as_tensor(a, dtype) for a in self.data)
            loss0 = self._full_loss(model, X, Y)
            trained = [p for g in opt.param_groups for p in g["params"] if p.requires_grad]
            before = fingerprints(trained)
            gen = torch.Generator().manual_seed(seed)
            keep = set(np.linspace(0, self.steps - 1, min(N_TRAJECTORY, self.steps)).round().astype(int).tolist())
            traj, bad_step = [], -1
            for t in range(self.steps):
                if self.batch_size:
                    idx = torch.randint(0, X.shape[0], (self.batch_size,), generator=gen)
                    xb, yb = X[idx], Y[idx]
                else:
                    xb, yb = X, Y
                opt.zero_grad(set_to_none=True)
                out = model(xb)
                out = out[0] if isinstance(out, tuple) else out
                loss = self.loss(out, yb)
                lv = float(loss.detach())
                if t in keep:
                    traj.append(lv)
                if not math.isfinite(lv) or lv > HOPELESS * max(loss0, 1e-30):
                    bad_step = t
                    break
                loss.backward()
                opt.step()
            train = self._full_loss(model, X, Y) if bad_step < 0 else math.inf
            unchanged, first = unchanged_tensors(before, trained)
            test = math.nan
            if self.held_out is not None:
                Xt, Yt = (_as_tensor(a, dtype) for a in self.held_out)
                test = self._full_loss(model, Xt, Yt) if bad_step < 0 else math.inf
        diverged = bad_step >= 0 or not math.isfinite(train) or train > self.diverge * loss0
        traj = np.asarray(traj + [np.nan] * (len(keep) - len(traj)), float)
        return {"train_loss": train, "test_loss": test, "loss0": loss0, "diverged": bool(diverged),
                "diverged_step": bad_step, "cpu_s": time.process_time() - t0, "trajectory": traj,
                "unchanged": unchanged, "unchanged_first": first}


def _check(widths, depths, lrs, steps, seeds, diverge, margin, level, batch_size):
    widths = sorted({int(w) for w in np.atleast_1d(widths)})
    if not widths or widths[0] < 1:
        raise ValueError(f"widths must be positive integers, got {widths}")
    if depths is not None:
        depths = sorted({int(d) for d in np.atleast_1d(depths)})
        if not depths or depths[0] < 1:
            raise ValueError(f"depths must be positive integers, got {depths}")
        if len(depths) > 1 and len(widths) > 1:
            raise ValueError("transfer: sweep one size at a time — several depths at one width (a depth study) or "
                             "several widths at one depth (a width study)")
    n_sizes = len(depths) if depths is not None and len(depths) > 1 else len(widths)
    if n_sizes < 3:
        raise ValueError(f"transfer: need at least 3 sizes for a drift with an interval, got {n_sizes}")
    lrs = np.asarray(lrs, float).ravel()
    if lrs.size < 3 or not np.all(np.isfinite(lrs)) or np.any(lrs <= 0):
        raise ValueError("lrs: need at least 3 finite learning rates > 0")
    lrs = np.unique(lrs)
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if int(seeds) < 2:
        raise ValueError(f"seeds must be >= 2 (the intervals are a bootstrap over seeds), got {seeds}")
    if not (math.isfinite(diverge) and diverge > 1):
        raise ValueError(f"diverge must be a finite factor > 1 (of the initial loss), got {diverge}")
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be > 0 (log2 units per doubling), got {margin}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if batch_size is not None and int(batch_size) < 1:
        raise ValueError(f"batch_size must be a positive integer or None (full batch), got {batch_size}")
    return widths, depths, np.log2(lrs)


def checked_data(factory, widths, depths, data, held_out, batch_size, loss=None, what=("data", "held_out",
                                                                                      "batch_size")):
    """(X, Y, held-out pair or None, batch size) checked against the smallest module before any run
    (:func:`limits.torch.data_checks.check_data`); ``what``: the names used in errors."""
    from .data_checks import check_batch_size, check_factory_data

    if data is None:
        raise ValueError(f"{what[0]}: give the training pair (X, Y)")
    d0 = None if depths is None else depths[0]
    X, Y = check_factory_data(factory, widths[0], data, depth=d0, what=what[0], loss=loss)
    held = None if held_out is None else check_factory_data(factory, widths[0], held_out, depth=d0, what=what[1],
                                                            loss=loss)
    return X, Y, held, check_batch_size(batch_size, X.shape[0], what[2])


def _check_kind(factory, param, depths):
    """A parameterised factory matches ``param`` and the kind of study (depth or width)."""
    if isinstance(factory, (Parameterised, DepthParameterised)):
        if param is not None and param != factory.name:
            raise ValueError(f"param {param!r}: the factory is already parameterised as {factory.name!r}; pass "
                             "param=None or the plain factory")
        if isinstance(factory, DepthParameterised) != (depths is not None):
            raise ValueError("a DepthParameterised factory needs depths=, a Parameterised one none")


def _parameterised(factory, param, widths, depths, optimizer, roles, X):
    """The parameterised factory (width study: factory(width); with depths: factory(width, depth)); its forward
    is traced on the first rows of the study's inputs ``X`` (to find the attention)."""
    if isinstance(factory, (Parameterised, DepthParameterised)):
        _check_kind(factory, param, depths)
        return factory
    pw = widths if len(widths) > 1 else (widths[0], 2 * widths[0])
    x = (_as_tensor(X[:8], torch.get_default_dtype()),)
    return parameterise(factory, param, widths=pw, optimizer=optimizer, roles=roles, example_inputs=x,
                        depths=depths)


def transfer(factory, param="muP", widths=(64, 128, 256, 512), lrs=None, data=None, steps=100, seeds=4,
             optimizer="adam", depths=None, *, held_out=None, batch_size=None, loss=None, diverge=3.0, margin=0.25,
             level=0.95, n_boot=1000, target=None, calibrate=True, n_sim=200, criterion="train", backend="serial",
             n_jobs=None, scheduler=None, store=None, progress=None, seed=0, threads=None, roles=None,
             name=None, fit_window=2) -> TransferResult:
    """Learning-rate transfer study (module docstring). ``factory``: width → nn.Module (width, depth → nn.Module
    with ``depths``), or a :class:`Parameterised`; ``param``: the parameterisation applied ("muP", "SP", …,
    "depth-muP"); ``lrs``: learning rates (a grid in log2 is best, e.g. ``2.0 ** np.arange(-14, -3)``);
    ``data``: (X, Y) (integer Y → cross-entropy, else ½ MSE; or pass ``loss(out, y)``); ``held_out``: (X, Y)
    evaluated after training; ``criterion``: "train" or "test" — which loss the verdict reads; ``target``: the
    size to predict the optimum at (default 4 × the largest); ``margin``: δ of the verdict (log2 units per
    doubling); ``fit_window``: rates on each side of the grid minimum in the parabola fit; ``calibrate``: also
    simulate ``n_sim`` studies of this design at its own noise (false-verdict rates with a flat optimum, power at
    −2δ and at the predicted drift). ``backend``/``n_jobs``/``scheduler``/``store``/``progress``:
    :func:`limits.sweep.run`. ``seed``: root of the per-run seeds and of the bootstrap."""
    from .. import sweep

    if lrs is None:
        raise ValueError("lrs: give the learning rates to scan (e.g. 2.0 ** np.arange(-14, -3))")
    widths, depths, log2_lrs = _check(widths, depths, lrs, steps, seeds, diverge, margin, level, batch_size)
    if criterion not in ("train", "test") or (criterion == "test" and held_out is None):
        raise ValueError("criterion must be 'train', or 'test' with held_out data")
    if isinstance(fit_window, bool) or not isinstance(fit_window, (int, np.integer)) or fit_window < 1:
        raise ValueError(f"fit_window must be a positive integer (rates on each side of the minimum), got {fit_window!r}")
    _check_kind(factory, param, depths)
    X, Y, held, batch = checked_data(factory, widths, depths, data, held_out, batch_size, loss)
    if not isinstance(factory, (Parameterised, DepthParameterised)):
        announce(f"transfer: applying {param} (tracing the factory's forward)", progress)
    P = _parameterised(factory, param, widths, depths, optimizer, roles, X)
    axis = "depth" if depths is not None and len(depths) > 1 else "width"
    run = TrainRun(P, (X, Y), held, steps, batch, loss or default_loss, diverge, threads)
    product = {"width": widths} if depths is None else {"width": widths, "depth": depths}
    product["log2_lr"] = [float(v) for v in log2_lrs]
    grid = sweep.Grid(product=product, seeds=int(seeds), root=int(seed), seed_by="replicate")
    t0 = time.perf_counter()
    announce(f"transfer {P.name}: {grid.n_points} training runs of {int(steps)} steps started ({axis}s "
             f"{sizes_text(depths if axis == 'depth' else widths)}, {len(log2_lrs)} learning rates, {int(seeds)} "
             f"seeds; backend {backend})", progress)
    ds = sweep.run(run, grid, backend=backend, n_jobs=n_jobs, scheduler=scheduler, store=store,
                   name=f"limits.torch.transfer.{_study_id(P, factory, run, loss)}", progress=progress,
                   label=f"transfer {P.name}")
    _refuse_if_every_run_failed(ds)
    settings = {"backend": backend, "batch_size": batch, "diverge": float(diverge), "wall_s": time.perf_counter() - t0,
                "factory": _code_id(getattr(P, "factory", factory)), "reused": int(ds.attrs.get("reused", 0)),
                "store": None if store is None else str(store)}
    return analyse(ds, P, axis, widths, depths, log2_lrs, int(seeds), int(steps), held is not None, criterion,
                   margin=margin, level=level, n_boot=n_boot, target=target, calibrate=calibrate, n_sim=n_sim,
                   seed=seed, name=name, fit_window=int(fit_window), settings=settings, progress=progress)


def _refuse_if_every_run_failed(ds):
    """A ValueError quoting the first failure when no run finished (nothing to analyse)."""
    import json

    if "train_loss" in ds:
        return
    errors = json.loads(ds.attrs.get("error", "[]") or "[]")
    first = errors[0] if errors else {}
    raise ValueError(f"transfer: every run failed ({len(errors)} of {ds.attrs.get('n_points', len(errors))}); the "
                     f"first, at {first.get('params', '?')}: {first.get('error', 'no message')}")


def _study_id(P, factory, run, loss) -> str:
    """What a stored run depends on besides its grid point: the factory's code, the table, the optimizer, steps,
    batch, divergence threshold, data and held-out digests, the loss, the base sizes."""
    held = None if run.held_out is None else _digest(*run.held_out)
    key = (_code_id(getattr(P, "factory", factory)), P.name, P.optimizer_name, run.steps, run.batch_size,
           run.diverge, _digest(*run.data), held, _code_id(loss) if loss else "default",
           getattr(P, "base_width", None), getattr(P, "base_depth", None))
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


def _raw(ds, axis) -> dict:
    """(K, M, S[, T]) arrays of a finished sweep dataset, sizes along ``axis``; diverged excludes failed runs."""
    dims = [axis, "log2_lr", "seed"]

    def take(v, extra=()):
        a = ds[v]
        a = a.isel({d: 0 for d in a.dims if d not in dims + list(extra)}).transpose(*dims, *extra)
        return np.asarray(a.values, dtype=float)

    out = {v: take(v) for v in ("train_loss", "test_loss", "loss0", "cpu_s")}
    out["failed"] = take("failed") > 0
    out["diverged"] = (take("diverged") > 0) & ~out["failed"]
    out["trajectory"] = take("trajectory", ("trajectory_dim_0",))
    for v in ("unchanged", "unchanged_first"):          # absent from runs stored by an older version
        if v in ds:
            out[v] = take(v)
    return out


def _as_predicted(kind, v, drift) -> int:
    """1: the verdict is the predicted one (exact → transfers; bound → drifts, downwards); 0: it contradicts the
    prediction; −1: undecided (inconclusive, or no prediction)."""
    if kind not in ("exact", "bound") or v == "inconclusive":
        return -1
    if kind == "exact":
        return int(v == "transfers")
    return int(v == "drifts" and drift < 0)


def _result(raw, meta, *, criterion, margin, level, n_boot, target, calibrate, n_sim, seed,
            fit_window=2, progress=False) -> TransferResult:
    """Statistics (:mod:`limits.torch.transfer_fit`) of the raw runs ``raw`` described by ``meta``."""
    sizes, lx = np.asarray(meta["sizes"], float), np.asarray(meta["log2_lrs"], float)
    has_test = bool(meta["has_test"])
    if criterion not in ("train", "test") or (criterion == "test" and not has_test):
        raise ValueError("criterion must be 'train', or 'test' with held-out data")
    div = float(meta["settings"].get("diverge", 3.0))
    with np.errstate(invalid="ignore"), _quiet():
        cap = div * np.nanmedian(np.where(raw["failed"], np.nan, raw["loss0"]), axis=(1, 2))
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(1,)))
    y_train = capped(raw["train_loss"], raw["diverged"], cap)
    y_test = capped(raw["test_loss"], raw["diverged"], cap) if has_test else None
    y = y_test if criterion == "test" else y_train
    fit = fit_drift(y, sizes, lx, rng, n_boot=n_boot, level=level, target=target, half_window=fit_window)
    other = fit_drift(y_train if criterion == "test" else y_test, sizes, lx, rng, n_boot=n_boot, level=level,
                      target=target, half_window=fit_window) if has_test else None
    v, why = verdict(fit.drift, fit.drift_ci, margin, fit.at_edge)
    nothing = meta["settings"].get("unmeasured") or transfer_unmeasured(raw, sizes, meta["axis"])
    if nothing:                                          # no verdict without a measurement
        v, why = "inconclusive", nothing
    kind, pd = meta["prediction_kind"], float(meta["predicted_drift"])
    cal = None
    if calibrate:
        announce(f"transfer: calibrating the verdict ({n_sim} simulated studies of this design)", progress)
        alt = (-2 * float(margin),) + ((pd,) if kind == "bound" and pd != -2 * float(margin) else ())
        c = _calibrate(y, sizes, lx, margin, rng, drifts=(0.0,) + alt, n_sim=n_sim, level=level,
                       n_boot=max(200, n_boot // 4), half_window=fit_window)
        cal = {"drifts": c.drifts, "rates": c.rates, "se": c.se, "n_sim": c.n_sim}
        S = int(np.asarray(y).shape[-1])

        def resolve():
            drift = 0.0 if v == "drifts" else -2.0 * float(margin)
            return resolving_seeds(y, sizes, lx, margin, rng, drift, v, 1 - level, S, level=level,
                                   half_window=fit_window)

        v, why, need = within_power(v, why, c, margin, 1 - level, resolve)
        cal["resolving_seeds"] = need
    return TransferResult(
        name=meta["name"], parameterisation=meta["parameterisation"], optimizer=meta["optimizer"], axis=meta["axis"],
        sizes=sizes, fixed_size=meta["fixed_size"], log2_lrs=lx, seeds=int(meta["seeds"]), steps=int(meta["steps"]),
        criterion=criterion, train_loss=raw["train_loss"], test_loss=raw["test_loss"], loss0=raw["loss0"],
        diverged=raw["diverged"], failed=raw["failed"], cap=cap, cpu_s=raw["cpu_s"], trajectory=raw["trajectory"],
        curve_mean=fit.curve_mean, curve_se=fit.curve_se, optimum=fit.optimum, optimum_ci=fit.optimum_ci,
        at_edge=fit.at_edge, drift=fit.drift, drift_ci=fit.drift_ci, intercept=fit.intercept,
        other_optimum=None if other is None else other.optimum,
        other_drift=math.nan if other is None else other.drift,
        other_drift_ci=np.full(2, np.nan) if other is None else other.drift_ci,
        predicted_drift=pd, prediction_kind=kind, prediction=meta["prediction"], verdict=v, verdict_reason=why,
        as_predicted=_as_predicted(kind, v, fit.drift), margin=float(margin), level=float(level), n_boot=int(n_boot),
        target=fit.target, target_optimum=fit.target_optimum, target_ci=fit.target_ci, calibration=cal,
        settings=dict(meta["settings"], seed=int(seed), fit_window=int(fit_window)))


def analyse(ds, P, axis, widths, depths, log2_lrs, seeds, steps, has_test, criterion="train", *, margin=0.25,
            level=0.95, n_boot=1000, target=None, calibrate=True, n_sim=200, seed=0, name=None, settings=None,
            fit_window=2, progress=None) -> TransferResult:
    """The :class:`TransferResult` of a finished sweep dataset ``ds`` (dims size, log2_lr, seed)."""
    pred = lr_drift(P.table, axis)
    raw = _raw(ds, axis)
    sizes = depths if axis == "depth" else widths
    settings = dict(settings or {}, unmeasured=transfer_unmeasured(
        raw, sizes, axis, names=lambda n: _trained_names(P, n if axis == "width" else widths[0],
                                                         n if axis == "depth" else (depths or [None])[0])))
    meta = {"name": name or f"{P.name} ({P.optimizer_name})", "parameterisation": str(P.name),
            "optimizer": P.optimizer_name, "axis": axis, "sizes": depths if axis == "depth" else widths,
            "fixed_size": ((None if depths is None else int(depths[0])) if axis == "width" else int(widths[0])),
            "log2_lrs": log2_lrs, "seeds": seeds, "steps": steps, "has_test": has_test,
            "predicted_drift": pred.drift, "prediction_kind": pred.kind, "prediction": pred.derivation or pred.reason,
            "settings": dict(settings or {})}
    return _result(raw, meta, criterion=criterion, margin=margin, level=level, n_boot=n_boot,
                   target=target, calibrate=calibrate, n_sim=n_sim, seed=seed, fit_window=fit_window,
                   progress=progress)


def _trained_names(P, width, depth) -> list:
    """Names of the trained tensors of ``P(width[, depth])`` in its optimizer's order (a run's tensor index)."""
    from .data_checks import build_at

    m = build_at(P, width, depth)
    name_of = {id(p): n for n, p in m.named_parameters()}
    return [name_of.get(id(p), "?") for g in P.optimizer(m, 1.0).param_groups for p in g["params"] if p.requires_grad]


_META = ("name", "parameterisation", "optimizer", "axis", "sizes", "fixed_size", "log2_lrs", "seeds", "steps",
         "predicted_drift", "prediction_kind", "prediction", "settings")
_RAW = ("train_loss", "test_loss", "loss0", "diverged", "failed", "cpu_s", "trajectory")


def reanalyse(r: TransferResult, *, criterion=None, margin=None, level=None, n_boot=None, target=None,
              calibrate=None, n_sim=200, seed=None, fit_window=None) -> TransferResult:
    """The statistics of a saved study recomputed from its runs (another margin, level, criterion, target, or
    calibration) — no run is repeated."""
    meta = {k: getattr(r, k) for k in _META}
    meta["has_test"] = bool(np.any(np.isfinite(r.test_loss)))
    raw = {k: getattr(r, k) for k in _RAW}
    return _result(raw, meta, criterion=criterion or r.criterion, margin=r.margin if margin is None else margin,
                   level=r.level if level is None else level, n_boot=r.n_boot if n_boot is None else n_boot,
                   target=r.target if target is None else target,
                   calibrate=(r.calibration is not None) if calibrate is None else calibrate, n_sim=n_sim,
                   seed=r.settings.get("seed", 0) if seed is None else seed,
                   fit_window=r.settings.get("fit_window", 2) if fit_window is None else fit_window)


__all__ = ["transfer", "analyse", "reanalyse", "TrainRun", "TransferResult"]
