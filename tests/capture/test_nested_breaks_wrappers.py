"""Nested graph breaks through ``step_unsupported()`` and through ``@torch.no_grad()``-style
decorated functions, and decorated functions called from frames that run as they are.

Each case runs eagerly and compiled and compares results (values, ``requires_grad``), the grad
mode after the call and graph counts. The counts are what torch.compile 2.13 makes with
``nested_graph_breaks = True`` (torch's own test-suite setting)."""
import sys

import pytest
import torch

import ember
from tests.helpers import CompileCounter

gb = torch._dynamo.graph_break
step = torch._dynamo.step_unsupported
_X = torch.arange(3.0)

needs_nesting = pytest.mark.skipif(sys.version_info >= (3, 13), reason="nested graph breaks are off "
                                   "on Python 3.13 (a chain's residual crashed there): other counts")


def _steps_after_two_adds(x):
    x = x + 1
    x = x * 2
    step()
    return x - 3


def _caller_keeps_stack(x):
    x = x + 1
    pair = (x, _steps_after_two_adds(x))  # (x is on the caller's stack at the callee's break)
    return x, pair


def _plain(x):
    return x.sin()


def _steps_then_calls(x):
    x = x + 2
    step()
    return _plain(x) + 4


def _outer_of_step(x):
    x = x * 8
    return _steps_then_calls(x) + 16


def _breaks_under_no_grad(x):
    x = x * 2
    gb()
    assert not torch.is_grad_enabled()
    return x + 3, torch.compiler.is_compiling()


def _calls_doubly_decorated(x):
    wrapped = torch.no_grad()(torch.enable_grad()(torch.no_grad()(_breaks_under_no_grad)))
    y, compiled_rest = wrapped(x)
    return y * x, compiled_rest, torch.is_grad_enabled()


def _decorated_kept_across_a_break(x):
    w = torch.no_grad()(_plain)
    y = w(x)
    gb()
    return w(y) + x


@torch.no_grad()
def _decorated_helper(x):
    return x.cos() + 1


def _loop_calls_decorated(x):
    for _ in range(2):  # (a break inside a loop: the frame runs as it is, its callees compiled)
        x = _decorated_helper(x)
        gb()
    return x


def _flatten(v):
    if isinstance(v, (tuple, list)):
        return [f for e in v for f in _flatten(e)]
    return [v]


def _same(expected, got):
    expected, got = _flatten(expected), _flatten(got)
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        if isinstance(e, torch.Tensor):
            assert torch.allclose(e, g) and e.requires_grad == g.requires_grad
        else:
            assert e == g


CASES = {
    # the callee's rest runs as it is; the caller's rest (no ops) needs no graph
    "step_in_callee_with_caller_stack": (_caller_keeps_stack, 1),
    # graph 1: x*8, x+2; the callee's rest runs as it is, compiling _plain (graph 2); graph 3: +16
    "step_in_callee_then_callee_call": (_outer_of_step, 3),
}


@needs_nesting
@pytest.mark.parametrize("case", list(CASES))
def test_step_unsupported_in_an_inlined_callee(case):
    fn, torch_graphs = CASES[case]
    ember.reset()
    cnt = CompileCounter()
    for x in (_X, _X + 1):
        _same(fn(x), ember.compile(fn, backend=cnt)(x))
    assert cnt.frame_count == torch_graphs


@needs_nesting
def test_break_inside_nested_grad_mode_decorators_resumes_compiled():
    ember.reset()
    cnt = CompileCounter()
    x = _X.clone().requires_grad_()
    expected = _calls_doubly_decorated(x)
    got = ember.compile(_calls_doubly_decorated, backend=cnt)(x)
    assert expected[1] is False and got[1] is True  # (the rest after the break is compiled)
    _same(expected[0::2], got[0::2])
    assert torch.is_grad_enabled()
    # torch.compile makes 2 graphs (both rests in one); ember 3 (the callee's rest on its own), never
    # the whole frame as it is
    assert cnt.frame_count >= 2


def test_decorated_function_kept_across_a_break():
    ember.reset()
    cnt = CompileCounter()
    x = _X.clone().requires_grad_()
    _same(_decorated_kept_across_a_break(x), ember.compile(_decorated_kept_across_a_break, backend=cnt)(x))
    assert cnt.frame_count >= 2  # (not the whole frame run as it is; torch.compile makes 3)


def test_decorated_function_called_from_a_frame_run_as_it_is_is_compiled():
    ember.reset()
    cnt = CompileCounter()
    x = _X.clone().requires_grad_()
    _same(_loop_calls_decorated(x), ember.compile(_loop_calls_decorated, backend=cnt)(x))
    assert cnt.frame_count == 2  # (_decorated_helper's body: once per grad mode of its input, as torch)


