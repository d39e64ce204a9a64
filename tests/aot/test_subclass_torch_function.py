"""Inputs of a tensor subclass with a ``__torch_function__`` under the AOT backends: the override
sees the torch-level calls eager makes (``relu``, ``add``), never the aten ops of a functional
graph, and outputs, grads and in-place changes match eager."""
import pytest
import torch
import torch.nn as nn

import ember

CALLS = []


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        CALLS.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def _run(fn, make):
    CALLS.clear()
    args = make()
    out = fn(*args)
    calls = list(CALLS)
    grads = None
    if isinstance(out, torch.Tensor) and out.requires_grad:
        out.sum().backward()
        grads = [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    CALLS.clear()
    return calls, out, args, grads


def _sub(*shape, grad=False):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g).as_subclass(Logged).requires_grad_(grad)


def _inplace(x, y):
    x.mul_(2)
    return x.relu() + y


torch.manual_seed(0)
_LIN = nn.Linear(3, 3)

CASES = {
    "relu_add": (lambda x: x.relu() + 1, lambda: (_sub(4),)),
    "grad": (lambda x, y: (x * y).tanh(), lambda: (_sub(2, 3, grad=True), torch.ones(2, 3))),
    "in_place": (_inplace, lambda: (_sub(4), torch.ones(4))),
    "module": (lambda x: _LIN(x).sigmoid(), lambda: (_sub(2, 3, grad=True),)),
}


@pytest.mark.parametrize("backend", ["aot_eager", "aot_eager_decomp_partition"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_subclass_input_sees_eager_calls(name, backend):
    fn, make = CASES[name]
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    for _ in range(2):
        e_calls, e_out, e_args, e_grads = _run(fn, make)
        a_calls, a_out, a_args, a_grads = _run(compiled, make)
        assert a_calls == e_calls
        assert type(a_out) is type(e_out)
        torch.testing.assert_close(a_out.as_subclass(torch.Tensor), e_out.as_subclass(torch.Tensor))
        for a, e in zip(a_args, e_args):
            torch.testing.assert_close(a.as_subclass(torch.Tensor), e.as_subclass(torch.Tensor))
        assert (a_grads is None) == (e_grads is None)
        for a, e in zip(a_grads or [], e_grads or []):
            torch.testing.assert_close(a, e)
    assert ember.stats()["fallbacks"] == 0
