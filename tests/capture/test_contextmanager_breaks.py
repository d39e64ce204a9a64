"""A graph break inside the block of a ``contextlib.contextmanager``.

The generator behind the manager is suspended at its ``yield`` when the break comes; ember
hands it over as a real generator suspended there (variables/generator_resume.py), so the
resumed code's ``__exit__`` runs the rest of it (its ``finally``, the code after ``yield``) at
the block's end, as eager does. Each test compares outputs and the log of side effects with
eager, and that the part before the break was compiled.
"""
import contextlib

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

LOG = []


@contextlib.contextmanager
def logged(tag, value=1.0):
    LOG.append(("enter", tag))
    try:
        yield value * 2
    finally:
        LOG.append(("exit", tag))


@contextlib.contextmanager
def suppressing(tag):
    LOG.append(("enter", tag))
    try:
        yield
    except KeyError:
        LOG.append(("suppressed", tag))
    LOG.append(("after", tag))


@contextlib.contextmanager
def state_after_yield(state):
    state["depth"] += 1
    yield state["depth"]
    state["depth"] -= 1
    LOG.append(("depth back", state["depth"]))


def _break_inside(x):
    y = x + 1
    with logged("a", 3.0) as v:
        y = y * v
        print("break")
        y = y - 1
    return y.sin()


def _nested_break(x):
    with logged("outer"):
        with logged("inner", 2.0) as v:
            y = x * v
            print("break")
        y = y + 1
    return y


def _exception_suppressed_after_break(x):
    with suppressing("s"):
        y = x + 1
        print("break")
        raise KeyError("k")
    return x * 2


def _state_read_after_break(x):
    state = {"depth": 0}
    with state_after_yield(state) as d:
        y = x + d
        print("break")
        y = y * state["depth"]
    return y, state["depth"]


PROGRAMS = [_break_inside, _nested_break, _exception_suppressed_after_break, _state_read_after_break]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[p.__name__.strip("_") for p in PROGRAMS])
def test_graph_break_inside_contextmanager_block(fn):
    x = torch.randn(3)
    LOG.clear()
    expected = fn(x.clone())
    eager_log = list(LOG)
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for _ in range(2):
        LOG.clear()
        assert_same(compiled(x.clone()), expected)
        assert LOG == eager_log
    assert counter.frame_count >= 1  # the part before the break is a graph (not an eager frame)


def test_exception_after_break_reaches_the_generator():
    def fn(x):
        with logged("e"):
            y = x + 1
            print("break")
            raise ValueError(y.shape)
    LOG.clear()
    with pytest.raises(ValueError):
        fn(torch.randn(2))
    eager_log = list(LOG)
    LOG.clear()
    with pytest.raises(ValueError):
        compile(fn, backend=CompileCounter())(torch.randn(2))
    assert LOG == eager_log


@pytest.mark.skipif(REFERENCE, reason="checks ember's graph-break count")
def test_contextmanager_break_keeps_the_graph_before_it():
    import ember
    report = ember.explain(_break_inside)(torch.randn(3))
    assert report.graph_count >= 2, report.break_reasons  # (before the break, and after it)
