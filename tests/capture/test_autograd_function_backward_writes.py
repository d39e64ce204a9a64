"""A custom ``autograd.Function`` whose backward writes in place to a tensor it got through ctx.

Eager's backward changes that very tensor: when forward returned it (``ctx.y = y; return y``, or
saved it), or the frame computed it before the call, the program sees the write after
``backward()``. An AOT backend traces the backward into a functional graph, which copies writes back
only to the frame's inputs: the write to a returned tensor was lost (the output kept its old
values). Such a call now runs eagerly (a graph break at the call); writes to the frame's inputs, and
to a tensor forward made that nothing else reaches, still compile.
"""
from __future__ import annotations

import pytest
import torch

import ember


def _function(kind):
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z, w):
            y = z * 2
            if kind == "saved_output":
                ctx.save_for_backward(y)
            else:
                ctx.y = y
            ctx.w = w
            ctx.tmp = z + 1  # made by forward, reached by no one else
            return y

        @staticmethod
        def backward(ctx, g):
            y = ctx.saved_tensors[0] if kind == "saved_output" else ctx.y
            grad = g * y
            if kind in ("attr_output", "saved_output"):
                y.mul_(2)
            elif kind == "output_view":
                y[:2].mul_(2)
            elif kind in ("frame_value", "frame_input"):
                ctx.w.add_(1)
            elif kind == "private":
                ctx.tmp.mul_(g)
                grad = grad + ctx.tmp
            return grad, None
    return F


CASES = {  # kind -> whether the call still compiles into the graph
    "attr_output": False, "saved_output": False, "output_view": False, "frame_value": False,
    "frame_input": True, "private": True,
}


def _run(fn):
    z = torch.linspace(-1.0, 1.0, 3, requires_grad=True)
    w = torch.zeros(3)
    out, w2 = fn(z, w)
    out.sum().backward()
    return out.detach(), z.grad, w, w2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_backward_writes_to_ctx_tensors_as_eager(kind, backend):
    if backend == "inductor" and kind not in ("attr_output", "private"):
        pytest.skip("inductor: one refused and one compiled case are enough (compile time)")
    F = _function(kind)

    def fn(z, w):
        w2 = w * 1 if kind == "frame_value" else w
        return F.apply(z, w2), w2

    expected = _run(fn)
    ember.reset()
    before = ember.stats()
    got = _run(ember.compile(fn, backend=backend))
    after = ember.stats()
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    assert after["fallbacks"] == before["fallbacks"]
    breaks = after["graph_breaks"] - before["graph_breaks"]
    assert (breaks == 0) == CASES[kind], breaks
