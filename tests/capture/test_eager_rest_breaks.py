"""An instruction ember cannot trace and cannot break at like a call (``with lock:``, ``for v in
array``, ``a, b = array``): the graph covers what comes before, and the frame goes on eagerly from
that instruction (was: the whole frame ran eagerly)."""
import array
import threading
import traceback

import pytest
import torch

import ember

LOCK = threading.Lock()
ARR = array.array("i", [1, 2, 3])


def with_lock(x):
    y = x * 2
    with LOCK:
        y = y + 1
    return y.sin()


def for_over_array(x):
    y = x * 2
    for v in ARR:
        y = y + v
    return y


def unpack_array(x):
    y = x * 2
    a, b, c = ARR
    return y + a + b + c


def raise_in_lock(x, n):
    y = x + 1
    try:
        with LOCK:
            y = y * n
            if n > 2:
                raise KeyError(n)
    except KeyError:
        y = y - 100
    return y, LOCK.locked()


def lock_and_no_grad(x):
    y = x.relu()
    with LOCK, torch.no_grad():
        z = y * 2
    return z, z.requires_grad


def pending_call(x):
    return torch.cat([x.cos(), *[x + v for v in ARR]])


CASES = [(with_lock, (3,)), (for_over_array, (3,)), (unpack_array, (3,)), (raise_in_lock, (3, 1)),
         (raise_in_lock, (3, 5)), (lock_and_no_grad, (3,)), (pending_call, (3,))]


def _args(spec, grad=False):
    shape, *rest = spec
    return (torch.linspace(-1, 1, shape, requires_grad=grad), *rest)


@pytest.mark.parametrize("fn,spec", CASES, ids=lambda c: getattr(c, "__name__", ""))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_prefix_compiled_rest_eager(fn, spec, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    for _ in range(2):
        expected, got = fn(*_args(spec)), compiled(*_args(spec))
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    stats = ember.stats()
    assert stats["fallbacks"] == 0 and stats["graphs"] >= 1 and stats["graph_breaks"] >= 1, stats
    assert stats["recompiles"] == 0
    assert not LOCK.locked()


def test_gradients_flow_through_prefix_graph():
    ember.reset()
    x1, x2 = _args((3,), grad=True)[0], _args((3,), grad=True)[0]
    with_lock(x1).sum().backward()
    ember.compile(with_lock, backend="aot_eager")(x2).sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad)


def test_break_reason_names_the_instruction_line():
    ember.reset()
    out = ember.explain(with_lock)(torch.ones(3))
    assert out.graph_count == 1
    [reason] = out.break_reasons
    assert "lock.__enter__" in reason.reason and "with LOCK" in reason.source_line


def boom_after_lock(x):
    y = x + 1
    with LOCK:
        pass
    return y + torch.ones(4)  # shape mismatch: raised in the eager rest


def test_error_in_eager_rest_propagates_with_a_walkable_traceback():
    ember.reset()
    with pytest.raises(RuntimeError) as eager:
        boom_after_lock(torch.ones(3))
    with pytest.raises(RuntimeError) as got:
        ember.compile(boom_after_lock)(torch.ones(3))
    assert str(got.value) == str(eager.value)
    text = "".join(traceback.format_exception(got.value))
    assert "return y + torch.ones(4)" in text
    assert not LOCK.locked()


def test_explain_with_a_class_statement_in_the_frame():
    def f(x):
        y = x + 1

        class Local:
            k = 2
        return y * Local.k
    ember.reset()
    out = ember.explain(f)(torch.ones(2))
    assert out.graph_count >= 1
    torch.testing.assert_close(ember.compile(f)(torch.ones(2)), f(torch.ones(2)))


def test_a_break_in_a_long_loop_does_not_exhaust_the_stack():
    """Each iteration's resume function is called from the previous one's; past a nesting limit the
    rest of the loop runs eagerly (as torch.compile runs a frame with a break in a loop)."""
    import ember
    from ember.capture.cache import MAX_RESUME_NESTING

    def f(x, n):
        for i in range(n):
            x = x + i
            torch._dynamo.graph_break()
        return x * 2

    x = torch.zeros(2)
    for n in (10, MAX_RESUME_NESTING + 5, 1500):
        ember.reset()
        torch.testing.assert_close(ember.compile(f)(x, n), f(x, n))
        assert ember.stats()["fallbacks"] == 1  # (the frame is skipped: a break inside a loop)
