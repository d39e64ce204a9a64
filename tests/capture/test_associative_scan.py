"""associative_scan(combine_fn, xs, dim, combine_mode="generic") in one graph (capture/variables/scan.py),
as HF mamba's selective scan calls it on CPU while compiling; equal to eager with grads."""
import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, stats


def selective_scan(a, b, c):
    def combine_fn(left, right):
        a_left, b_left = left
        a_right, b_right = right
        return a_left * a_right, a_right * b_left + b_right
    _, states = associative_scan(combine_fn, (a.exp(), b), dim=2, combine_mode="generic")
    return (states * c).sum(-1)


def cumsum_reverse(x):
    return associative_scan(lambda l, r: l + r, x.sin(), 1, reverse=True, combine_mode="generic") * 2


def _inputs(requires_grad):
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 3, 7, 4), (2, 3, 7, 4), (2, 3, 7, 4)]
    return [(-torch.rand(s, generator=g)).requires_grad_(requires_grad) for s in shapes]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [selective_scan, cumsum_reverse])
def test_scan_in_one_graph_with_grads(backend, fn):
    counter = CompileCounter()
    args = _inputs(True)[: 3 if fn is selective_scan else 1]
    ref_args = [a.detach().clone().requires_grad_() for a in args]
    compiled = compile(fn, backend=counter if backend == "eager" else backend)
    out, ref = compiled(*args), fn(*ref_args)
    assert_same(out, ref)
    out.pow(2).sum().backward()
    ref.pow(2).sum().backward()
    for a, r in zip(args, ref_args):
        assert_same(a.grad, r.grad)
    assert stats()["graph_breaks"] == 0
    if backend == "eager":
        assert counter.frame_count == 1


def test_no_grad_and_second_call():
    args = _inputs(False)
    compiled = compile(selective_scan, backend="aot_eager")
    with torch.no_grad():
        assert_same(compiled(*args), selective_scan(*args))
        args2 = [a * 0.5 for a in args]
        assert_same(compiled(*args2), selective_scan(*args2))


def test_closed_over_tensor_and_side_effect_break_but_match():
    w = torch.randn(4)
    seen = []

    def closure(x):
        return associative_scan(lambda l, r: l * w + r, x, 0, combine_mode="generic")

    def effect(x):
        def combine(l, r):
            seen.append(1)
            return l + r
        return associative_scan(combine, x, 0, combine_mode="generic")

    x = torch.randn(5, 4)
    for fn in (closure, effect):
        seen.clear()
        expected = fn(x)
        n = len(seen)
        seen.clear()
        assert_same(compile(fn, backend="eager")(x), expected)
        assert len(seen) == n  # the combine function ran as often as in eager


def test_pointwise_mode_on_cpu_raises_as_in_eager():
    def f(x):
        return associative_scan(lambda l, r: l + r, x, 0, combine_mode="pointwise")
    x = torch.randn(4, 3)
    with pytest.raises(Exception) as eager:
        f(x)
    with pytest.raises(type(eager.value)):
        compile(f, backend="eager")(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_scan_over_a_dynamic_length_is_pinned_not_broken(backend):
    # (HF mamba under changing sequence lengths: the length became symbolic and the frame ran eagerly)
    counter = CompileCounter()
    compiled = compile(cumsum_reverse, backend=counter if backend == "eager" else backend, dynamic=True)
    for length in (5, 7, 5, 9):
        x = torch.rand(2, length, 3, requires_grad=True)
        ref_x = x.detach().clone().requires_grad_()
        out, ref = compiled(x), cumsum_reverse(ref_x)
        assert_same(out, ref)
        out.sum().backward()
        ref.sum().backward()
        assert_same(x.grad, ref_x.grad)
    if backend == "eager" and not REFERENCE:
        assert counter.frame_count == 3  # one graph per length (pinned: a guard on its value), no break
    if not REFERENCE:
        assert stats()["graph_breaks"] == 0
