"""A 0-d integer tensor used where torch takes an int (a size) is data: never baked into the graph.

torch 2.14's fake ops read such a size without raising, and a capture that trusted that answer
specialised on the first call's value (docs/python_versions.md, "torch versions").
"""
import pytest
import torch

import ember


def size_from_tensor(x, m):
    z = torch.zeros(2, m, 3)
    return x + z.shape[1], z


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensor_size_argument_follows_each_call(backend):
    ember.reset()
    compiled = ember.compile(size_from_tensor, backend=backend)
    for m in (6, 4, 6, 9):
        got, z = compiled(torch.ones(2), torch.tensor(m))
        want, z_eager = size_from_tensor(torch.ones(2), torch.tensor(m))
        torch.testing.assert_close(got, want)
        assert z.shape == z_eager.shape
