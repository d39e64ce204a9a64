"""A traced ``raise`` of the program's own exception class: ember's description of it (a break
reason, a caught exception's record) must not run the class's ``__str__`` — at trace time that
read an attribute the traced ``__init__`` had set only on the trace's copy (an internal error,
the frame eager with a warning) and would repeat a ``__str__``'s side effects."""
import warnings

import torch

import ember

CALLS = []


class Base(Exception):
    pass


class Child(Base):
    def __init__(self, t):
        super().__init__("child")
        self.t = t

    def __str__(self):
        CALLS.append(1)
        return f"Child({self.t.shape[0]})"


def caught(x):
    try:
        raise Child(x * 2)
    except Base as e:
        return e.t + 1, str(e), isinstance(e, Child)


def uncaught(x):
    raise Child(x + 1)


def test_caught_exception_with_attributes_set_in_init():
    ember.reset()
    compiled = ember.compile(caught, backend="eager")
    for n in (2, 3):
        x = torch.randn(n)
        CALLS.clear()
        want = caught(x)
        eager_calls = len(CALLS)
        CALLS.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (no internal error, no eager fallback)
            got = compiled(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
        assert len(CALLS) == eager_calls


def test_uncaught_exception_propagates_with_its_message():
    ember.reset()
    compiled = ember.compile(uncaught, backend="eager")
    x = torch.randn(4)
    try:
        compiled(x)
    except Child as e:
        assert str(e) == "Child(4)"
        torch.testing.assert_close(e.t, x + 1)
    else:
        raise AssertionError("no exception")
