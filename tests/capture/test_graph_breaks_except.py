"""Graph breaks inside ``except`` handlers: the breaking call runs with the handled exception as
the thread's current exception (``sys.exc_info()``, bare ``raise``, implicit ``__context__``), and
the exception current before the handler is restored when it ends — also when the compiled
function is itself called from inside an ``except`` block.
"""
import sys

import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile, stats


@torch.compiler.disable
def current_exception():
    return repr(sys.exc_info()[1])


@torch.compiler.disable
def reraise():
    raise


@torch.compiler.disable
def fail(msg):
    raise RuntimeError(msg)


def _no_fallbacks():
    if not REFERENCE:
        assert stats()["fallbacks"] == 0, stats()
        assert stats()["graph_breaks"] >= 1, stats()


def test_exc_info_inside_handler_after_break():
    def fn(x):
        try:
            raise KeyError("k")
        except KeyError:
            seen = current_exception()
            y = x + 1
        return y, seen, current_exception()
    assert_same(compile(fn)(torch.ones(2)), fn(torch.ones(2)))
    _no_fallbacks()


def test_bare_raise_in_breaking_call_reraises_handled_exception():
    def fn(x):
        try:
            raise ValueError("original")
        except ValueError:
            x = x * 2
            reraise()
        return x
    with pytest.raises(ValueError, match="original"):
        fn(torch.ones(2))
    with pytest.raises(ValueError, match="original"):
        compile(fn)(torch.ones(2))


def test_exception_in_breaking_call_chains_handled_exception():
    def fn(x):
        try:
            raise ValueError("first")
        except ValueError:
            x = x + 1
            fail("second")
        return x
    with pytest.raises(RuntimeError, match="second") as info:
        compile(fn)(torch.ones(2))
    assert isinstance(info.value.__context__, ValueError)
    assert str(info.value.__context__) == "first"


def test_called_from_an_except_block_restores_the_callers_exception():
    def fn(x):
        try:
            raise KeyError("inner")
        except KeyError:
            print("break in the handler")
            x = x - 1
        return x, current_exception()

    def caller(f, x):
        try:
            raise IndexError("outer")
        except IndexError:
            out = f(x)
            after = current_exception()
            try:
                raise
            except IndexError as again:
                rer = str(again)
        return out, after, rer
    assert_same(caller(compile(fn), torch.ones(2)), caller(fn, torch.ones(2)))
    # Raising inside a caller's handler chains to the caller's exception: those calls run eagerly.


def test_break_in_handler_inside_loop_and_finally():
    log = []

    def fn(x):
        for i in range(3):
            try:
                if i == 1:
                    raise ValueError(i)
                x = x + i
            except ValueError as e:
                log.append(current_exception())
                x = x * 2
            finally:
                log.append(i)
        return x
    expected = fn(torch.ones(2))
    eager_log = list(log)
    log.clear()
    assert_same(compile(fn)(torch.ones(2)), expected)
    assert log == eager_log
    if not REFERENCE:
        assert stats()["fallbacks"] == 1  # a break inside the loop skips the frame


def test_nested_handlers_with_breaks():
    def fn(x):
        try:
            raise KeyError("a")
        except KeyError:
            first = current_exception()
            try:
                raise ValueError("b")
            except ValueError:
                second = current_exception()
                x = x + 1
            back = current_exception()
        return x, first, second, back, current_exception()
    assert_same(compile(fn)(torch.ones(2)), fn(torch.ones(2)))
    _no_fallbacks()


def test_return_from_handler_after_break():
    def fn(x):
        try:
            return 1 // int(x.sum() - x.sum())
        except ZeroDivisionError:
            print("division by zero")
            return x * 3
    assert_same(compile(fn)(torch.ones(2)), fn(torch.ones(2)))
    _no_fallbacks()
    assert sys.exc_info() == (None, None, None)


def test_exception_raised_after_break_in_handler_chains_like_eager():
    log = []

    def fn(x):
        try:
            try:
                raise KeyError(1)
            except KeyError:
                print("break in the handler")
                raise ValueError(2)
        except ValueError as e:
            log.append(repr(e.__context__))
        return x + 1
    expected = fn(torch.ones(2))
    assert_same(compile(fn)(torch.ones(2)), expected)
    assert log == ["KeyError(1)", "KeyError(1)"]


def test_raise_from_and_context_without_breaks():
    def fn(x):
        out = []
        try:
            try:
                raise KeyError("a")
            except KeyError as k:
                raise ValueError("b") from k
        except ValueError as e:
            out.append((repr(e.__cause__), e.__suppress_context__))
        try:
            try:
                raise KeyError("c")
            except KeyError:
                raise IndexError("d")
        except IndexError as e:
            out.append(repr(e.__context__))
        return x + len(out), out
    assert_same(compile(fn)(torch.ones(2)), fn(torch.ones(2)))


def test_compiled_function_raising_inside_callers_handler():
    def fn(x):
        try:
            raise KeyError("inner")
        except KeyError as e:
            return x + 1, repr(e.__context__)

    compiled = compile(fn)

    def caller(f):
        try:
            raise IndexError("outer")
        except IndexError:
            return f(torch.ones(2))
    # Inside a caller's handler the inner exception chains to the caller's; outside it does not:
    # the same compiled function must give both answers.
    assert_same(caller(compiled), caller(fn))
    assert_same(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert_same(caller(compiled), caller(fn))


@torch.compiler.disable
def check_positive(x):
    if x.sum() < 0:
        raise ValueError("negative")
    return x * 2


def test_breaking_call_raises_into_handler_that_compiles():
    # The breaking call raises at run time: the handler continues in a resume function that gets
    # the real exception; it is traced (matched by type), not run eagerly.
    def fn(x):
        try:
            y = check_positive(x)
        except ValueError:
            y = x.sin()
        return y + 1
    compiled = compile(fn)
    for x in (torch.ones(2), -torch.ones(2), -torch.ones(2), torch.ones(2)):
        assert_same(compiled(x), fn(x))
    _no_fallbacks()
