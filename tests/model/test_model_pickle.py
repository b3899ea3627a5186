"""A Model sent to another process (loky, dask) keeps the registry's activation object, so the closed-form
fast paths — which recognise a built-in activation by identity — survive the trip."""
import pickle

import limits
from limits.activations import activation


def test_pickled_model_resolves_its_activation_from_the_registry():
    for m in (limits.mlp(3, depth=2, activation="erf"), limits.resnet(3, depth=4, activation="relu", rho=0.5)):
        m2 = pickle.loads(pickle.dumps(m))
        assert m2 == m and m2.act is activation(m.activation_name)
        X = [[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]]
        r = limits.kernels.kernel_blocked(m2, X, get=("nngp",), X2=X, progress=False)
        assert r.diagnostics["path"] == "fused"

