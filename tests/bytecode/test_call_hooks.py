"""hook_calls: a copy of a function whose calls pass their callable through a hook first runs
exactly like the original, and the hook sees the callables of the calls it can place."""

from __future__ import annotations

import contextlib
import sys

import pytest

from _ember_import import import_bytecode_package

import_bytecode_package()
from ember.bytecode.call_hooks import hook_calls, hooked_function  # noqa: E402


class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, f):
        self.seen.append(getattr(f, "__name__", type(f).__name__))
        return f


def hooked(fn, hook):
    return hooked_function(fn, hook_calls(fn.__code__, hook))


class Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0]))
        return False

    def foo(self, x, k=0):
        return x + k


class Base:
    def bar(self, *a, **k):
        return ("Base", a, k)

    def baz(self):
        return 1


class Derived(Base):
    def bar(self, *a, **k):
        return super().bar(*a, **k), super().bar(1), super(Derived, self).baz(), self.baz()


def identity(f):
    return f


def helper(a, b=2):
    return a * b


def many_call_forms(x, log):
    @identity
    def decorated():
        return 5

    with Ctx(log) as c:
        y = c.foo(x, k=2)
    z = [helper(i) for i in range(3)]
    w = helper(x if x > 0 else -x, b=3)
    try:
        assert x > 100, "big"
    except AssertionError:
        w += 1
    t = (lambda q: q + 1)(x)
    s = sum(helper(i) for i in range(2))
    for i in range(2):
        w += helper(i)
    args, kwargs = (1,), {"k": 2}
    return (y, z, w, decorated(), t, s, Derived().bar(*args, **kwargs), len(str(x)), f"{helper(1)}",
            helper(*args), dict(**kwargs))


def test_results_and_hooked_callables():
    rec = Recorder()
    fn = hooked(many_call_forms, rec)
    log_a, log_b = [], []
    assert fn(3, log_a) == many_call_forms(3, log_b)
    assert log_a == log_b
    for name in ("identity", "foo", "helper", "<lambda>", "sum", "bar", "len", "str", "dict", "AssertionError",
                 "<genexpr>", "decorated", "Derived"):
        assert name in rec.seen, (name, rec.seen)
    # a decorator gets the function it decorates, never the hooked value of it
    assert rec.seen.count("decorated") == 1
    if sys.version_info < (3, 12):
        assert "<listcomp>" in rec.seen  # (3.12 inlines comprehensions)


def test_hook_replaces_the_callee():
    def double(v):
        return 2 * v

    def triple(v):
        return 3 * v

    def caller(v):
        return double(v) + Ctx([]).foo(v)

    fn = hooked(caller, lambda f: triple if f is double else f)
    assert fn(2) == 6 + 2
    assert caller(2) == 4 + 2


def test_super_and_methods():
    rec = Recorder()
    bar = hooked(Derived.bar, rec)
    assert bar(Derived(), 2, k=3) == Derived().bar(2, k=3)
    assert rec.seen.count("bar") == 2 and rec.seen.count("baz") == 2


def test_exceptions_propagate_with_the_same_handlers():
    def raising(v):
        if v > 1:
            raise ValueError(v)
        return v

    def caller(v):
        out = []
        for i in range(v):
            try:
                out.append(raising(i))
            except ValueError as e:
                out.append(("caught", e.args))
            finally:
                out.append("finally")
        with contextlib.suppress(KeyError):
            {}["missing"]
        raising(v - 1)
        return out

    fn = hooked(caller, Recorder())
    assert fn(2) == caller(2)
    with pytest.raises(ValueError) as got:
        fn(3)
    with pytest.raises(ValueError) as want:
        caller(3)
    assert got.value.args == want.value.args


def test_generator_and_closure():
    def gen(n):
        total = 0

        def add(v):
            nonlocal total
            total += v
            return total

        for i in range(n):
            yield add(len([i, i]))
        return total

    rec = Recorder()
    g = hooked(gen, rec)
    assert list(g(3)) == list(gen(3))
    assert "add" in rec.seen and "len" in rec.seen
    it = g(1)
    next(it)
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == 2
