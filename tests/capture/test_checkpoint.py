"""torch.utils.checkpoint inlined with recompute tags (ember/capture/variables/checkpoint.py):
same values and gradients as eager, one graph, and the backward keeps less than without it."""
import pytest
import torch
import torch.utils.checkpoint as cp

import ember
from ember_test_helpers import assert_same, check_same, clone_inputs, reset, stats

BACKENDS = ["eager", "aot_eager", "inductor"]
TOL = dict(rtol=1e-4, atol=1e-5)


def _block():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("x_grad", [True, False])
def test_values_and_grads_match_eager(backend, reentrant, x_grad):
    block = _block()

    def fn(x):
        h = cp.checkpoint(block, x * 2, use_reentrant=reentrant)
        return (h.sin() + x).sum()
    x = torch.randn(4, 16, requires_grad=x_grad)
    reset()
    ex, cx = clone_inputs((x,)), clone_inputs((x,))
    expected = fn(*ex)
    actual = ember.compile(fn, backend=backend)(*cx)
    assert_same(actual, expected, **TOL)
    assert actual.requires_grad == expected.requires_grad
    if expected.requires_grad:
        expected.backward()
        eager_grads = [p.grad.clone() if p.grad is not None else None for p in block.parameters()]
        block.zero_grad(set_to_none=True)
        actual.backward()
        assert_same([p.grad for p in block.parameters()], eager_grads, **TOL)
        assert_same(cx[0].grad, ex[0].grad, **TOL)
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


def test_keyword_arguments_and_one_graph():
    def body(a, *, scale):
        return a.relu() * scale

    def fn(x):
        return cp.checkpoint(body, x, use_reentrant=False, scale=3.0) + 1
    check_same(fn, torch.randn(5, requires_grad=True), graphs=1)


def test_unspecified_use_reentrant_warns_like_eager():
    def fn(x):
        return cp.checkpoint(torch.sin, x)
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant"):
        out = ember.compile(fn, backend="aot_eager")(x)
    assert_same(out, torch.sin(x))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backward_keeps_less(backend):
    lin1, lin2 = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)

    def block(t):
        return lin2(torch.nn.functional.gelu(lin1(t)).sin().cos())

    def plain(x):
        return block(x).sum()

    def checkpointed(x):
        return cp.checkpoint(block, x, use_reentrant=False).sum()

    x0 = torch.randn(32, 64)

    def saved_bytes(fn):
        total = []
        x = x0.clone().requires_grad_()
        compiled = ember.compile(fn, backend=backend)
        compiled(x0.clone().requires_grad_())  # compile first (tracing saves fake tensors too)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: total.append(t.numel() * t.element_size()) or t,
                                                      lambda t: t):
            out = compiled(x)
        out.backward()
        return sum(total), x.grad
    plain_bytes, g_plain = saved_bytes(plain)
    ckpt_bytes, g_ckpt = saved_bytes(checkpointed)
    assert_same(g_ckpt, g_plain, **TOL)
    # with the checkpoint the backward keeps no activation: at most the input and the parameters
    inputs_and_params = x0.numel() * 4 + sum(p.numel() * 4 for p in (*lin1.parameters(), *lin2.parameters()))
    assert ckpt_bytes < plain_bytes and ckpt_bytes <= inputs_and_params, (ckpt_bytes, plain_bytes)


def test_checkpointed_function_with_python_side_effects_runs_eagerly():
    """Eager runs the function again in the backward: its side effects happen twice per step."""
    import ember
    from torch.utils.checkpoint import checkpoint
    calls = []
    lin = torch.nn.Linear(3, 3)

    def blk(h):
        calls.append(h.shape[0])
        return torch.tanh(lin(h))

    def step(x):
        out = checkpoint(blk, x, use_reentrant=False).sum()
        out.backward()
        return out

    def run(f):
        calls.clear()
        f(torch.randn(2, 3))
        f(torch.randn(2, 3))
        return list(calls)
    expected = run(step)
    ember.reset()
    assert run(ember.compile(step, backend="aot_eager")) == expected == [2, 2, 2, 2]
    assert ember.stats()["fallbacks"] == 0
