"""A custom ``autograd.Function``'s backward is checked once while tracing and runs later: for real
with the eager backend, on fake tensors inside an AOT backend's joint trace. What it reads other than
through ctx, and what it decides, must hold for every later call (capture/variables/autograd_backward.py)."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, compile

SCALE = 2.0


class ScaledByGlobal(torch.autograd.Function):
    """forward and backward both read the module global SCALE (a float)."""

    @staticmethod
    def forward(ctx, x):
        return x * SCALE

    @staticmethod
    def backward(ctx, g):
        return g * SCALE


def scaled(x):
    return ScaledByGlobal.apply(x) + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dynamic", [None, True])
def test_backward_global_float_changed_between_calls(backend, dynamic):
    """dynamic=True makes the float a graph input; the AOT backward read its value while compiling,
    so the gradient of the second call used the first call's SCALE."""
    global SCALE
    compiled = compile(scaled, backend=backend, dynamic=dynamic)
    try:
        for value in (2.0, 3.0, 2.0):
            SCALE = value
            x, y = torch.randn(3, requires_grad=True), None
            y = x.detach().clone().requires_grad_()
            out, ref = compiled(x), scaled(y)
            assert_same(out, ref)
            out.sum().backward()
            ref.sum().backward()
            assert_same(x.grad, y.grad)
    finally:
        SCALE = 2.0


class ScaledByClassAttribute(torch.autograd.Function):
    factor = 4.0

    @staticmethod
    def forward(ctx, x):
        return x * ScaledByClassAttribute.factor

    @staticmethod
    def backward(ctx, g):
        return g * ScaledByClassAttribute.factor


def test_backward_class_attribute_changed_dynamic_aot():
    def f(x):
        return ScaledByClassAttribute.apply(x)
    compiled = compile(f, backend="aot_eager", dynamic=True)
    try:
        for value in (4.0, 5.0):
            ScaledByClassAttribute.factor = value
            x = torch.ones(3, requires_grad=True)
            compiled(x).sum().backward()
            assert x.grad.tolist() == [value] * 3
    finally:
        ScaledByClassAttribute.factor = 4.0


class StashedFloat(torch.autograd.Function):
    """The dynamic float reaches backward through ctx: no reason to specialise it."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


def test_float_through_ctx_stays_dynamic():
    def f(x, k):
        return StashedFloat.apply(x, k)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt, dynamic=True)
    for k in (2.0, 3.0, 5.0):
        x = torch.ones(3, requires_grad=True)
        out = compiled(x, k)
        out.sum().backward()
        assert out.tolist() == [k] * 3
        assert x.grad.tolist() == [k] * 3
    assert cnt.frame_count == 1


class CheckedGradient(torch.autograd.Function):
    """backward checks its gradient's values: eager raises ValueError in backward() (an explicit raise:
    pytest rewrites a test module's assert statements)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if not (g < 100).all():
            raise ValueError("gradient too large")
        return g * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_backward_asserting_on_gradient_values(backend, scale):
    """The check cannot be decided while an AOT backend traces the backward on fake tensors (it
    failed compiling: DataDependentOutputException): the call runs eagerly, the rest compiled."""
    def f(x):
        return CheckedGradient.apply(x.sin()) * scale

    cnt = CompileCounter()
    compiled = compile(f, backend=cnt if backend == "eager" else "aot_eager")
    x = torch.randn(4, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    out, ref = compiled(x), f(y)
    assert_same(out, ref)
    if scale > 1:
        with pytest.raises(ValueError, match="gradient too large"):
            ref.sum().backward()
        with pytest.raises(ValueError, match="gradient too large"):
            out.sum().backward()
    else:
        out.sum().backward()
        ref.sum().backward()
        assert_same(x.grad, y.grad)
    if backend == "eager":
        assert cnt.frame_count == 3  # (before and after the call, and forward compiled on its own)


def test_backward_asserting_on_gradient_values_fullgraph_names_the_reason():
    def f(x):
        return CheckedGradient.apply(x) * 2
    with pytest.raises(ember.Unsupported, match="CheckedGradient.backward branches on a tensor's value"):
        ember.compile(f, backend="aot_eager", fullgraph=True)(torch.randn(3, requires_grad=True))
