"""An ``autograd.Function`` applied to an inference tensor (made under ``torch.inference_mode``): its
forward is a traced region like any other (capture/subgraph.Region), with no in-place write allowed
in it (an inference tensor has no version counter to tell). It broke the graph (EB0051): 0 or 2
graphs where torch.compile 2.13 makes 1."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return 2 * a * g


class AddOneInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        a.add_(1)
        ctx.mark_dirty(a)
        return a

    @staticmethod
    def backward(ctx, g):
        return g


def computed_inside(x):
    with torch.inference_mode():
        y = x * 2
        return Square.apply(y) + 1


def applied_inside(x):
    with torch.inference_mode():
        return Square.apply(x) + 1


def applied(x):
    return Square.apply(x) + 1


def _inference_ones():
    with torch.inference_mode():
        return torch.arange(3.)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn, make, in_mode", [
    (computed_inside, lambda: torch.arange(3.), False),
    (applied_inside, _inference_ones, False),
    (applied, _inference_ones, True),
], ids=["computed_inside", "applied_inside", "inference_input"])
def test_function_on_inference_tensor_is_one_graph(fn, make, in_mode, backend):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt if backend == "eager" else backend)
    x = make()
    if in_mode:
        with torch.inference_mode():
            out, ref = compiled(x), fn(x)
    else:
        out, ref = compiled(x), fn(x)
    assert_same(out, ref)
    assert out.is_inference() == ref.is_inference() or backend != "eager"
    if backend == "eager":
        assert cnt.frame_count == 1


def test_in_place_forward_on_inference_tensor_runs_as_eager():
    def f(x):
        with torch.inference_mode():
            return AddOneInPlace.apply(x) * 2
    x, x_ref = _inference_ones(), _inference_ones()
    assert_same(compile(f, backend=CompileCounter())(x), f(x_ref))
    assert_same(x, x_ref)
