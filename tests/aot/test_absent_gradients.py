"""Gradients that never arrive stay absent, as in eager.

When only some outputs of a compiled graph get a gradient, eager autograd runs
only the backward of the ops that produced those outputs: a leaf that only the
other outputs depend on keeps ``.grad is None``, hooks upstream of them do not
fire, and tensors saved by the ops upstream are not version-checked. A compiled
graph is one autograd node; it must not turn the missing gradients into zeros
and push those upstream (torch.compile does: ``b.grad`` becomes zeros).
"""
from __future__ import annotations

import sys

import pytest
import torch

import ember

BACKENDS = ["eager", "aot_eager"]


def _run(fn, make, backward, backend):
    args, leaves = make()
    if backend is not None:
        ember.reset()
        fn = ember.compile(fn, backend=backend)
    try:
        out = fn(*args)
        backward(out, args)
    except RuntimeError as e:
        return ("raised", str(e).split(":")[0]), None
    return None, [None if leaf.grad is None else leaf.grad.clone() for leaf in leaves]


def _check(fn, make, backward, backend):
    ref_exc, ref = _run(fn, make, backward, None)
    exc, got = _run(fn, make, backward, backend)
    assert exc == ref_exc
    if ref is None:
        return
    for r, g in zip(ref, got):
        assert (r is None) == (g is None), (r, g)
        if r is not None:
            torch.testing.assert_close(g, r)


def _leaves(*shapes):
    torch.manual_seed(0)
    leaves = [torch.rand(*s, dtype=torch.float64, requires_grad=True) for s in shapes]
    return leaves


