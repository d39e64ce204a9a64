"""Functions marked with torch's ``nonstrict_trace`` decorator (ember/capture/variables/nonstrict.py):
one opaque call in the graph (the body — a graph break in it included — is not traced by the frame),
under fullgraph, with outputs and gradients equal to eager's on every backend."""
import pytest
import torch
import torch._dynamo

import ember
from ember_test_helpers import CompileCounter, assert_same

_OFFSET = torch.ones(1)


@torch._dynamo.nonstrict_trace
def _scaled(x, d, n):
    torch._dynamo.graph_break()  # (not traced: no break)
    return x * d["w"] + n + _OFFSET, x.shape[0]


def _program(x, w):
    a, k = _scaled(x.sin(), {"w": w}, 3)
    return a * k + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_nonstrict_call_is_one_graph_with_eager_gradients(backend):
    results = []
    for compiled in (False, True):
        x = torch.linspace(-1, 1, 4).requires_grad_()
        w = torch.linspace(0.5, 2, 4).requires_grad_()
        fn = ember.compile(_program, backend=backend, fullgraph=True) if compiled else _program
        out = fn(x, w)
        out.sum().backward()
        results.append((out, x.grad, w.grad))
    assert_same(results[1], results[0])


def test_nonstrict_trace_applied_in_the_frame_and_constants_guarded():
    def plain(x, n):
        torch._dynamo.graph_break()
        return x * n

    def fn(x, n):
        return torch._dynamo.nonstrict_trace(plain)(x, n) + 1

    counter = CompileCounter()
    compiled = ember.compile(fn, backend=counter, fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x, 2), fn(x, 2))
    assert_same(compiled(x, 5), fn(x, 5))  # the int is part of the call: a new one recompiles
    assert counter.frame_count == 2


def test_unsupported_argument_breaks_and_runs_eagerly():
    class Box:
        def __init__(self, t):
            self.t = t

    @torch._dynamo.nonstrict_trace
    def use(box):
        return box.t * 2

    def fn(x):
        return use(Box(x + 1)) - 1

    counter = CompileCounter()
    x = torch.randn(3)
    assert_same(ember.compile(fn, backend=counter)(x), fn(x))
    with pytest.raises(ember.Unsupported):
        ember.compile(fn, backend="eager", fullgraph=True)(x)


class _Pair:
    def __init__(self, a, b):
        self.a = a
        self.b = b


@pytest.fixture
def pair_pytree():
    import torch.utils._pytree as pytree
    pytree.register_pytree_node(_Pair, lambda p: ((p.a, p.b), "pair"), lambda ab, _ctx: _Pair(ab[0], ab[1]),
                                serialized_type_name="tests.capture._Pair")
    yield
    pytree._deregister_pytree_node(_Pair)


@torch._dynamo.nonstrict_trace
def _pair_product(p):
    return p.a * p.b


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_pytree_registered_object_argument(pair_pytree, backend):
    def fn(p):
        p.a = p.a + 1  # (written in the frame before the call: the call sees the new value)
        inner = _Pair(p.a.cos(), p.b)
        return _pair_product(_Pair(_pair_product(inner), p.b)), p.a

    results = []
    for compiled in (False, True):
        a = torch.linspace(-1, 1, 3).requires_grad_()
        b = torch.linspace(1, 2, 3).requires_grad_()
        p = _Pair(a, b)
        f = ember.compile(fn, backend=backend, fullgraph=True) if compiled else fn
        out, new_a = f(p)
        out.sum().backward()
        results.append((out, new_a, p.a, a.grad, b.grad))
    assert_same(results[1], results[0])


def test_nonstrict_trace_method_of_a_pytree_class():
    import torch.utils._pytree as pytree

    class Scale:
        def __init__(self, k):
            self.k = k

        @torch._dynamo.nonstrict_trace
        def apply(self, t):
            torch._dynamo.graph_break()
            return t * self.k

    pytree.register_pytree_node(Scale, lambda s: ((s.k,), None), lambda k, _ctx: Scale(k[0]),
                                serialized_type_name="tests.capture.Scale")
    try:
        def fn(x, k):
            return Scale(k).apply(x) + 1

        x = torch.randn(4)
        counter = CompileCounter()
        assert_same(ember.compile(fn, backend=counter, fullgraph=True)(x, 3.0), fn(x, 3.0))
        assert counter.frame_count == 1
    finally:
        pytree._deregister_pytree_node(Scale)
