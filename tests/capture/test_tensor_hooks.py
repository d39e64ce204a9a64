"""``t.register_hook(hook)`` inside a compiled frame (ember/capture/variables/tensor_hooks.py).

On an input the registration is replayed after the graph with the real hook; on a tensor the graph
computes, the hook is traced into the graph (a pure subgraph) and registered where the frame
registered it. Every test compares gradients (and the hook's own side effects) with eager, on the
graph-as-is backend and on the AOT backends, which compile forward and backward together."""
import functools

import pytest
import torch
from torch.utils.hooks import RemovableHandle

import ember
from ember_test_helpers import CompileCounter, assert_same, check_same

BACKENDS = ["eager", "aot_eager"]


def _grads(fn, backend, *shapes, fullgraph=True, seed=0):
    """(eager output, grads), (compiled output, grads) of ``fn`` on fresh leaves."""
    results = []
    for compiled in (False, True):
        torch.manual_seed(seed)
        xs = [torch.randn(*s, requires_grad=True) for s in shapes]
        f = ember.compile(fn, backend=backend, fullgraph=fullgraph) if compiled else fn
        out = f(*xs)
        first = out[0] if isinstance(out, tuple) else out
        first.sum().backward()
        results.append((first.detach(), [x.grad for x in xs]))
    return results


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_on_a_computed_tensor_sees_its_whole_gradient(backend):
    def fn(x):
        y = x * 2
        z = y + 1              # used before the hook: its gradient passes through the hook too
        y.register_hook(lambda g: g * 2)
        w = y * 3
        return z + w

    (e_out, e_grads), (c_out, c_grads) = _grads(fn, backend, (4,))
    assert_same(c_out, e_out)
    assert_same(c_grads, e_grads)
    assert torch.equal(c_grads[0], torch.full((4,), 16.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_returning_none_and_closures(backend):
    def keeps(x):
        y = x * 2
        y.register_hook(lambda g: None)
        return y.sum()

    def reads_tensors(x):
        y = x.sin()
        s = x.cos()
        y.register_hook(lambda g: g + s * 3)
        y.register_hook(functools.partial(lambda g, k: g * k, k=4))  # hooks run in registration order
        return y.sin()

    for fn in (keeps, reads_tensors):
        (e_out, e_grads), (c_out, c_grads) = _grads(fn, backend, (5,))
        assert_same(c_out, e_out)
        assert_same(c_grads, e_grads)


def test_hook_on_a_computed_tensor_is_one_graph():
    def fn(x):
        y = x + 1
        y.register_hook(lambda g: g * 2)
        return y * y

    counter = check_same(fn, torch.randn(3, requires_grad=True), graphs=1)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_impure_hook_on_a_used_computed_tensor_runs_the_frame_eagerly(backend):
    # the hook appends to a list: not traceable; a break would register it on the graph's output,
    # which the AOT backends' earlier use (z) bypasses — the frame must run eagerly instead
    seen = []

    def fn(x):
        y = x * 2
        z = y + 1

        def hook(g):
            seen.append(g.clone())
            return g * 2
        y.register_hook(hook)
        return z + y * 3

    (e_out, e_grads), (c_out, c_grads) = _grads(fn, backend, (3,), fullgraph=False)
    assert_same(c_out, e_out)
    assert_same(c_grads, e_grads)
    assert len(seen) == 2 and torch.equal(seen[0], seen[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_on_an_input_is_the_real_hook(backend):
    calls = []

    def hook(g):
        calls.append(1)  # a side effect at backward time, as in eager
        return g * 2

    def fn(x, y):
        x.register_hook(hook)
        return x * y

    (e_out, e_grads), (c_out, c_grads) = _grads(fn, backend, (4,), (4,))
    assert_same(c_out, e_out)
    assert_same(c_grads, e_grads)
    assert calls == [1, 1]


def test_input_hook_handles_keep_identity_order_and_removal():
    def fn(x, y):
        h0 = x.register_hook(lambda g: g * 4)
        h1 = x.register_hook(lambda g: g / 2)
        h2 = x.register_hook(lambda g: g + 1)  # order matters: (g * 4 / 2) + 1
        gone = x.register_hook(lambda g: g * 100)
        gone.remove()
        return x * y, h2, h0, h2, gone

    counter = CompileCounter()
    compiled = ember.compile(fn, backend=counter, fullgraph=True)
    outs = []
    for f in (fn, compiled):
        x = torch.ones(3, requires_grad=True)
        out, h2, h0, h2_again, gone = f(x, torch.full((3,), 3.0))
        assert isinstance(h0, RemovableHandle) and h2 is h2_again and isinstance(gone, RemovableHandle)
        out.sum().backward()
        first = x.grad.clone()
        h0.remove()
        h2.remove()
        out2 = x * 1.0
        out2.sum().backward()
        outs.append((first, x.grad.clone()))
    assert_same(outs[1], outs[0])
    assert counter.frame_count == 1


def test_input_hook_handle_stored_on_an_object():
    class Holder:
        handle = None

    def fn(x, holder):
        holder.handle = x.register_hook(lambda g: g * 2)
        return x.sin()

    results = []
    for f in (fn, ember.compile(fn, backend="eager", fullgraph=True)):
        holder = Holder()
        x = torch.linspace(-1, 1, 3).requires_grad_()
        f(x, holder).sum().backward()
        assert isinstance(holder.handle, RemovableHandle)
        results.append(x.grad)
    assert_same(results[1], results[0])


def test_post_accumulate_grad_hook_on_a_leaf_input():
    def hook(t):
        t.grad.mul_(5)

    def fn(x, y):
        x.register_post_accumulate_grad_hook(hook)
        return x * y

    grads = []
    for f in (fn, ember.compile(fn, backend="aot_eager", fullgraph=True)):
        x = torch.ones(3, requires_grad=True)
        f(x, torch.arange(3.0)).sum().backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


def test_eager_torch_cond_operator_is_traced():
    # what torch.cond runs outside a compiled region: its operator, called with the branch functions
    def fn(pred, x):
        return torch.ops.higher_order.cond(pred, lambda t: t + 1, lambda t: t - 1, (x,))

    check_same(fn, torch.tensor(True), torch.randn(3), graphs=1)
    check_same(fn, torch.tensor(False), torch.randn(3), graphs=1)