@pytest.mark.parametrize("backend", BACKENDS)
def test_leaf_only_other_outputs_reach_keeps_grad_none(backend):
    def f(a, b):
        return a * 2, b * 3

    def make():
        a, b = _leaves((3,), (3,))
        return (a, b), [a, b]

    _check(f, make, lambda out, args: out[0].sum().backward(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_partially_shared_input_gets_only_arrived_part(backend):
    def f(a, b):
        return a * b, (a + b).sin(), b.exp()

    def make():
        a, b = _leaves((2, 3), (2, 3))
        return (a, b), [a, b]

    _check(f, make, lambda out, args: out[1].sum().backward(), backend)
    _check(f, make, lambda out, args: (out[0].sum() + out[2].sum()).backward(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_upstream_saved_tensor_mutated_is_not_checked(backend):
    # graph 1 saves x for t4's backward; graph 2 mutates t4 and x; only t1 and x reach the loss
    def f(x, y):
        t1 = y + y
        t4 = x * (x * 2).cos()
        print("break", file=sys.stderr)
        t4[2] = 3
        x *= 2
        return t1

    def make():
        xl, yl = _leaves((3, 4), (4,))
        return (xl * 1, yl), [xl, yl]

    _check(f, make, lambda out, args: (out.sum() + args[0].sum()).backward(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_upstream_saved_tensor_needed_still_raises(backend):
    # the same, but t4 reaches the loss: eager's version error
    def f(x, y):
        t1 = y + y
        t4 = x * (x * 2).cos()
        print("break", file=sys.stderr)
        x *= 2
        return t1, t4

    def make():
        xl, yl = _leaves((3, 4), (4,))
        return (xl * 1, yl), [xl, yl]

    _check(f, make, lambda out, args: (out[0].sum() + out[1].sum()).backward(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("leaf", [True, False])
def test_hook_upstream_of_unreached_output_is_not_called(backend, leaf):
    # eager never calls b's hook: no gradient reaches b. (One node for both outputs would make the
    # engine call it, with None -- ``g * 2`` raising -- or with zeros.)
    fired = []

    def f(a, b):
        return a.sin(), b.cos()

    def make():
        fired.clear()
        a0, b0 = _leaves((3,), (3,))
        b = b0 if leaf else b0 * 1
        b.register_hook(lambda g: fired.append(g * 2))
        return (a0, b), [a0, b0]

    _check(f, make, lambda out, args: out[0].sum().backward(), backend)
    assert fired == []


# One autograd node per group of outputs whose gradients reach the same inputs (ember.aot.saved.
# output_groups): the engine runs the producers of an input only when a gradient can reach it.

def _mutated_producer():
    """Inputs (a, b): b's producer (exp) saved b, which is then written in place after the call."""
    a0, b0 = _leaves((3,), (3,))
    return (a0 * 1, b0.exp()), [a0, b0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_producer_of_unreached_input_is_not_run(backend):
    def f(a, b):
        return a * 2, b * 3

    def backward(out, args):
        args[1].add_(1)  # ExpBackward's saved result is now stale: only running it raises
        out[0].sum().backward()

    _check(f, _mutated_producer, backward, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_producer_of_reached_input_still_raises(backend):
    def f(a, b):
        return a * 2, b * 3

    def backward(out, args):
        args[1].add_(1)
        (out[0].sum() + out[1].sum()).backward()

    _check(f, _mutated_producer, backward, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_outputs_sharing_an_input(backend):
    # tangents reach {a, c} and {b, c}: two nodes, c's gradient summed by the engine
    def f(a, b, c):
        h = c.tanh()
        return (a * h).sum(0), b.exp() * h, (h * 3).mean()

    def make():
        a, b, c = _leaves((2, 3), (3,), (3,))
        return (a, b.sin(), c * 1), [a, b, c]

    for pick in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)):
        _check(f, make, lambda out, args: sum(out[i].sum() for i in pick).backward(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_outputs_backward_one_then_the_other(backend):
    def f(a, b):
        return a.sin() * 2, b.cos().sum()

    def make():
        a0, b0 = _leaves((3,), (3,))
        return (a0 * 1, b0 * 1), [a0, b0]

    def backward(out, args):
        out[1].backward(retain_graph=True)
        out[0].sum().backward()
        out[1].backward()

    _check(f, make, backward, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_post_accumulate_hook_of_unreached_leaf_is_not_called(backend):
    fired = []

    def f(a, b):
        return a + 1, b * b

    def make():
        fired.clear()
        a, b = _leaves((3,), (3,))
        b.register_post_accumulate_grad_hook(lambda p: fired.append(p.grad))
        return (a.exp(), b), [a, b]

    _check(f, make, lambda out, args: out[0].sum().backward(), backend)
    assert fired == []


def test_grouped_outputs_double_backward():
    # create_graph=True through grouped nodes: each reruns its part eagerly (differentiable grads)
    def f(a, b):
        return a.sin(), b.cos()

    def make():
        a0, b0 = _leaves((3,), (3,))
        return (a0 * 1, b0 * 1), [a0, b0]

    def backward(out, args):
        (ga,) = torch.autograd.grad(out[0].sum(), args[0], create_graph=True)
        ga.sum().backward()

    _check(f, make, backward, "aot_eager")


def test_grouped_outputs_under_compiled_autograd():
    def f(a, b):
        return a.sin() * 2, b.cos()

    def run(compiled):
        a0, b0 = _leaves((3,), (3,))
        fn = ember.compile(f, backend="aot_eager") if compiled else f
        out = fn(a0 * 1, b0.exp())
        loss = (out[0].sum() + out[1].sum())
        if compiled:
            with ember.compiled_autograd.enable("aot_eager"):
                loss.backward()
        else:
            loss.backward()
        return a0.grad, b0.grad

    ember.reset()
    for r, g in zip(run(False), run(True)):
        torch.testing.assert_close(g, r)


def test_pruned_backward_with_inductor():
    pytest.importorskip("torch._inductor")

    def f(a, b):
        return (a * b).sum(0), b.exp()

    def make():
        a, b = _leaves((4, 3), (4, 3))
        return (a, b), [a, b]

    _check(f, make, lambda out, args: out[1].sum().backward(), "inductor")


def test_pruned_backward_with_inductor_zero_used_by_a_non_add_op():
    # eigh's backward multiplies the eigenvector gradient (absent here: a zeros node) with v:
    # the pruned backward's zeros must be an op Inductor lowers (aten.full, not aten.zeros)
    pytest.importorskip("torch._inductor")

    def f(a):
        s = a @ a.mT + torch.eye(3, dtype=a.dtype)
        w, v = torch.linalg.eigh(s)
        return w * 2, v

    def make():
        (a,) = _leaves((3, 3))
        return (a,), [a]

    _check(f, make, lambda out, args: out[0].sum().backward(), "inductor")
