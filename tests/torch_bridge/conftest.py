"""Shared fixtures of the torch tests (torch is imported inside them: collecting without torch still skips)."""
import pytest


@pytest.fixture
def one_thread():
    """torch on one thread during the test (timings and float reductions as on a busy CI core)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
