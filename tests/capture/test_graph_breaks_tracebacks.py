"""Exceptions raised through code ember generated at graph breaks (entries, residuals, resume
functions): same exception as eager, and every frame of the traceback can be inspected and
formatted — ``frame.f_locals`` (pytest and debuggers read it), ``traceback.format_exception``,
and positions with columns — without crashing the interpreter.

Every generated code object is also checked by ember.bytecode.validate (tests/conftest.py turns
it on for the whole suite).
"""
import sys
import traceback

import pytest
import torch

from ember_test_helpers import REFERENCE, compile, stats


def _walk(exc: BaseException) -> list[str]:
    """Inspect every frame of ``exc``'s traceback like pytest's failure report does; returns the
    names of the functions in the traceback."""
    names = []
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        names.append(frame.f_code.co_name)
        dict(frame.f_locals)                     # crashed on a residual without COPY_FREE_VARS
        list(frame.f_code.co_positions())
        tb = tb.tb_next
    "".join(traceback.format_exception(exc))
    for fs in traceback.extract_tb(exc.__traceback__):
        assert fs.lineno is not None
        if fs.colno is not None:
            assert fs.end_colno is not None and (fs.end_lineno != fs.lineno or fs.end_colno >= fs.colno)
    traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), capture_locals=True).format()
    return names


def _raises_same(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        expected = e
    else:
        raise AssertionError("eager did not raise")
    compiled = compile(fn)
    with pytest.raises(type(expected)) as info:
        compiled(*args)
    assert str(info.value) == str(expected)
    return _walk(info.value)


def _closure_with_break():
    @torch.compiler.disable
    def g(y):
        return y + 1

    def fn(x):
        y = x * 2
        # graph break; the residual lives in a function with free variables; raises after it
        z = g(y)
        k = int(z.sum())
        assert k == 100, k
        return z
    return fn


def test_raise_after_break_in_closure_walks_traceback():
    names = _raises_same(_closure_with_break(), torch.ones(2))
    if not REFERENCE:
        assert any(n.startswith("resume_at_") for n in names), names


def test_raise_inside_breaking_call_walks_traceback():
    scale = torch.tensor(3.0)

    @torch.compiler.disable
    def boom(y):
        raise ValueError(f"bad {y.shape}")

    def fn(x):
        y = x * scale
        return boom(y) + 1
    names = _raises_same(fn, torch.ones(2))
    assert "boom" in names


def test_raise_in_resume_of_resume_walks_traceback():
    cells = [torch.tensor(1.0)]

    def fn(x):
        y = x + cells[0]
        print("one")
        y = y * 2
        print("two")
        y = y - 1
        if y.sum() > 0:       # data-dependent branch: a third break
            raise KeyError("positive")
        return y
    names = _raises_same(fn, torch.ones(3))
    if not REFERENCE:
        assert sum(n.startswith("resume_at_") for n in names) >= 1, names


def test_raise_in_try_finally_after_break():
    log = []

    def fn(x):
        try:
            y = x + 1
            print("in try")
            return y, 1 // (int(x.sum()) - 2)
        finally:
            log.append("finally")
    _raises_same(fn, torch.ones(2))
    assert log == ["finally", "finally"]


def test_raise_in_method_with_cells_after_break():
    class M(torch.nn.Module):
        def forward(self, x):
            scale = 2.0

            def inner(v):
                return v * scale
            y = inner(x)
            print("break")
            if y.sum() > 0:
                raise RuntimeError("raised after a break in " + type(self).__name__)
            return y
    _raises_same(M(), torch.ones(2))


def test_traceback_names_user_lines():
    fn = _closure_with_break()
    with pytest.raises(AssertionError) as info:
        compile(fn)(torch.ones(2))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].line.strip() == "assert k == 100, k"
    assert frames[-1].filename == __file__


def test_exception_in_flight_keeps_eager_traceback_through_a_resume_in_a_with_cleanup():
    # clip_grad_norm_(error_if_nonfinite=True): the check raises inside `with torch.no_grad()`
    # of clip_grad_norm_'s wrapper on a later call, and the cleanup's resume function is compiled
    # with the exception in flight as an argument. The compiler dropped that exception's
    # traceback (as it does for the ones the trace raises), so it reached the caller with none of
    # the frames that raised it: the innermost frame was ember's cache.
    def step(params):
        return torch.nn.utils.clip_grad_norm_(params, 0.5, error_if_nonfinite=True, foreach=True)

    def params(value):
        p = torch.zeros(3, requires_grad=True)
        p.grad = torch.full((3,), value)
        return [p]

    with pytest.raises(RuntimeError, match="non-finite") as eager:
        step(params(float("inf")))
    compiled = compile(step)
    torch.testing.assert_close(compiled(params(1.0)), step(params(1.0)))
    with pytest.raises(RuntimeError, match="non-finite") as info:
        compiled(params(float("inf")))
    assert str(info.value) == str(eager.value)
    names = _walk(info.value)
    assert names[-1] == _walk(eager.value)[-1] == "_get_total_norm"
