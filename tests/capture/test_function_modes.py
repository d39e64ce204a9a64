"""A ``TorchFunctionMode`` (or ``TorchDispatchMode``) of the program's, active when a compiled
function is called, sees the torch calls eager makes — never ember's guard checks, tracing or a
graph's aten ops."""
import collections

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import ember


class Count(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


class Shift(TorchFunctionMode):
    """A mode that changes results: ``add`` adds one more."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 1 if getattr(func, "__name__", "") == "add" else out


def f(x):
    return (x + 1).relu() * 2


def g(x):
    y = x.sin()
    print("", end="")  # a graph break: the resume function runs under the mode too
    return y + x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [f, g], ids=["one_graph", "graph_break"])
def test_mode_sees_eager_calls(fn, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    x = torch.arange(3.0)
    compiled(x)  # compiled without a mode
    for _ in range(2):
        with Count() as expected:
            want = fn(x)
        with Count() as actual:
            got = compiled(x)
        assert actual.calls == expected.calls
        torch.testing.assert_close(got, want)
    with Shift():
        want = fn(x)
    with Shift():
        got = compiled(x)
    torch.testing.assert_close(got, want)


def test_device_context_still_compiles():
    ember.reset()
    compiled = ember.compile(lambda x: x + torch.ones(2), backend="eager")
    with torch.device("cpu"):
        torch.testing.assert_close(compiled(torch.zeros(2)), torch.ones(2))
    assert ember.stats()["graphs"] == 1


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dispatch_mode_sees_eager_ops(backend):
    """Under a program's TorchDispatchMode the frame runs as it is, as torch.compile skips it: the
    mode sees eager's aten ops (no fake-tensor tracing, no extra ops of a functional graph)."""
    ember.reset()
    compiled = ember.compile(f, backend=backend)
    x = torch.arange(3.0)
    for _ in range(2):
        with CountOps() as expected:
            want = f(x)
        with CountOps() as actual:
            got = compiled(x)
        assert actual.ops == expected.ops
        torch.testing.assert_close(got, want)