@torch._dynamo.disable_nested_graph_breaks
def _setting_decorated(x):
    return x.sin() * 2


@torch._dynamo.error_on_graph_break(False)
def _setting_decorated_breaks(x):
    x = x + 2
    gb()
    return x * 3


def _calls_setting_decorated(x):
    return _setting_decorated(x + 1) - 1


def _loop_calls_setting_decorated(x):
    for _ in range(2):
        x = _setting_decorated_breaks(x)
    return x


def test_tracing_setting_decorators_are_traced_through():
    # (torch.compile's tracing settings mean nothing at run time: the wrapped function is traced)
    ember.reset()
    cnt = CompileCounter()
    for x in (_X, _X + 1):
        _same(_calls_setting_decorated(x), ember.compile(_calls_setting_decorated, backend=cnt)(x))
    assert cnt.frame_count == 1  # (as torch.compile)


def test_tracing_setting_decorated_function_at_a_break_is_compiled():
    ember.reset()
    cnt = CompileCounter()
    _same(_loop_calls_setting_decorated(_X), ember.compile(_loop_calls_setting_decorated, backend=cnt)(_X))
    assert cnt.frame_count == 2  # (its code before and after its break, as torch.compile)


def _steps_first(x):
    step()
    assert not torch.is_grad_enabled()
    return x + 1


def _outer_with_no_grad(x):
    with torch.no_grad():
        return _steps_first(x + 8) + 16


@needs_nesting
def test_a_rest_run_as_it_is_is_called_not_traced(caplog):
    # (the chain after a nested step_unsupported() calls the callee's rest as a frame run as it is:
    # a break at that call, never a trace into ember's own code)
    import logging
    import os
    ember.reset()
    x = _X.clone().requires_grad_()
    with caplog.at_level(logging.DEBUG, logger="ember"):
        _same(_outer_with_no_grad(x), ember.compile(_outer_with_no_grad, backend="eager")(x))
    ember_dir = os.path.dirname(ember.__file__)
    assert not [r for r in caplog.records if ember_dir in r.getMessage()]
    assert torch.is_grad_enabled()


@torch.no_grad()
def _decorated_breaks(x):
    x = x + 1
    gb()
    return x * 2, torch.is_grad_enabled()


def _calls_decorated_that_breaks(x):
    y = x * 3
    r, inside = _decorated_breaks(y)
    return r - x, inside, torch.is_grad_enabled()


@torch.enable_grad()
def _decorated_raises_after_break(x):
    y = x * 2
    gb()
    if y.sum() > -1e9:
        raise ValueError(torch.is_grad_enabled())
    return y


def _catches_decorated(x):
    with torch.no_grad():
        try:
            return _decorated_raises_after_break(x + 1)
        except ValueError as e:
            return x - 1, e.args[0], torch.is_grad_enabled()


@needs_nesting
@pytest.mark.parametrize("grad", [True, False])
def test_break_inside_a_decorated_module_level_function_nests(grad):
    # (a `@torch.no_grad()` function defined outside the frame: the break nests through torch's
    # wrapper, whose rest is the no_grad block around the function's rest)
    ember.reset()
    cnt = CompileCounter()
    compiled = ember.compile(_calls_decorated_that_breaks, backend=cnt)
    with torch.set_grad_enabled(grad):
        for x in (_X.clone().requires_grad_(), _X + 1):
            _same(_calls_decorated_that_breaks(x), compiled(x))
            assert torch.is_grad_enabled() is grad
    assert cnt.frame_count == 4  # (as torch.compile: two graphs, again for an input without grad)


@needs_nesting
def test_exception_after_a_break_in_a_decorated_function_reaches_the_caller():
    ember.reset()
    x = _X.clone().requires_grad_()
    _same(_catches_decorated(x), ember.compile(_catches_decorated, backend="eager")(x))
    assert torch.is_grad_enabled()


def _adds_then_breaks(x):
    x = x + 1
    gb()
    return x * 2, torch.is_grad_enabled()


def _wraps_in_frame_twice(x):
    y, inside1 = torch.no_grad()(_adds_then_breaks)(x)
    z, inside2 = torch.enable_grad()(_adds_then_breaks)(y)
    return z + x, inside1, inside2, torch.is_grad_enabled()


def _raises_after_break_plain(x):
    y = x * 2
    gb()
    if y.sum() > -1e9:
        raise KeyError(torch.is_grad_enabled())
    return y


def _catches_in_frame_wrapped(x):
    try:
        return torch.no_grad()(_raises_after_break_plain)(x)
    except KeyError as e:
        return x + 1, e.args[0], torch.is_grad_enabled()


