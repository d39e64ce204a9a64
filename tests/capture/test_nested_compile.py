"""``torch.compile(fn)`` / ``ember.compile(fn)`` called inside a compiled frame: the nested compile is
ignored and ``fn`` is traced into the outer graph, as torch.compile does with a nested compile (a
forward that compiles a kernel lazily: ``torch.compile(flex_attention)(q, k, v)``). It broke the
graph: ember traced into its own ``compile`` (EB0031 ``__closure__``) or torch's (EB0025
``_log_api_usage_once``), and ``fullgraph=True`` raised."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, check_same, compile


def scaled(x, c=None):
    if c is None:
        c = 2
    return c * x


def via_torch(x):
    return torch.compile(scaled, backend="eager")(x) + 1


def via_ember(x):
    return ember.compile(scaled, backend="eager")(x).sin()


def via_decorator_factory(x):
    return torch.compile(backend="eager", fullgraph=True)(scaled)(x, 3)


def via_model_keyword(x):
    return ember.compile(model=scaled)(x) * x


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


INNER = Inner()


def via_module(x):
    return torch.compile(INNER)(x) - x


@pytest.mark.parametrize("fn", [via_torch, via_ember, via_decorator_factory, via_model_keyword, via_module],
                         ids=lambda f: f.__name__)
def test_nested_compile_is_one_graph(fn):
    x = torch.randn(3, 4, requires_grad=True)
    check_same(fn, x, graphs=1, fullgraph=True)


def test_nested_compile_with_two_positional_arguments_runs_as_eager():
    def f(x):
        return torch.compile(scaled, "eager")(x)  # (the `fullgraph` position: a TypeError in eager)

    x = torch.randn(3)
    with pytest.raises(TypeError) as eager:
        f(x)
    with pytest.raises(TypeError) as compiled:
        compile(f, backend=CompileCounter())(x)
    assert str(compiled.value) == str(eager.value)
