"""A symbolic bool the frame returns (or hands to the code after the graph: a list it built, a
resume function's stack) is a graph output, as a symbolic int or float is: ``n == 4`` of a dynamic
int ``n`` was specialised instead (a guard ``n != 4``), so each later value on the other side of
it recompiled: 3 graphs for n = 2..6 where torch.compile makes 2."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, compile


class _Counting:
    def __init__(self, backend):
        self.inner = ember.lookup_backend(backend) if backend != "eager" else None
        self.frame_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return gm.forward if self.inner is None else self.inner(gm, example_inputs)

PROGRAMS = {
    "returned": lambda x, n: (x * 2, n == 4, n > 3),
    "membership": lambda x, n: (x + 1, n in (3, 5), n not in (2,)),
    "in_a_list": lambda x, n: (x * 2, [n >= 4, n < 3]),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_returned_symbolic_bool_is_computed_per_call(name, backend):
    fn = PROGRAMS[name]
    cnt = _Counting(backend)
    compiled = compile(fn, backend=cnt)
    for n in [2, 3, 4, 5, 6]:
        x = torch.randn(3, requires_grad=True)
        out = compiled(x, n)
        assert_same(out, fn(x, n))
        flags = out[1] if isinstance(out[1], list) else out[1:]
        assert all(type(b) is bool for b in flags)
    assert cnt.frame_count == 2


def test_a_symbolic_bool_across_a_graph_break():
    def fn(x, n):
        b = n == 4
        y = x * 2
        print("", end="")  # (a graph break: b is on the resumed frame's stack/locals)
        return y + b, b
    compiled = compile(fn, backend=CompileCounter())
    for n in [2, 3, 4, 5, 4]:
        x = torch.randn(3)
        assert_same(compiled(x, n), fn(x, n))
