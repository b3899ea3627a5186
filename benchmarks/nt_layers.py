"""Agreement of ``limits.kernels.kernel`` on compositions (``limits.serial``) with neural-tangents 0.6.5.

    python benchmarks/nt_layers.py            # prints the markdown table; exit 1 if a row exceeds 1e-10

neural-tangents runs in the optional peer interpreter (``LIMITS_NT_PYTHON``; ``python
benchmarks/make_peer_env.py``), never imported here. Each composition is sent as its JSON form and
translated there into ``stax`` layers: Dense/Conv (W_std = √σ_w², b_std = √σ_b², NTK parameterisation),
Relu/Erf/Gelu, Flatten, GlobalAvgPool, AvgPool (VALID / SAME, normalize_edges), LayerNorm(axis=-1),
GlobalSelfAttention(linear_scaling=True, W_key_std = qk_scale, W_value_std = √σ_w²), and
Residual(branch, ρ) = FanOut(2) → parallel(Identity, branch with its last layer's stds × ρ) → FanInSum.
Reported: max |ours − NT| / max |NT| for the NNGP, the NTK off the diagonal and the NTK's diagonal
(x = x'). On the diagonal a ReLU NTK needs E[φ'(u)φ'(v)] at correlation exactly 1 (= 1/2), where its
derivative in c is infinite: ours keeps an input's variance and its kernel with itself the same float
(``Kernel.synced``), so c = 1 exactly, in both representations (which agree to rounding); neural-tangents
rounds its self-covariances separately, so its diagonal carries errors up to ~1e-9 in some compositions.
The agreement criterion (1e-10) is applied to the NNGP and the off-diagonal NTK; the diagonal column
is shown for completeness.
"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import run_peer  # noqa: E402

import limits  # noqa: E402

L = limits.layers
TOL = 1e-10


def cases():
    """(name, composition, input shape) — compositions both libraries support."""
    conv = lambda **kw: L.Conv(filter_shape=(3, 3), **kw)  # noqa: E731
    return [
        ("CNN + global average pooling", limits.serial(conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                                                       conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                                                       L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0)), (6, 6, 6, 3)),
        ("CNN + flatten (no pooling)", limits.serial(conv(padding="SAME", sigma_w2=1.5, sigma_b2=0.05), L.Activation("erf"),
                                                     conv(padding="CIRCULAR", sigma_w2=1.5, sigma_b2=0.05), L.Activation("relu"),
                                                     L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.1)), (6, 6, 6, 3)),
        ("CNN + AvgPool 2×2 + flatten", limits.serial(conv(padding="CIRCULAR", sigma_w2=2.0), L.Activation("relu"),
                                                      L.AvgPool((2, 2)), L.Flatten(), L.Dense(sigma_w2=1.0)), (5, 6, 6, 2)),
        ("CNN + AvgPool 3×3 SAME, stride 2 + GAP", limits.serial(conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                                                               L.AvgPool((3, 3), strides=(2, 2), padding="SAME"), conv(padding="SAME", sigma_w2=2.0),
                                                               L.Activation("relu"), L.GlobalAvgPool(), L.Dense(sigma_w2=1.0)), (5, 7, 6, 2)),
        ("CNN + AvgPool 2×3 SAME, normalize_edges + flatten", limits.serial(conv(padding="SAME", sigma_w2=1.5, sigma_b2=0.2), L.Activation("erf"),
                                                                            L.AvgPool((2, 3), strides=(1, 2), padding="SAME", normalize_edges=True),
                                                                            L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.1)), (5, 5, 6, 2)),
        ("1-D CNN (filter 5) + pooling", limits.serial(L.Conv(filter_shape=(5,), padding="SAME", sigma_w2=1.7, sigma_b2=0.2),
                                                       L.Activation("gelu"), L.GlobalAvgPool(), L.Dense()), (5, 9, 3)),
        ("residual CNN", limits.serial(conv(padding="SAME", sigma_w2=1.0, sigma_b2=0.1),
                                       L.Residual(limits.serial(L.Activation("relu"), conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1)), rho=0.7),
                                       L.Residual(limits.serial(L.Activation("relu"), conv(padding="CIRCULAR", sigma_w2=2.0)), rho=0.7),
                                       L.Activation("relu"), L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0)), (5, 5, 5, 3)),
        ("LayerNorm MLP", limits.serial(L.Dense(sigma_w2=1.0, sigma_b2=0.1), L.LayerNorm(), L.Activation("erf"),
                                        L.Dense(sigma_w2=1.5, sigma_b2=0.1), L.LayerNorm(), L.Activation("relu"),
                                        L.Dense(sigma_w2=1.0, sigma_b2=0.0)), (8, 7)),
        ("attention + dense", limits.serial(L.Dense(sigma_w2=1.0, sigma_b2=0.1),
                                            L.Attention(n_heads=2, qk_scale=0.8, sigma_w2=1.3, sigma_b2=0.05),
                                            L.Activation("relu"), L.Dense(sigma_w2=2.0, sigma_b2=0.1),
                                            L.GlobalAvgPool(), L.Dense()), (5, 6, 4)),
        ("MLP = limits.mlp(...).to_serial()", limits.mlp(7, 3, activation="relu", sigma_w2=2.0, sigma_b2=0.1).to_serial(), (8, 7)),
    ]


PEER = r'''
import json, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
from neural_tangents import stax

W = 8
ACT = {"relu": stax.Relu, "erf": stax.Erf, "gelu": stax.Gelu}

def layer(d, rho=1.0):
    t = d["layer"]
    if t == "Dense":
        return stax.Dense(W, W_std=rho * d["sigma_w2"] ** 0.5, b_std=rho * d["sigma_b2"] ** 0.5)
    if t == "Conv":
        return stax.Conv(W, tuple(d["filter_shape"]), padding=d["padding"], W_std=rho * d["sigma_w2"] ** 0.5,
                         b_std=rho * d["sigma_b2"] ** 0.5)
    if t == "Activation":
        return ACT[d["name"]]()
    if t == "Flatten":
        return stax.Flatten()
    if t == "GlobalAvgPool":
        return stax.GlobalAvgPool()
    if t == "AvgPool":
        return stax.AvgPool(tuple(d["window_shape"]), tuple(d["strides"]), d["padding"],
                            normalize_edges=d.get("normalize_edges", False))
    if t == "LayerNorm":
        return stax.LayerNorm(axis=-1, eps=d["eps"])
    if t == "Identity":
        return stax.Identity()
    if t == "Attention":
        return stax.GlobalSelfAttention(W, W, W, d["n_heads"], linear_scaling=True, W_key_std=d["qk_scale"],
                                        W_query_std=1.0, W_value_std=rho * d["sigma_w2"] ** 0.5, W_out_std=1.0,
                                        b_std=rho * d["sigma_b2"] ** 0.5)
    if t == "Residual":
        br = d["branch"]
        inner = [layer(x) for x in br[:-1]] + [layer(br[-1], d["rho"])]
        return stax.serial(stax.FanOut(2), stax.parallel(stax.Identity(), stax.serial(*inner)), stax.FanInSum())
    raise ValueError(t)

spec = json.load(open(sys.argv[1]))
out = []
for c in spec:
    X = np.array(c["X"], dtype=np.float64)
    _, _, kfn = stax.serial(*[layer(d) for d in c["model"]["serial"]])
    k = kfn(X, None, ("nngp", "ntk"))
    out.append({"nngp": np.asarray(k.nngp).tolist(), "ntk": np.asarray(k.ntk).tolist()})
print(json.dumps(out))
'''


def main():
    rng = np.random.default_rng(0)
    rows = []
    for name, m, shape in cases():
        X = rng.standard_normal(shape)
        k = limits.kernels.kernel(m, X)
        rows.append((name, m, X, k))
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps([{"model": m.to_dict(), "X": X.tolist()} for _, m, X, _ in rows]))
        nt, why = run_peer(PEER, spec)
    lines = ["| composition | input | representation | NNGP | NTK (x ≠ x') | NTK diagonal |", "|---|---|---|---:|---:|---:|"]
    worst = 0.0
    for i, (name, m, X, k) in enumerate(rows):
        rep = k.diagnostics["input_representation"]
        if nt is None:
            lines.append(f"| {name} | {X.shape} | {rep} | skipped | skipped | skipped |")
            continue
        off = ~np.eye(X.shape[0], dtype=bool)
        rel = {key: np.abs(ours - np.array(nt[i][key])) / np.max(np.abs(nt[i][key]))
               for key, ours in (("nngp", k.nngp), ("ntk", k.ntk))}
        d = [float(rel["nngp"].max()), float(rel["ntk"][off].max()), float(np.diag(rel["ntk"]).max())]
        worst = max(worst, d[0], d[1])
        lines.append(f"| {name} | {X.shape} | {rep} | {d[0]:.1e} | {d[1]:.1e} | {d[2]:.1e} |")
    print("\n".join(lines))
    if nt is None:
        print(why)
        return 0
    print(f"\nworst relative difference (NNGP, off-diagonal NTK) {worst:.1e} (tolerance {TOL:g})")
    return 0 if worst <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
