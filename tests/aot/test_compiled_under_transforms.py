"""A compiled function called under a torch.func transform (``vmap(compiled)(x)``,
``grad(compiled)(x)``): its inputs are the transform's wrapped tensors, which no fake tensor
describes. The AOT backends run the captured graph as it is (the transform sees each op, as in
eager): the answers are eager's, with no compile failure and no warning (it was an internal error:
the frame ran eagerly with a warning)."""
import warnings

import pytest
import torch
from torch.func import grad, jacrev, vmap

import ember


def _loss(x):
    return (x.sin() * x).sum()


def _rows(x):
    return x.sin() * 2 + x.mean()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("transform, fn, shape", [
    (grad, _loss, (3,)),
    (vmap, _rows, (4, 3)),
    (jacrev, _rows, (3,)),
    (lambda h: vmap(grad(h)), _loss, (4, 3)),
], ids=["grad", "vmap", "jacrev", "vmap_grad"])
def test_compiled_function_under_a_transform_matches_eager(transform, fn, shape, backend):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    ember.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = transform(ember.compile(fn, backend=backend))(x)  # (tests run strict)
    torch.testing.assert_close(out, transform(fn)(x))
    assert not [w for w in caught if "ember" in str(w.message)]
    assert ember.stats()["fallbacks"] == 0


def test_compiled_for_plain_tensors_then_called_under_vmap():
    compiled = ember.compile(_rows, backend="aot_eager")
    ember.reset()
    x = torch.randn(3, requires_grad=True)
    torch.testing.assert_close(compiled(x), _rows(x))
    xs = torch.randn(4, 3)
    torch.testing.assert_close(vmap(compiled)(xs), vmap(_rows)(xs))
    assert ember.stats()["fallbacks"] == 0
