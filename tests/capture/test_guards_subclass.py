"""ember's own checks (guards, fake conversion, recompile reasons) never dispatch through a user
tensor subclass's ``__torch_function__``: a compiled call makes exactly the calls eager makes."""
import pytest
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile, stats

CALLS = []


class Counted(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        CALLS.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def sub(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad).as_subclass(Counted)


def calls_of(fn, *args):
    CALLS.clear()
    out = fn(*args)
    n = list(CALLS)
    CALLS.clear()
    return n, out


def _break():
    print("", end="")


def with_break(x):
    y = x * 2
    _break()
    return y + 1


def in_place(x):
    x.add_(1)
    return x * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


CASES = {
    "arith": (lambda x: x * 2 + 1, lambda s: sub(s)),
    "grad": (lambda x: (x * 2).sum(), lambda s: sub(s, grad=True)),
    "graph_break": (with_break, lambda s: sub(s)),
    "in_place": (in_place, lambda s: sub(s)),
    "module": (Net(), lambda s: sub(s - 1, 3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_function_calls_equal_eager(name):
    fn, make = CASES[name]
    compiled = compile(fn, backend=CompileCounter())
    for size in (3, 3, 3, 4, 4):  # first compile, cached calls, a recompile (new shape), cached again
        expected_calls, expected = calls_of(fn, make(size))
        actual_calls, actual = calls_of(compiled, make(size))
        assert actual_calls == expected_calls, (size, actual_calls, expected_calls)
        assert_same(actual, expected, check_requires_grad=False)
    assert stats()["fallbacks"] == 0


def test_recompile_reason_does_not_dispatch():
    """The guard-failure reasons (re-evaluated one guard at a time, with the new value described)
    read the subclass's metadata without dispatching either."""
    f = lambda x: x + 1  # noqa: E731
    compiled = compile(f, backend=CompileCounter())
    calls_of(compiled, sub(3))
    n, _ = calls_of(compiled, sub(5))
    assert n == calls_of(f, sub(5))[0]
    assert stats()["recompiles"] == 1
