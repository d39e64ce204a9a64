"""A residual's own locals (the breaking instruction's operands, the results it hands on) never take
a name one of the frame's locals has. Frames ember generates have such locals (a nested break's
chain takes `___stack0`), and a live one was read from the residual's slot of the same name, which
the residual had deleted: on Python 3.13 a segmentation fault, on 3.11 a wrong value."""
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, compile


@torch.compiler.disable
def brk(*a):
    return a[0] if a else None


def test_user_locals_named_like_residual_slots():
    def f(x):
        ___stack0 = x + 1
        ___after0 = x + 2
        print("break")
        ___h0 = ___stack0 * 2
        return ___h0 + ___after0

    x = torch.ones(2)
    cnt = CompileCounter()
    assert_same(compile(f, backend=cnt)(x), f(x))
    assert cnt.frame_count == 2


def _nested_then_loop(log, x):
    n = 0

    def inner(v):
        brk()
        return v + n

    def outer(v):
        return inner(v) * 1

    x = outer(x)
    for i in range(3):
        log.append(i)
        brk()
    return x + n


def test_nested_break_then_breaks_in_a_loop():
    """The chain of a nested break resumes the caller, whose rest breaks again in a loop: a residual
    of the chain's own code, which has a live local named ``___stack0``."""
    x = torch.ones(2)
    log_e, log_c = [], []
    expected = _nested_then_loop(log_e, x)
    ember.reset()
    got = compile(_nested_then_loop)(log_c, x)
    assert_same(got, expected)
    assert log_c == log_e
    again = compile(_nested_then_loop)(log_c, x + 1)
    assert_same(again, _nested_then_loop(log_e, x + 1))
    assert log_c == log_e
