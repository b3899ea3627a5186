"""A parameterised module under torch.compile, DistributedDataParallel and FSDP2 (single process, gloo): its
multipliers (parametrizations) and per-tensor learning rates survive; training matches the bare module.
torch.compile is tested with dynamo's eager backend (graph capture through the parametrizations); the default
inductor backend gives the same training to float32 rounding but compiles for minutes on a loaded CPU."""
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from limits.torch import demos, parameterise  # noqa: E402

X, Y = demos.byte_data()
LR = 1e-2

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def P():
    return parameterise(demos.gpt_tied, "muP", widths=(32, 64), optimizer="adamw")


@pytest.fixture
def group(tmp_path):
    if not dist.is_available():
        pytest.skip("torch.distributed unavailable")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _train(model, opt, steps=2):
    for _ in range(steps):
        opt.zero_grad()
        out = model(X)
        torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), Y.reshape(-1)).backward()
        opt.step()


def _reference(P, steps=2):
    net = P(64, seed=0).double()
    _train(net, P.optimizer(net, LR, weight_decay=0.1), steps)
    return net


def _full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _same(a, b, tol=1e-12):
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert list(pa) == list(pb)
    for k in pa:
        assert torch.allclose(_full(pa[k]).detach(), pb[k].detach(), rtol=tol, atol=tol), k


def test_torch_compile(P):
    net = P(64, seed=0).double()
    compiled = torch.compile(net, backend="eager")
    opt = P.optimizer(compiled, LR, weight_decay=0.1)
    assert opt.param_groups[0]["params"][0] is net.wte.weight
    _train(compiled, opt)
    _same(net, _reference(P))
    assert P.export_state_dict(compiled).keys() == demos.gpt_tied(64).state_dict().keys()


def test_distributed_data_parallel(P, group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    net = P(64, seed=0).double()
    ddp = DDP(net)
    opt = P.optimizer(ddp, LR, weight_decay=0.1)           # the wrapped module: same tensors, same groups
    _train(ddp, opt)
    _same(net, _reference(P))
    assert torch.equal(P.export_state_dict(ddp)["ln_f.weight"], net.ln_f.weight.detach() / 2)


def test_fsdp2_fully_shard(P, group):
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    net = P(64, seed=0).double()
    stale = [p for _, p, _ in net.limits_lr_multipliers]
    fsdp.fully_shard(net)                                   # parameters replaced by DTensors, names kept
    opt = P.optimizer(net, LR, weight_decay=0.1)
    params = [g["params"][0] for g in opt.param_groups]
    assert all(type(p).__name__ == "DTensor" for p in params) and params[0] is not stale[0]
    assert [g["lr_mult"] for g in opt.param_groups] == [m for _, _, m in net.limits_lr_multipliers]
    _train(net, opt)
    _same(net, _reference(P))
