"""autograd.Function in the forms users write, compared with eager on the eager and aot_eager backends.

Graph counts are the ones torch.compile makes, except where noted (ember breaks where torch.compile
would trace something ember cannot yet do without a risk of a wrong answer).
"""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, check_same, reset, stats


class _AotCounter(CompileCounter):
    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return ember.lookup_backend("aot_eager")(gm, example_inputs)


def check(fn, *args, graphs=1, breaks=0):
    """Outputs, inputs after the call and gradients equal to eager's, on both backends."""
    for counter in (CompileCounter(), _AotCounter()):
        reset()
        check_same(fn, *args, graphs=graphs, fullgraph=False, counter=counter)
        assert stats()["graph_breaks"] == breaks
        assert stats()["fallbacks"] == 0


def x3():
    return torch.randn(3, requires_grad=True)


# --- backward reading tensors from outside the Function ----------------------------------------------
# The eager backend ran these in one graph; under AOT the user's backward met a real tensor among fake
# ones and the frame failed to compile. They now break at the call (as torch.compile breaks on a backward
# reading a lifted free variable) and run eagerly.

SCALE = torch.tensor(3.0)


class ReadsGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * SCALE

    @staticmethod
    def backward(ctx, g):
        return g * SCALE


def _closure_function(t):
    class ReadsClosure(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * t

        @staticmethod
        def backward(ctx, g):
            return g * t * 2
    return ReadsClosure


ReadsClosure = _closure_function(torch.tensor(2.0))
_lin = torch.nn.Linear(3, 3)


class ReadsModuleWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _lin(x)

    @staticmethod
    def backward(ctx, g):
        return g @ _lin.weight


class Holder:
    pass


class KeepsTensorInObject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.h = Holder()
        ctx.h.t = x.cos()
        ctx.pair = (x.sin(), 2)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.h.t + ctx.pair[0]


@pytest.mark.parametrize("fn,graphs", [
    (lambda x: ReadsGlobal.apply(x).sin(), 2),
    (lambda x: ReadsClosure.apply(x).sin(), 2),
    (lambda x: ReadsModuleWeight.apply(x.reshape(1, 3)).sin(), 3),  # (reshape | forward's own frame | sin)
], ids=["global", "closure", "module_weight"])
def test_backward_reading_a_tensor_forward_also_read(fn, graphs):
    check(fn, x3(), graphs=graphs, breaks=1)


def test_backward_reading_tensors_ctx_holds_stays_in_one_graph():
    check(lambda x: KeepsTensorInObject.apply(x).sin(), x3(), graphs=1, breaks=0)


# --- an apply that breaks: its forward, compiled as a frame of its own, records on the real ctx --------
# (ctx.save_for_backward and friends are replayed after the forward's graph instead of breaking it)

class ItemInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, None, y)
        ctx.set_materialize_grads(False)
        return x * y, (x + y).argmax()

    @staticmethod
    def backward(ctx, g, _gi):
        x, none, y = ctx.saved_tensors
        assert none is None
        return g * y * x.sum().item(), g * x


class DirtyInBrokenApply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        out = x.sign()
        ctx.mark_non_differentiable(out)
        return x, out

    @staticmethod
    def backward(ctx, g, _g2):
        print("backward")  # (breaks: the apply runs eagerly)
        return g * 2


class SavedThenChanged(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 2
        ctx.save_for_backward(y)
        y.add_(1)  # (apply saves after forward returns: backward sees y + 1, eager raises nothing)
        return y * 1

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y.sum().item()


def test_forward_of_a_broken_apply_saves_without_a_break():
    # caller: before the apply | the forward's own frame | after: 3 graphs, 1 break (.item() in backward)
    check(lambda x, y: ItemInBackward.apply(x.sin(), y)[0].cos(), x3(), x3(), graphs=3, breaks=1)


def test_forward_of_a_broken_apply_marks_dirty_and_non_differentiable(capsys):
    check(lambda x: DirtyInBrokenApply.apply(x * 1), x3(), graphs=2, breaks=1)  # (x * 1 | the forward)


def test_tensor_saved_then_changed_in_a_compiled_forward():
    check(lambda x: SavedThenChanged.apply(x.sin()).cos(), x3(), graphs=3, breaks=1)
