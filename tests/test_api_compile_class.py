"""ember.compile applied to a class (``@ember.compile`` on a class statement) compiles its
instances' calls, as torch.compile does (before, the class was returned as it was and nothing was
ever compiled)."""

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import REFERENCE, CompileCounter, assert_same

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own API objects")


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_compiled_module_class_with_a_disabled_submodule_class():
    @torch.compiler.disable
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, t):
            return self.lin(torch.sigmoid(t))

    def make(decorate):
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()
                self.lin = nn.Linear(4, 4)

            def forward(self, t):
                return self.lin(self.inner(torch.sin(t)))
        return decorate(Outer)

    counter = CompileCounter()
    torch.manual_seed(0)
    eager = make(lambda c: c)()
    torch.manual_seed(0)
    compiled_cls = make(ember.compile(backend=counter))
    compiled = compiled_cls()
    assert type(compiled) is compiled_cls and isinstance(compiled, nn.Module)
    for m in (eager, compiled):
        m.inner.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    a = _x(4)
    assert_same(compiled(a), eager(a))
    # the graph before the disabled submodule, and the one after it
    assert counter.frame_count == 2
    assert any(n.target is torch.sin for n in counter.graphs[0].graph.nodes)
    assert all(n.target is not torch.sigmoid for g in counter.graphs for n in g.graph.nodes)
    # every instance of the class is compiled (the same code: no new graphs)
    torch.manual_seed(1)
    other = compiled_cls()
    torch.manual_seed(1)
    other_eager = make(lambda c: c)()
    assert_same(other(a), other_eager(a))
    assert counter.frame_count == 2


def test_compiled_plain_class_compiles_calls_not_construction():
    counter = CompileCounter()

    @ember.compile(backend=counter)
    class Affine:
        def __init__(self, w):
            self.w = w

        def __call__(self, t):
            return t * self.w + 1

    f = Affine(3.0)
    assert type(f) is Affine and counter.frame_count == 0
    a = _x(3)
    assert_same(f(a), a * 3.0 + 1)
    assert counter.frame_count == 1


def test_compiled_module_instance_called_inside_a_compiled_function():
    counter = CompileCounter()

    @ember.compile(backend=counter)
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, t):
            return self.lin(t).relu()

    b = Block()

    @ember.compile(backend=counter)
    def outer(t):
        return b(t) * 2

    a = _x(2, 3)
    expected = nn.Linear.forward(b.lin, a).relu() * 2
    assert_same(outer(a), expected)
