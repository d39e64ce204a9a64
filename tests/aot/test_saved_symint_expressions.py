"""A backward whose saved SymInt is an expression of an int input (``v.mul_(2 * k)`` with ``k`` a
dynamic int: the backward takes ``2*s4``). A compiler binds each symbol of a graph from an input
that *is* that symbol; the partitioner saves the int input itself next to the expression
(aot/partition.py, ``_symbol_binders``) and a backward pruned for the tangents that arrived keeps
it (aot/saved.py). Before, Inductor's backward referenced ``s4`` unbound (NameError: the backward
ran uncompiled with a warning, an error under EMBER_STRICT; fuzz seeds 3300000/03/18)."""
import warnings

import pytest
import torch

import ember


class Holder:
    def __init__(self, k):
        self.k = k

    @property
    def double_k(self):
        return self.k * 2


def scaled_view(x, y, obj):
    v = y.narrow(0, 0, 3).unsqueeze(0)
    v.mul_(obj.double_k)
    return y, (x * 2).sum(0), v


def _run(fn, k):
    x = torch.ones(3, 4, requires_grad=True)
    leaf = torch.arange(4.0, requires_grad=True)
    out = fn(x, leaf * 1, Holder(k))
    sum(t.sum() for t in out).backward()
    return [t.detach() for t in out], x.grad, leaf.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backward_binds_the_symbols_of_saved_expressions(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    ember.reset()
    compiled = ember.compile(scaled_view, backend=backend)
    with ember.config.patch(strict=True), warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*ember")
        for k in (1, 2, 3):  # (the second call makes k a dynamic int)
            torch.testing.assert_close(_run(compiled, k), _run(scaled_view, k))
