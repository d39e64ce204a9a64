"""Tensors made inside the compiled region with ``requires_grad=True`` are new leaves.

Eager returns a leaf that requires grad, and everything computed from it requires grad
too. A compiled AOT graph cannot make a leaf (its outputs come out of one autograd node),
so ember makes such a tensor eagerly at a graph break. Before, under aot_eager the leaf
and every result computed from it came back *not* requiring grad: no gradient at all.
"""
import pytest
import torch

from ember_test_helpers import compile

FACTORIES = {
    "ones": lambda x: torch.ones(2, requires_grad=True),
    "tensor": lambda x: torch.tensor([1.0, 2.0], requires_grad=True),
    "zeros_like": lambda x: torch.zeros_like(x, requires_grad=True),
    "new_ones": lambda x: x.new_ones(2, requires_grad=True),
    "full": lambda x: torch.full((2,), 3.0, requires_grad=True),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("factory", sorted(FACTORIES))
def test_leaf_made_in_frame_gets_gradients(factory, backend):
    make = FACTORIES[factory]

    def f(x):
        leaf = make(x)
        return leaf, leaf * 2 + x

    results = []
    for fn in (f, compile(f, backend=backend)):
        x = torch.ones(2)
        leaf, out = fn(x)
        assert leaf.is_leaf and leaf.requires_grad and out.requires_grad
        out.sum().backward()
        results.append(leaf.grad)
    torch.testing.assert_close(results[1], results[0])
