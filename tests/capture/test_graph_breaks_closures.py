"""Closures and graph breaks: functions made in the frame, cells shared across a break, breaks in
closures, ``except`` blocks. Each compiles (or breaks at the instruction) instead of running the
whole frame eagerly, and matches eager — including writes to cells seen from both sides.
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile, stats


def run_same(fn, *args, fallbacks=0):
    log_e, log_c = [], []
    expected = fn(log_e, *args)
    actual = compile(fn)(log_c, *args)
    assert_same(actual, expected)
    assert repr(log_c) == repr(log_e), (log_c, log_e)
    if not REFERENCE and fallbacks is not None:
        assert stats()["fallbacks"] == fallbacks, stats()
    return actual


def test_closure_over_frame_cell_live_across_break():
    def fn(log, x):
        scale = 2.0

        def mul(v):
            return v * scale
        y = mul(x)
        print("break")
        scale = 3.0                  # the closure must see this write (one shared cell)
        log.append(scale)
        return mul(y)
    run_same(fn, torch.ones(2))


def test_closure_writes_nonlocal_after_break():
    def fn(log, x):
        count = 0

        def bump(v):
            nonlocal count
            count += 1
            return v + count
        y = bump(x)
        print("break")
        y = bump(y)
        log.append(count)
        return y * count
    run_same(fn, torch.ones(2))


def test_cell_unbound_at_break_assigned_later():
    def fn(log, x):
        def get():
            return late
        print("break")
        late = x * 5
        return get() + 1
    run_same(fn, torch.ones(2))


def test_recursive_closure_across_break():
    def fn(log, x):
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)
        print("break")
        return x * fact(4)
    run_same(fn, torch.ones(2))


def test_returning_a_closure():
    def fn(log, x):
        k = x.sum()

        def add(v):
            return v + k
        return add
    add_c = compile(fn)([], torch.ones(3))
    add_e = fn([], torch.ones(3))
    assert_same(add_c(torch.ones(2)), add_e(torch.ones(2)))
    if not REFERENCE:
        assert stats()["fallbacks"] == 0, stats()


def test_returning_a_closure_after_a_break():
    def fn(log, x):
        k = x.sum()
        print("break")

        def add(v):
            return v + k
        k = k * 2
        return add
    add_c = compile(fn)([], torch.ones(3))
    add_e = fn([], torch.ones(3))
    assert_same(add_c(torch.ones(2)), add_e(torch.ones(2)))
    if not REFERENCE:
        assert stats()["fallbacks"] == 0, stats()


def test_break_in_closure_called_by_closure():
    def fn(log, x):
        def inner(v):
            print("break inside inner")
            log.append("inner")
            return v * 2

        def outer(v):
            return inner(v) + 1
        return outer(x) - 1
    run_same(fn, torch.ones(2))


def test_nested_def_with_defaults():
    def fn(log, x):
        def scaled(v, k=3, *, bias=1.0):
            return v * k + bias
        y = scaled(x) + scaled(x, 2, bias=0.5)
        print("break")
        return scaled(y, k=4)
    run_same(fn, torch.ones(2))


def test_nested_def_with_defaults_closing_over_cell():
    def fn(log, x):
        base = x + 1

        def shift(v, by=2):
            return v + base * by
        print("break")
        base = base * 10
        return shift(x), shift(x, by=1)
    run_same(fn, torch.ones(2))


def test_print_in_except_block():
    def fn(log, x):
        try:
            raise ValueError("no")
        except ValueError as e:
            print("caught", e)
            log.append(str(e))
            x = x + 1
        return x * 2
    run_same(fn, torch.ones(2))
    if not REFERENCE:
        assert stats()["graphs"] >= 1 and stats()["graph_breaks"] >= 1, stats()


def test_closures_in_loop_with_breaks():
    def fn(log, x):
        fns = []
        for i in range(3):
            def f(v, i=i):
                return v + i
            fns.append(f)
            print("made", i)
        total = x
        for f in fns:
            total = f(total)
        log.append(len(fns))
        return total
    run_same(fn, torch.ones(2), fallbacks=1)  # (a break inside a loop skips the frame)


def test_closure_in_try_finally_across_break():
    def fn(log, x):
        acc = []

        def push(v):
            acc.append(v)
            return v
        try:
            push(x + 1)
            print("break")
            push(x + 2)
        finally:
            log.append(len(acc))
        return acc
    run_same(fn, torch.ones(2))


def test_break_inside_resume_of_resume_with_cells():
    def fn(log, x):
        n = 0

        def step(v):
            nonlocal n
            n += 1
            return v * 2
        x = step(x)
        print("one")
        x = step(x)
        print("two")
        x = step(x)
        log.append(n)
        return x + n
    run_same(fn, torch.ones(2))


def test_method_with_self_cell_and_super():
    class Base(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Child(Base):
        def forward(self, x):
            get = lambda: self.k  # noqa: E731
            self.k = 2.0
            print("break")
            return super().forward(x) * get()
    m1, m2 = Child(), Child()
    assert_same(compile(m1)(torch.ones(2)), m2(torch.ones(2)))
    if not REFERENCE:
        assert stats()["fallbacks"] == 0, stats()