@needs_nesting
@pytest.mark.parametrize("grad", [True, False])
def test_break_inside_a_function_wrapped_in_the_frame_nests(grad):
    # (`torch.no_grad()(f)(x)` made in the frame, f a plain function: traced as torch's own wrapper,
    # so the break nests through it as through a decorated function)
    ember.reset()
    cnt = CompileCounter()
    compiled = ember.compile(_wraps_in_frame_twice, backend=cnt)
    with torch.set_grad_enabled(grad):
        x = _X.clone().requires_grad_()
        _same(_wraps_in_frame_twice(x), compiled(x))
        assert torch.is_grad_enabled() is grad
    assert cnt.frame_count == 3  # (as torch.compile with nested graph breaks)


@needs_nesting
def test_exception_after_a_break_in_a_function_wrapped_in_the_frame():
    ember.reset()
    x = _X.clone().requires_grad_()
    _same(_catches_in_frame_wrapped(x), ember.compile(_catches_in_frame_wrapped, backend="eager")(x))
    assert torch.is_grad_enabled()


def _breaks_twice(x):
    x = x + 1
    gb()
    first = torch.compiler.is_compiling()
    x = x * 2
    gb()
    return x + 3, first, torch.compiler.is_compiling(), torch.is_grad_enabled()


_DECORATED_TWICE = torch.no_grad()(_breaks_twice)


def _calls_decorated_twice(x):
    return _DECORATED_TWICE(x)


def _wraps_twice_in_frame(x):
    return torch.no_grad()(_breaks_twice)(x)


@needs_nesting
@pytest.mark.parametrize("fn", [_calls_decorated_twice, _wraps_twice_in_frame])
def test_second_break_inside_a_decorated_function_resumes_compiled(fn):
    # (the second break is inside the chain's rest of torch's wrapper: it nests through it again,
    # and the rests after both breaks are compiled, as torch.compile)
    ember.reset()
    cnt = CompileCounter()
    x = _X.clone().requires_grad_()
    expected, got = fn(x), ember.compile(fn, backend=cnt)(x)
    assert expected[1:3] == (False, False) and got[1:3] == (True, True)
    _same((expected[0], expected[3]), (got[0], got[3]))
    assert cnt.frame_count == 3  # (as torch.compile with nested graph breaks)


def _asserts_after_break(x):
    x = x + 1
    gb()
    assert x.dim() == 1  # (pytest rewrites these: its `@py_assert1` locals are no identifiers)
    x = x * 2
    gb()
    assert x.dim() == 1
    return x - 3


def _calls_asserting(x):
    return _asserts_after_break(x) + 1


@needs_nesting
def test_nested_break_in_a_function_with_rewritten_asserts():
    # (the chain's source names the callee's locals: a local that is no identifier is mangled)
    ember.reset()
    cnt = CompileCounter()
    for x in (_X, _X + 1):
        _same(_calls_asserting(x), ember.compile(_calls_asserting, backend=cnt)(x))
    assert cnt.frame_count == 3


def _steps_then_adds(x):
    step()
    assert not torch.is_grad_enabled()
    return x + 1, torch.is_grad_enabled()


def _middle(x):
    y, mode = _steps_then_adds(x + 2)
    return y + 4, mode


def _outer_no_grad_block(x):
    with torch.no_grad():
        y, mode = _middle(x * 8)
        return y + 16, mode, torch.is_grad_enabled()


def _steps_then_raises(x):
    step()
    raise ValueError(torch.is_grad_enabled())


def _catches_in_block(x):
    with torch.no_grad():
        try:
            return _steps_then_raises(x * 2)
        except ValueError as e:
            return x + 1, e.args[0], torch.is_grad_enabled()


@needs_nesting
def test_step_unsupported_inside_callers_with_block():
    # (the callee's rest runs as it is where the break left the process state, inside the callers'
    # blocks; the callers' rests are one compiled graph after it, as torch.compile)
    ember.reset()
    cnt = CompileCounter()
    compiled = ember.compile(_outer_no_grad_block, backend=cnt)
    for x in (_X.clone().requires_grad_(), _X + 1):
        _same(_outer_no_grad_block(x), compiled(x))
        assert torch.is_grad_enabled()
    assert cnt.frame_count == 3  # (as torch.compile: 2, and the first again for an input without grad)


@needs_nesting
def test_exception_in_a_rest_run_as_it_is_reaches_the_callers_handler():
    ember.reset()
    x = _X.clone().requires_grad_()
    _same(_catches_in_block(x), ember.compile(_catches_in_block, backend="eager")(x))
    assert torch.is_grad_enabled()
