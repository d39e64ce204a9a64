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


def test_pointwise_mode_on_cpu_as_in_eager():
    # (torch 2.13 raises for the pointwise mode on CPU, 2.14 runs it: ember does what eager does)
    def f(x):
        return associative_scan(lambda l, r: l + r, x, 0, combine_mode="pointwise")
    x = torch.randn(4, 3)
    try:
        expected = f(x)
    except Exception as e:  # noqa: BLE001 — whichever error eager raises, the compiled call raises it
        with pytest.raises(type(e)):
            compile(f, backend="eager")(x)
        return
    assert_same(compile(f, backend="eager")(x), expected)


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


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 8, 11, 16, 17])
def test_graph_scan_equals_torch_scan_values_and_layout(length, reverse):
    # run_associative_scan is ember's own pairwise scan: same values (same combination order:
    # bitwise equal) and the same strides as torch's generic associative_scan
    from ember.capture.variables.scan import run_associative_scan
    g = torch.Generator().manual_seed(length)
    a, b = torch.rand(3, length, 2, generator=g), torch.rand(3, length, 2, generator=g)

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    ref = associative_scan(combine, (a, b), 1, reverse=reverse, combine_mode="generic")
    got = run_associative_scan(lambda al, bl, ar, br: combine((al, bl), (ar, br)), (a, b), 1, reverse, "tuple")
    for x, y in zip(got, ref):
        assert torch.equal(x, y)
        assert x.stride() == y.stride()


def test_symbolic_batch_stays_symbolic_around_the_scan():
    # torch's generic scan calls torch.Size.numel(), which turns every symbol of the shape into a
    # constant: HF falcon_mamba / jamba recompiled for every batch size (the scan length is pinned,
    # the other sizes must not be)
    counter = CompileCounter()
    compiled = compile(selective_scan, backend=counter)
    g = torch.Generator().manual_seed(1)
    for batch in (2, 3, 4, 5):
        args = [-torch.rand(batch, 3, 7, 4, generator=g) for _ in range(3)]
        assert_same(compiled(*args), selective_scan(*args))
    if not REFERENCE:
        assert counter.frame_count == 2  # static, then one symbolic graph for every later batch


def test_symbolic_batch_with_grads_on_aot():
    compiled = compile(selective_scan, backend="aot_eager")
    g = torch.Generator().manual_seed(2)
    for batch in (2, 3, 4):
        args = [(-torch.rand(batch, 3, 6, 4, generator=g)).requires_grad_() for _ in range(3)]
        ref_args = [a.detach().clone().requires_grad_() for a in args]
        out, ref = compiled(*args), selective_scan(*ref_args)
        assert_same(out, ref)
        out.pow(2).sum().backward()
        ref.pow(2).sum().backward()
        for a, r in zip(args, ref_args):
            assert_same(a.grad, r.grad)
    if not REFERENCE:
        assert stats()["recompiles"] == 1
