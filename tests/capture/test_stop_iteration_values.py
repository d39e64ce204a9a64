"""A StopIteration raised in the trace with a value made in the frame (a generator that returns a
tensor or a new object, reached by ``send``/``throw``): the ``except`` block sees that value as
``e.value`` and ``e.args[0]``, through re-raises too; compared with eager."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class Box:
    def __init__(self, x):
        self.x = x


def returns_box():
    try:
        yield 1
    except ValueError:
        return Box(2)  # noqa: B901
    finally:
        return Box(3)  # noqa: B012, B901


def returns_tensor(t):
    x = yield
    return x * t  # noqa: B901


def via_throw(t):
    gen = returns_box()
    next(gen)
    try:
        gen.throw(ValueError)
    except StopIteration as e:
        return t.sin() + e.args[0].x + e.value.x
    return t


def via_send(t):
    gen = returns_tensor(t)
    next(gen)
    try:
        gen.send(t + 1)
    except StopIteration as e:
        return e.value.cos(), len(e.args), isinstance(e, StopIteration)
    return t


def reraised(t):
    gen = returns_tensor(t)
    next(gen)
    try:
        try:
            gen.send(t + 2)
        except KeyError:
            return t
        finally:
            t = t * 2
    except StopIteration as e:
        return e.value + t
    return t


def bare_reraise(t):
    gen = returns_tensor(t)
    next(gen)
    try:
        try:
            gen.send(t - 1)
        except StopIteration:
            raise
    except StopIteration as e:
        return e.value * 3
    return t


def as_string(t):
    gen = returns_tensor(t)
    next(gen)
    try:
        gen.send(t)
    except StopIteration as e:
        return t + len(str(e)) * 0
    return t


@pytest.mark.parametrize("fn", [via_throw, via_send, reraised, bare_reraise])
def test_stop_iteration_value_in_one_graph(fn):
    t = torch.randn(3)
    counter = CompileCounter()
    assert_same(compile(fn, backend=counter, fullgraph=True)(t), fn(t))
    assert counter.frame_count == 1


def test_other_reads_of_such_an_exception_run_eagerly():
    t = torch.randn(3)
    assert_same(compile(as_string)(t), as_string(t))
