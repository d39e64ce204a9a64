"""A ``nonlocal`` write into a closure cell of a function the frame did not make goes to the cell
of the function the frame gets on *this* call.

Such a function is guarded by its code, so a later call may bring another function object with
other cells (a closure made anew per call, or the one a nested graph break's chain receives). The
write was replayed into the cell object of the call that was traced (bound as a constant): on
every later call the program's own cell kept its old value (fuzz seed 3100066 under --vary; the
chain case also with fixed shapes). Each test compares with eager over several calls.
"""
from __future__ import annotations

import pytest
import torch

import ember
from ember_test_helpers import assert_same


def make_counter():
    acc = 0

    def bump(v):
        nonlocal acc
        acc = acc + v
        return acc

    def get():
        return acc

    return bump, get


def calls_bump(x, bump):
    bump(x)
    bump(x * 2)
    return x + 1


def calls_bump_across_break(x, bump):
    bump(x)
    print("", end="")   # a graph break between the writes
    bump(x * 2)
    return x + 1


@pytest.mark.parametrize("fn", [calls_bump, calls_bump_across_break])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_closure_argument_made_per_call(fn, backend):
    compiled = ember.compile(fn, backend=backend)
    for k in range(3):
        x = torch.arange(6.0).reshape(3, 2) + k
        bump_e, get_e = make_counter()
        bump_c, get_c = make_counter()
        assert_same(compiled(x, bump_c), fn(x, bump_e))
        assert_same(get_c(), get_e())


def closure_written_in_nested_break(x):
    acc = x * 0

    def bump(v):
        nonlocal acc
        acc = acc + v
        float(x.sum())          # a graph break inside the closure: the rest is a nested chain
        return acc

    bump(x)
    bump(x)
    return acc + 0


def closure_written_three_times(x):
    acc = x * 0

    def bump(v):
        nonlocal acc
        acc = acc + v
        if acc.sum() > 1000:    # a data-dependent branch: a break inside the closure
            acc = acc * 0
        return acc

    bump(x)
    print("", end="")
    bump(torch.relu(x))
    acc = acc * 2
    bump(1)
    return acc + x


@pytest.mark.parametrize("fn", [closure_written_in_nested_break, closure_written_three_times])
@pytest.mark.parametrize("rows", [(3, 3, 3), (3, 5, 6)], ids=["static", "dynamic"])
def test_nested_break_chain_writes_the_callers_cell(fn, rows):
    compiled = ember.compile(fn, backend="eager")
    for k, r in enumerate(rows):
        x = torch.arange(r * 2.0).reshape(r, 2) + k
        assert_same(compiled(x), fn(x))
