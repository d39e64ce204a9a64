"""A custom autograd.Function whose backward writes to a tensor the forward kept on ``ctx``.

Eager's backward reads that tensor when it runs: a second call's backward sees what the first
call's backward wrote, even when both forwards ran before either backward. The compiled backward
must read the input then too, not a copy taken in the forward (nor a saved tensor whose version
check the first backward's write trips).
"""
import pytest
import torch

import ember


class DoublesStash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, stash, z):
        ctx.stash = stash              # kept on ctx: no version check, read when backward runs
        ctx.save_for_backward(a)
        return z * 3

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        ctx.stash.mul_(2)
        return None, None, g * ctx.stash + a


def f(a, stash, z):
    return DoublesStash.apply(a, stash, z)


def two_calls_then_two_backwards(fn):
    torch.manual_seed(0)
    a, stash = torch.zeros(4), torch.ones(4)
    z1, z2 = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    o1, o2 = fn(a, stash, z1), fn(a, stash, z2)
    o1.sum().backward()
    o2.sum().backward()
    return [o1.detach(), o2.detach(), stash, z1.grad, z2.grad]


@pytest.mark.parametrize("backend,partitioner", [("eager", "default"), ("aot_eager", "default"),
                                                 ("aot_eager", "min_cut")])
def test_second_backward_sees_first_backwards_write(backend, partitioner):
    expected = two_calls_then_two_backwards(f)
    torch._dynamo.reset()
    with ember.config.patch(aot_eager_partitioner=partitioner):
        got = two_calls_then_two_backwards(ember.compile(f, backend=backend))
    for what, e, g in zip(["out1", "out2", "stash", "z1.grad", "z2.grad"], expected, got):
        torch.testing.assert_close(g, e, msg=lambda m: f"{what}: {m}")
    # eager: stash doubled by each backward; z2's gradient read the doubled-twice stash
    torch.testing.assert_close(got[2], torch.full((4,), 4.0))


def test_backward_reads_a_change_made_between_forward_and_backward():
    """The program writes the stashed tensor after the forward: eager's backward reads the new value."""
    def run(fn):
        a, stash, z = torch.zeros(3), torch.ones(3), torch.ones(3, requires_grad=True)
        out = fn(a, stash, z)
        stash.fill_(5.0)
        out.sum().backward()
        return [stash, z.grad]
    expected = run(f)
    torch._dynamo.reset()
    got = run(ember.compile(f, backend="aot_eager"))
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got[1], torch.full((3,), 10.0))
