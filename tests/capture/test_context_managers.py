"""``with`` blocks beyond grad mode: user context managers (``__enter__``/``__exit__``
inlined), ``contextlib.contextmanager``, ``nullcontext``, ``warnings.catch_warnings``,
``torch.inference_mode``, ``record_function``. Each compiles into one graph (as under
torch.compile) with the same outputs and side effects, in the same order, as eager.
"""
import contextlib
import warnings

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_same, compile

LOG = []


class Recorder:
    def __init__(self, tag="r"):
        self.tag = tag

    def __enter__(self):
        LOG.append(("enter", self.tag))
        return self

    def __exit__(self, typ, value, tb):
        LOG.append(("exit", self.tag, typ.__name__ if typ else None))
        return False


class Suppressor(Recorder):
    def __exit__(self, typ, value, tb):
        super().__exit__(typ, value, tb)
        return True


GLOBAL_RECORDER = Recorder("global")


@contextlib.contextmanager
def tagged(tag):
    LOG.append(("gen enter", tag))
    try:
        yield tag * 2
    finally:
        LOG.append(("gen exit", tag))


@contextlib.contextmanager
def swallow():
    try:
        yield
    except ValueError:
        LOG.append("swallowed")


def _user_class(x):
    with Recorder("a") as r:
        LOG.append(("body", r.tag))
        y = x + 1
    return y * 2


def _outside_object(x):
    with GLOBAL_RECORDER:
        y = x.sin()
    return y


def _suppress(x):
    y = x + 1
    with Suppressor():
        y = y * 2
        raise ValueError("dropped")
    return y


def _contextmanager(x):
    with tagged(1) as a, tagged(2) as b:
        LOG.append("body")
        y = x * a + b
    return y


def _contextmanager_swallows(x):
    y = x + 1
    with swallow():
        y = y * 3
        raise ValueError("x")
    return y


def _nullcontext(x):
    with contextlib.nullcontext(2.0) as v:
        y = x * v
    return y


def _catch_warnings(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = x.cos()
    return y + 1


def _inference_mode(x):
    with torch.inference_mode():
        y = x * 2
        flag = y.is_inference()
    return y + 1, flag


def _record_function(x):
    with torch.autograd.profiler.record_function("region"):
        y = x.relu()
    return y * 2


def _profilers(x):
    with torch.profiler.profile():
        y = x.relu()
        with torch.autograd.profiler.profile(record_shapes=True):
            y = y * 3
    return y * 2


PROGRAMS = [_user_class, _outside_object, _suppress, _contextmanager, _contextmanager_swallows, _nullcontext,
            _catch_warnings, _inference_mode, _record_function, _profilers]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[p.__name__.strip("_") for p in PROGRAMS])
def test_with_block_compiles(fn):
    x = torch.randn(4)
    LOG.clear()
    expected = fn(x.clone())
    eager_log = list(LOG)
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    for _ in range(2):  # the first call traces; the second runs the cached entry
        LOG.clear()
        assert_same(compiled(x.clone()), expected)
        assert LOG == eager_log
    assert counter.frame_count == 1


def test_catch_warnings_leaves_filters_unchanged():
    before = list(warnings.filters)
    compiled = compile(_catch_warnings, backend=CompileCounter(), fullgraph=True)
    compiled(torch.randn(3))
    assert warnings.filters == before


def test_simplefilter_outside_catch_warnings_breaks_and_runs():
    def fn(x):
        y = x + 1
        warnings.simplefilter("ignore", category=FutureWarning)
        return y * 2
    before = list(warnings.filters)
    try:
        check_same(fn, torch.randn(3), graphs=2, fullgraph=False)
        expected_filters = list(warnings.filters)
    finally:
        warnings.filters[:] = before
    warnings.simplefilter("ignore", category=FutureWarning)
    try:
        assert expected_filters == list(warnings.filters)
    finally:
        warnings.filters[:] = before


def test_inference_mode_output_is_inference_tensor():
    compiled = compile(_inference_mode, backend="eager", fullgraph=True)
    y, flag = compiled(torch.randn(3, requires_grad=True))
    assert flag is True and not y.requires_grad


def test_inference_mode_decorator():
    @torch.inference_mode()
    def helper(x):
        return x * 2

    def fn(x):
        return helper(x) + 1
    check_same(fn, torch.randn(3, requires_grad=True))


