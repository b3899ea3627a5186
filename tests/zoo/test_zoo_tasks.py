"""The zoo's tasks: shapes, dtypes, seeded and disjoint splits, the mask rate."""
import numpy as np
import torch

from limits.torch.zoo import tasks


def test_next_bytes_and_masked_bytes():
    d = tasks.next_bytes(n_train=64, n_test=16, seq=12, seed=1)
    X, Y = d["train"]
    assert X.shape == Y.shape == (64, 12) and X.dtype == torch.int64 and torch.equal(X[:, 1:], Y[:, :-1])
    assert torch.equal(tasks.next_bytes(n_train=64, n_test=16, seq=12, seed=1)["test"][0], d["test"][0])
    m = tasks.masked_bytes(n_train=400, n_test=16, seq=16, seed=1, rate=0.25)
    Xm, Ym = m["train"]
    masked = Xm == tasks.MASK_ID
    assert abs(float(masked.double().mean()) - 0.25) < 0.02 and int(Ym.max()) < 256
    assert torch.equal(Xm[~masked], Ym[~masked])


def test_digit_images():
    d = tasks.digit_images(n_test=97, seed=0)
    X, y = d["train"]
    assert X.shape == (1700, 1, 8, 8) and X.dtype == torch.float64 and set(np.unique(y.numpy())) == set(range(10))
    assert np.allclose(X.mean(0).numpy(), 0, atol=1e-6)
