"""Calls that only carry a hint for torch's compiler run their function, as eager does.

``torch.compiler.nested_compile_region`` marks a function whose compiled code torch may reuse;
eager (and ember, which inlines it) calls the function. The ``wrap`` operator
(``torch._higher_order_ops.wrap.wrap(f, *args)``) is ``f(*args)``. Both were breaks: the marked
function's placeholder raised "invoke_subgraph should not be called directly in Dynamo" under
tracing, so a frame whose tensor work sat in such a region ran entirely eagerly (no graph), and
``fullgraph=True`` failed.
"""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_module_same, check_same, compile


@torch.compiler.nested_compile_region
def _block(x, w):
    return torch.tanh(x @ w) + x


def _two_regions(x, w):
    return _block(x, w) * 2 + _block(x.cos(), w)


def test_nested_compile_region_is_inlined_one_graph():
    check_same(_two_regions, torch.randn(3, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True))


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    @torch.compiler.nested_compile_region
    def forward(self, x, *, scale=1.0):
        return torch.relu(self.lin(x)) * scale


class _Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(3))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x, scale=1.0 + i) + x
        return x


def test_nested_compile_region_on_repeated_layers_with_grads():
    check_module_same(_Stack, torch.randn(2, 6, requires_grad=True))


def test_nested_compile_region_with_a_break_inside_matches_eager():
    seen = []

    @torch.compiler.nested_compile_region
    def region(x):
        y = x.sin()
        seen.append(len(seen))
        torch._dynamo.graph_break()
        return y * 3

    def fn(x):
        return region(x + 1) - 1

    x = torch.randn(4)
    expected = fn(x)
    cnt = CompileCounter()
    actual = compile(fn, backend=cnt)(x)
    assert_same(actual, expected)
    assert seen == [0, 1]
    assert cnt.frame_count == 2


def _wrap():
    from torch._higher_order_ops.wrap import wrap
    return wrap


def test_wrap_with_pytree_and_keyword_arguments():
    wrap = _wrap()

    def body(d, *, k, z):
        z1, _ = z
        return d["a"].sin() + d["b"][1] * k + z1

    def fn(x, y):
        return wrap(body, {"a": x, "b": (y, x)}, k=2.0, z=(y, x))

    check_same(fn, torch.randn(3), torch.randn(3))


def test_wrap_body_side_effects_and_mutated_input_match_eager():
    wrap = _wrap()
    log = []

    def body(x):
        log.append(x.shape[0])
        x.add_(1)
        return x * 2

    def fn(x):
        return wrap(body, x)

    x_e, x_c = torch.randn(3), None
    x_c = x_e.clone()
    expected = fn(x_e)
    actual = compile(fn, backend=CompileCounter(), fullgraph=True)(x_c)
    assert_same(actual, expected)
    assert_same(x_c, x_e)
    assert log == [3, 3]


@pytest.mark.parametrize("dynamic", [False, True])
def test_wrap_of_a_module_call_with_grads(dynamic):
    wrap = _wrap()
    mod = torch.nn.Linear(3, 3)

    def fn(x):
        y = mod(x)
        return wrap(lambda t: t - mod.bias, y) + wrap(lambda t: mod(t), x)

    check_same(fn, torch.randn(2, 3, requires_grad=True), dynamic=dynamic)