def test_graph_break_inside_record_function():
    """record_function is only a profiler label: a break inside it is allowed."""
    def fn(x):
        y = x + 1
        with torch.autograd.profiler.record_function("region"):
            y = y * 2
            print("break")
            y = y - 1
        return y.sin()
    check_same(fn, torch.randn(3), graphs=2, fullgraph=False)


def test_graph_break_inside_user_context_manager_is_correct():
    def fn(x):
        with Recorder("b"):
            y = x + 1
            print("break")
        return y * 2
    x = torch.randn(3)
    LOG.clear()
    expected = fn(x.clone())
    eager_log = list(LOG)
    LOG.clear()
    assert_same(compile(fn, backend=CompileCounter())(x.clone()), expected)
    assert LOG == eager_log


def test_exception_through_user_context_manager():
    def fn(x):
        with Recorder("c"):
            raise KeyError("k")
    LOG.clear()
    with pytest.raises(KeyError):
        fn(torch.randn(2))
    eager_log = list(LOG)
    LOG.clear()
    with pytest.raises(KeyError):
        compile(fn, backend=CompileCounter())(torch.randn(2))
    assert LOG == eager_log


def _profiled_with_break(x):
    y = x ** 2
    with torch.profiler.profile():
        y = y + 2
        with torch.profiler.record_function("my_function"):
            z = y ** 3
            z.tolist()  # graph break
            z = z + 1
    return z


def test_profiler_block_with_a_break_is_two_graphs():
    """As torch.compile: the profiler blocks are no-ops while traced; the break inside them splits
    the frame in two graphs (the rest of the block runs in the resume function)."""
    x = torch.randn(2, 2, requires_grad=True)
    counter = CompileCounter()
    assert_same(compile(_profiled_with_break, backend=counter)(x), _profiled_with_break(x))
    assert counter.frame_count == 2


def _profiler_used(x):
    with torch.autograd.profiler.profile() as prof:
        y = x + 1
    return y, len(prof.function_events) > 0


def _profiler_with_callback(x):
    calls = []
    with torch.profiler.profile(on_trace_ready=lambda p: calls.append(1)):
        y = x + 1
    return y, len(calls)


@pytest.mark.parametrize("fn", [_profiler_used, _profiler_with_callback])
def test_profiler_the_frame_uses_runs_eagerly(fn):
    """A profiler whose object the frame reads, or with a callback: it really profiles (eager)."""
    x = torch.randn(3)
    assert_same(compile(fn)(x), fn(x))


_OUTSIDE_RF = torch.autograd.profiler.record_function("outside")


@torch.autograd.profiler.record_function("decorated")
def _labelled(x):
    return x.sin() * 2


def _uses_outside_record_functions(x):
    y = _labelled(x)  # (the decorator's object, made outside, entered at every call)
    with _OUTSIDE_RF as rf:
        z = y + 1
    return z, rf is _OUTSIDE_RF


def test_record_function_made_outside_is_a_label_in_one_graph():
    """``@record_function("name")`` and ``with rf:`` of an object made outside: no-op labels, one
    graph (was a break inside record_function.__enter__, an error under fullgraph)."""
    check_same(_uses_outside_record_functions, torch.randn(3))
    with torch.profiler.profile() as prof:
        _uses_outside_record_functions(torch.randn(3))  # (eager still records its labels)
    assert "decorated" in {e.name for e in prof.events()}


_OUTSIDE_IM = torch.inference_mode()


def _in_outside_inference_mode(x):
    with _OUTSIDE_IM:
        y = x * 2
        inside = (torch.is_inference_mode_enabled(), y.is_inference())
    return y, y.is_inference(), inside, torch.is_inference_mode_enabled()


def test_inference_mode_object_made_outside_is_one_graph():
    """``with im:`` of a ``torch.inference_mode()`` made outside the frame: the block, in one graph
    (was a break: constructing torch._C._InferenceMode in its __enter__)."""
    x = torch.randn(3, requires_grad=True)
    expected = _in_outside_inference_mode(x)
    cnt = CompileCounter()
    actual = compile(_in_outside_inference_mode, backend=cnt, fullgraph=True)(x)
    assert actual[1:] == expected[1:]
    assert actual[0].is_inference() and torch.equal(actual[0], expected[0])
    assert cnt.frame_count == 1
