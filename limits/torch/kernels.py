"""Empirical kernels of ``Model.to_torch`` networks — the torch backend of ``limits.check(…, backend="torch")``.

Per init (a fresh ``TorchNetwork`` drawn by torch's generator):

    read-out NNGP   K̂_out = σ²_out φ(h^L) φ(h^L)ᵀ / N + σ²_b,out   (E[f fᵀ | h^L], the simulator's observable)
    hidden layers   K̂^l = h^l h^lᵀ / N
    NTK             Θ̂_μν = Σ_θ ∂f_μ0/∂θ ∂f_ν0/∂θ   (output unit 0; every trained parameter; autograd or torch.func.jacrev)

The statistics (extrapolation, rate, power) are those of :mod:`limits.checking`; only the samples differ.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, jacrev

from .network import TorchNetwork, torch_threads


def _torch_seeds(seed, S):
    return np.random.default_rng(seed).integers(0, 2**62, size=S).tolist()


def readout_nngp(tnet, m, X):
    """(K̂_out (P, P), [K̂^l (P, P) for l = 0…L]) of one torch network of model ``m``."""
    v = m.variances()
    net = tnet.network
    with torch.no_grad():
        _, hs = tnet(torch.as_tensor(X, dtype=torch.float64), return_hidden=True)
        N = net.width
        a = tnet.phi(hs[-1]) if net.readout_phi else hs[-1]
        K_out = v["sigma_w2_out"] * (a @ a.T) / N + v["sigma_b2_out"]
        K = [(h @ h.T) / N for h in hs]
    return K_out.numpy(), [k.numpy() for k in K]


def empirical_ntk(tnet, X, output=0, method="autograd"):
    """Θ̂ (P, P) of output unit ``output``: J Jᵀ summed over every parameter. ``method``: "autograd" (one
    reverse pass per input, the default: fast for small P) or "jacrev" (``torch.func.jacrev``)."""
    Xt = torch.as_tensor(X, dtype=torch.float64)
    P = Xt.shape[0]
    if method == "jacrev":
        params = {k: p.detach() for k, p in tnet.named_parameters()}
        J = jacrev(lambda p: functional_call(tnet, p, (Xt,))[:, int(output)])(params)
        rows = torch.cat([j.reshape(P, -1) for j in J.values()], dim=1)
    elif method == "autograd":
        params = [p for p in tnet.parameters() if p.requires_grad]
        f = tnet(Xt)[:, int(output)]
        rows = torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(f[mu], params, retain_graph=True)])
                            for mu in range(P)])
    else:
        raise ValueError(f"method must be 'autograd' or 'jacrev', got {method!r}")
    return (rows @ rows.T).detach().numpy()


def nngp_samples(m, N, X, idx, S, seed, layers):
    """(S, n) per init: [K̂^l at ``idx`` for l in ``layers``…, K̂_out at ``idx``] (as the numpy backend)."""
    net = m.finite(int(N))
    i, j = idx
    out = []
    with torch_threads():
        for s in _torch_seeds(seed, S):
            t = TorchNetwork(net, seed=s)
            K_out, K = readout_nngp(t, m, X)
            out.append(np.concatenate([*(K[l][i, j] for l in layers), K_out[i, j]]))
    return np.asarray(out)


def ntk_samples(m, N, X, idx, S, seed):
    """(S, n) per init: Θ̂ at ``idx``."""
    net = m.finite(int(N))
    i, j = idx
    with torch_threads():
        return np.asarray([empirical_ntk(TorchNetwork(net, seed=s), X)[i, j] for s in _torch_seeds(seed, S)])


# ------------------------------------------------------------------ a user's module declared equivalent
def _user_jacobian(mod, X, names):
    """{name: ∂f_0/∂θ (P, numel)} of the module's output unit 0 for the parameters ``names`` (torch.func.jacrev)."""
    params = {k: p.detach() for k, p in mod.named_parameters() if k in names}

    def f0(p):
        f = functional_call(mod, p, (X,))
        return f[:, 0] if f.ndim == 2 else f

    J = jacrev(f0)(params)
    return {k: J[k].reshape(X.shape[0], -1) for k in params}


def user_kernels(eq, mod, width, X):
    """(K̂_out, Θ̂) (P, P) of one user module (:mod:`limits.torch.equivalence`):
    K̂_out = Σ_{θ ∈ read-out} std_θ² ∂f_0/∂θ ∂f_0/∂θᵀ and Θ̂ = Σ_θ ∂f_0/∂θ ∂f_0/∂θᵀ."""
    Xt = torch.as_tensor(X, dtype=torch.float64)
    J = _user_jacobian(mod, Xt, {n for n, _ in mod.named_parameters()})
    sd = {n: eq.std(n, width) for n in eq.readout}
    K = sum(sd[n] ** 2 * (J[n] @ J[n].T) for n in eq.readout)
    Th = sum(j @ j.T for j in J.values())
    return K.detach().numpy(), Th.detach().numpy()


def user_samples(eq, kind, N, X, idx, S, seed):
    """(S, n) per init of the user's module (``eq.build``): read-out NNGP (kind "nngp") or NTK ("ntk") at ``idx``."""
    i, j = idx
    Xt = torch.as_tensor(X, dtype=torch.float64)
    out = []
    sd = {n: eq.std(n, N) for n in eq.readout}
    with torch_threads():
        for s in _torch_seeds(seed, S):
            mod = eq.build(int(N), s)
            if kind == "nngp":
                J = _user_jacobian(mod, Xt, set(eq.readout))
                K = sum(sd[n] ** 2 * (J[n] @ J[n].T) for n in eq.readout)
            else:
                J = _user_jacobian(mod, Xt, {n for n, _ in mod.named_parameters()})
                K = sum(g @ g.T for g in J.values())
            out.append(K.detach().numpy()[i, j])
    return np.asarray(out)


__all__ = ["readout_nngp", "empirical_ntk", "nngp_samples", "ntk_samples", "user_kernels", "user_samples"]
