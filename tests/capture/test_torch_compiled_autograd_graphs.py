"""The backward graph torch's compiled autograd makes (``torch._dynamo.compiled_autograd._enable``
with ember as its compiler) compiles whole under ember: the helpers that graph calls
(``call_hook``, ``call_accumulate_grad``, ``unwrap_maybe_dynamic_int`` in
torch/_dynamo/external_utils.py) are traced as the plain Python they are, and the C++ autograd
functions it names (``compiled_autograd.ops.validate_outputs``, ``SinBackward0``, which torch
registers with allow_in_graph) are one node each. ember refused the helpers as "the other
compiler's internals" (EB0027), so with fullgraph=True the backward raised. The gradients must
be eager's."""
import functools

import pytest
import torch
from torch._dynamo import compiled_autograd

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset


class Holder:
    def __init__(self, val):
        self.val = val


def input_hook(x, obj):
    y = x.sin()
    x.register_hook(lambda grad: grad + obj.val)
    return y.sin()


def intermediate_hooks(x, obj):
    y = x.mul(2)
    y.register_hook(functools.partial(lambda g, k: g * k, k=3))
    y.register_hook(lambda g: g + obj.val)
    return y.cos().sum()


def post_accumulate(x, w):
    def hook(p):
        p.grad.mul_(2)
    x.register_post_accumulate_grad_hook(hook)
    return (x * w).sum()


def _grads(fn, make_args, backward_compiler=None, forward_compiler=None):
    args = make_args()
    run = forward_compiler(fn) if forward_compiler else fn
    if backward_compiler is None:
        run(*args).sum().backward()
    else:
        with compiled_autograd._enable(backward_compiler):
            run(*args).sum().backward()
    return [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


@pytest.mark.parametrize("fn, make_args", [
    (input_hook, lambda: (torch.ones(4, requires_grad=True), Holder(torch.tensor(88.0)))),
    (intermediate_hooks, lambda: (torch.randn(4, requires_grad=True), Holder(2.0))),
    (post_accumulate, lambda: (torch.randn(3, requires_grad=True), torch.randn(3))),
], ids=["input_hook", "intermediate_hooks", "post_accumulate"])
def test_compiled_autograd_graph_compiles_whole(fn, make_args):
    reset()
    torch.manual_seed(0)
    expected = _grads(fn, make_args)
    fw, bw = CompileCounter(), CompileCounter()
    torch.manual_seed(0)
    actual = _grads(fn, make_args, backward_compiler=lambda gm: compile(gm, backend=bw, fullgraph=True),
                    forward_compiler=lambda f: compile(f, backend=fw, fullgraph=True))
    assert_same(actual, expected)
    assert fw.frame_count == 1 and bw.frame_count == 1


def _square(t):
    return t * t


def _square_wrapped(grad):
    from torch._dynamo._trace_wrapped_higher_order_op import trace_wrapped
    return trace_wrapped(grad, fn=_square)  # (eager: _square(grad) under no_grad)


def wrapped_call(x):
    return _square_wrapped(x) * 3 + x


def hooked_by_wrapped(x, y):
    x.register_hook(_square_wrapped)
    return x + y


def test_trace_wrapped_is_its_function_under_no_grad():
    """``trace_wrapped(t, fn=f)``: f(t) with grad off, traced (EB0027 before)."""
    reset()
    x = torch.randn(3, requires_grad=True)
    out = compile(wrapped_call, fullgraph=True)(x)
    assert_same(out, wrapped_call(x))


def test_trace_wrapped_hook_in_a_compiled_autograd_graph():
    reset()
    make = lambda: (torch.tensor([0.5, 0.5], requires_grad=True), torch.tensor([0.5, 1.5], requires_grad=True))  # noqa: E731
    expected = _grads(hooked_by_wrapped, make)
    actual = _grads(hooked_by_wrapped, make, backward_compiler=lambda gm: compile(gm, fullgraph=True),
                    forward_compiler=lambda f: compile(f))
    assert_same(actual, expected)


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g * ctx.k, None


def through_function(x):
    x.register_hook(lambda g: g * 2)
    return _Cube.apply(x.sin(), 0.5)


@pytest.mark.parametrize("forward", [None, "eager"], ids=["eager_forward", "ember_forward"])
def test_custom_function_backward_in_a_compiled_autograd_graph(forward):
    """``call_backward(ctx, saved, *grads)``: the program's Function's backward (or capture's
    stand-in for it, which calls it) traced through a stand-in ctx, as torch.compile does."""
    if REFERENCE and forward is not None:
        pytest.skip("torch.compile 2.13 refuses this backward graph with fullgraph (Interpreter.__init__ is skipped)")
    reset()
    make = lambda: (torch.randn(4, generator=torch.Generator().manual_seed(1), requires_grad=True),)  # noqa: E731
    expected = _grads(through_function, make)
    bw = CompileCounter()
    fwd = None if forward is None else (lambda f: compile(f, backend=forward))
    actual = _grads(through_function, make, backward_compiler=lambda gm: compile(gm, backend=bw, fullgraph=True),
                    forward_compiler=fwd)
    assert_same(actual, expected)
    assert bw.frame_count == 1


def test_aot_function_backward_stays_eager_in_a_compiled_autograd_graph():
    """The AOT layer's Function (an aot_eager forward): its backward is ember's runtime, never
    traced; the compiled-autograd graph breaks there and the gradients are still eager's."""
    reset()
    make = lambda: (torch.randn(4, generator=torch.Generator().manual_seed(2), requires_grad=True),)  # noqa: E731
    expected = _grads(intermediate_hooks, lambda: (*make(), Holder(2.0)))
    actual = _grads(intermediate_hooks, lambda: (*make(), Holder(2.0)), backward_compiler=lambda gm: compile(gm),
                    forward_compiler=lambda f: compile(f, backend="aot_eager"))
    assert_same(actual, expected)
