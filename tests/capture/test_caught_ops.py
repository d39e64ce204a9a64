"""An op the program's ``try`` may catch, in a graph that could not run again (capture/caught_ops.py):
the graph breaks before it, so that when it raises at run time (a matrix that is not
positive-definite, an index out of range, a subclass refusing its arguments) the program's
``except`` (or ``contextlib.suppress``) sees it, with eager's state; a graph that can run
again keeps it (the eager rerun takes the ``except``)."""
import contextlib

import pytest
import torch

import ember
from ember_test_helpers import CompileCounter

def write_then_caught(a, buf):
    buf.add_(1)
    try:
        return torch.linalg.cholesky(a)
    except torch.linalg.LinAlgError:
        return a * 0


def _cholesky(a):
    return torch.linalg.cholesky(a) + 1


def caught_in_the_caller(a, buf):
    buf.mul_(2)
    try:
        return _cholesky(a)
    except RuntimeError:
        return a - 1


def caught_then_write(a, buf):
    try:
        out = torch.linalg.cholesky(a)
    except RuntimeError:
        out = a
    buf.add_(1)
    return out * 2


def suppressed(a, buf):
    buf.add_(1)
    out = a
    with contextlib.suppress(RuntimeError):
        out = torch.linalg.cholesky(a)
    return out


def nested_finally_then_except(a, buf):
    buf.add_(1)
    try:
        try:
            return torch.linalg.cholesky(a)
        finally:
            buf.add_(10)
    except RuntimeError:
        return buf * 2


def gather_after_append(x, idx, log):
    log.append(1)
    x.add_(1)
    try:
        return x.gather(0, idx)
    except RuntimeError:
        return x.sum()


def _run(fn, args):
    try:
        out = fn(*args)
    except RuntimeError as e:
        out = type(e)
    return out, args


@pytest.mark.parametrize("fn", [write_then_caught, caught_in_the_caller, caught_then_write, suppressed,
                                nested_finally_then_except])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_runtime_error_reaches_the_programs_handler(fn, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    for a in (torch.eye(3) * 2, -torch.eye(3), torch.eye(3)):
        expected = _run(fn, (a.clone(), torch.ones(2)))
        got = _run(compiled, (a.clone(), torch.ones(2)))
        if isinstance(expected[0], torch.Tensor):
            torch.testing.assert_close(got[0], expected[0])
        else:
            assert got[0] is expected[0]  # (the exception class both raised)
        torch.testing.assert_close(got[1], expected[1])  # (the inputs after the call)
    assert ember.stats()["recompiles"] == 0


def test_index_error_after_an_append_and_an_input_write():
    ember.reset()
    compiled = ember.compile(gather_after_append, backend="eager")
    for idx in (torch.tensor([0, 1]), torch.tensor([0, 7]), torch.tensor([2, 1])):
        x1, x2, log1, log2 = torch.ones(3), torch.ones(3), [], []
        torch.testing.assert_close(compiled(x1, idx, log1), gather_after_append(x2, idx, log2))
        torch.testing.assert_close(x1, x2)
        assert log1 == log2


class Unit(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.add and any(type(a) is torch.Tensor for a in args):
            raise ValueError("mixing units")
        return super().__torch_function__(func, types, args, kwargs or {})


def test_subclass_override_raising_inside_try():
    def f(a, b):
        try:
            return a.add(b)
        except ValueError as e:
            return str(e)
    c = ember.compile(f, backend=CompileCounter())
    a = torch.ones(2).as_subclass(Unit)
    assert c(a, torch.ones(2)) == f(a, torch.ones(2)) == "mixing units"
    torch.testing.assert_close(c(a, a), f(a, a))


def test_rerunnable_graph_keeps_the_op():
    def f(a):
        y = a * 2
        try:
            return torch.linalg.cholesky(y)
        except RuntimeError:
            return y
    counter = CompileCounter()
    c = ember.compile(f, backend=counter)
    for a in (torch.eye(3), -torch.eye(3)):
        torch.testing.assert_close(c(a), f(a))
    assert counter.frame_count == 1


def test_no_grad_block_is_no_handler():
    def f(w, x):
        w.mul_(0.5)
        with torch.no_grad():
            y = w * x
        return y + 1
    counter = CompileCounter()
    w1, w2, x = torch.ones(3), torch.ones(3), torch.randn(3)
    torch.testing.assert_close(ember.compile(f, backend=counter)(w1, x), f(w2, x))
    assert counter.frame_count == 1
