"""Findings of the round-5 probe (functions, unspecialized scalars, guards, autograd.Function).

Each test runs a small program eagerly and compiled and compares the answers (outputs and the
caller's containers afterwards); where torch defines it, the number of graphs is checked too.
"""
import copy
import operator

import numpy as np
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile, run_compared


_run = run_compared  # (tests/helpers.py)


# --- operator.is_ on a constant list was folded on copies of it (False for `l is l`) ----------

def test_operator_is_on_the_same_constant_list():
    def f(x, l):
        return x + 1, operator.is_(l, l), operator.is_not(l, l), operator.is_(l, [1, 3])
    _run(f, lambda i: (torch.ones(1), [1, 3]))


def test_operator_is_on_lists_made_in_the_frame():
    def f(x):
        a = [1, 2]
        b = a
        return x * 2, operator.is_(a, b), operator.is_(a, [1, 2]), operator.is_not(a, list(a))
    _run(f, lambda i: (torch.ones(1),))


# --- reversed(lst) read the list when made, CPython reads it while iterating ------------------

def test_reversed_list_sees_a_later_write():
    def f(x, l):
        r = reversed(l)
        l[0] = 99
        return x + 1, list(r)
    _run(f, lambda i: (torch.ones(1), [1, 2]))


def test_reversed_list_of_tensors_sees_a_later_write_and_a_pop():
    def f(x, l):
        r = reversed(l)
        l[-1] = x * 10
        first = next(r)
        l.pop(0)  # the index now points past the end: exhausted
        return first, list(r), len(l)
    _run(f, lambda i: (torch.ones(1), [torch.ones(1), torch.zeros(1), torch.full((1,), 3.0)]))


def test_reversed_list_iterated_in_a_loop_and_mutated():
    def f(x, l):
        out = []
        for v in reversed(l):
            out.append(x * v)
            if v == 2:
                l[0] = 7  # not yet produced: seen
        return out
    _run(f, lambda i: (torch.ones(1), [1, 2, 3]))


def test_reversed_iterator_across_a_graph_break():
    def f(x, l):
        r = reversed(l)
        a = next(r)
        torch._dynamo.graph_break()
        l[0] = 50
        return x + a, list(r)
    _run(f, lambda i: (torch.ones(1), [1, 2, 3]))


def test_reversed_iterator_returned():
    def f(x, l):
        r = reversed(l)
        next(r)
        return x + 1, r
    cnt = CompileCounter()
    l1, l2 = [1, 2, 3], [1, 2, 3]
    out_c = compile(f, backend=cnt)(torch.ones(1), l1)
    out_e = f(torch.ones(1), l2)
    l1.append(4), l2.append(4)  # past the end of the list as it was: still its old index
    assert list(out_c[1]) == list(out_e[1])


# --- sum() of constants that Python cannot add: the TypeError of eager, not an internal error -

def test_sum_of_a_list_of_lists_raises_as_eager():
    def f(x):
        return sum(x.tolist())
    compiled = compile(f, backend=CompileCounter())
    with pytest.raises(TypeError, match="unsupported operand"):
        f(torch.ones(2, 2))
    with pytest.raises(TypeError, match="unsupported operand"):
        compiled(torch.ones(2, 2))


# --- a NumPy scalar argument is a graph input from the first compile (torch.compile: 1 graph) --

def test_numpy_scalar_scale_compiles_once():
    def f(x, s):
        return x * s, type(s * 2).__name__, float(s * 2)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for i in range(4):
        s = np.float64(1.5 + i)
        assert_same(compiled(torch.ones(2), s), f(torch.ones(2), s))
    assert cnt.frame_count == 1


def test_numpy_scalar_type_change_recompiles():
    def f(x, s):
        return x * s, type(s * 2).__name__
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for s in (np.float64(1.5), np.float64(2.5), np.float32(0.5), np.float32(0.25)):
        assert_same(compiled(torch.ones(2), s), f(torch.ones(2), s))
    assert cnt.frame_count == 2


# --- inference tensors have no version counter: reading it raised inside ember (whole frame ---
# --- eager from then on); a traced region over one is a graph break, not an internal error ---

def test_inference_tensor_input_after_a_normal_call():
    def f(x):
        return x.relu() + 1
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    assert_same(compiled(torch.tensor([-1.0, 2.0])), f(torch.tensor([-1.0, 2.0])))
    with torch.inference_mode():
        x = torch.tensor([-1.0, 2.0])
        out = compiled(x)
        assert out.is_inference()
        assert_same(out, f(x))
    assert cnt.frame_count == 2  # (torch.compile: 2)


def test_inference_tensor_written_in_place_under_inference_mode():
    def f(x):
        x.add_(1)
        return x * 2
    compiled = compile(f, backend="aot_eager")
    with torch.inference_mode():
        a, b = torch.ones(2), torch.ones(2)
        assert_same(compiled(a), f(b))
        assert_same(a, b)


def _square_function():
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g
    return Sq


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_and_cond_on_inference_tensors(backend):
    sq = _square_function()

    def f(x):
        y = sq.apply(x) + 1
        return torch.cond(y.sum() > 0, lambda t: t + 1, lambda t: t - 1, (y,))
    compiled = compile(f, backend=backend)
    with torch.inference_mode():
        for v in (3.0, -3.0):
            assert_same(compiled(torch.full((2,), v)), f(torch.full((2,), v)))
    x1 = torch.ones(2, requires_grad=True)
    x2 = torch.ones(2, requires_grad=True)
    compiled(x1).sum().backward()
    f(x2).sum().backward()
    assert_same(x1.grad, x2.grad)


def test_module_with_buffer_update_under_inference_mode():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.n += 1
            return x * self.n
    with torch.inference_mode():
        m1, m2 = M(), M()
        compiled = compile(m1, backend="aot_eager")
        for _ in range(2):
            assert_same(compiled(torch.ones(1)), m2(torch.ones(1)))
        assert_same(m1.n, m2.n)


# --- min/max/sorted of constant lists were folded on copies: the picked list was not the ------
# --- caller's (an append to max(a, b) was lost; `max(a, b) is b` was False) --------------------

@pytest.mark.parametrize("pick", [
    lambda a, b: max(a, b),
    lambda a, b: min([a, b]),
    lambda a, b: sorted([a, b])[0],
    lambda a, b: sorted([b, a], reverse=True)[1],
    lambda a, b: max([a, b], default=None),
])
def test_picked_list_is_the_callers_list(pick):
    def f(x, a, b):
        m = pick(a, b)
        m.append(9)
        return x + 1, m is a, m is b
    _run(f, lambda i: (torch.ones(1), [1, 2], [3]))


def test_min_max_sorted_of_constants_keep_eager_results_and_errors():
    def f(x, l, e):
        r = [max(l), min(l), max(3, 1, 2), min("bca"), max(e, default=-1), sorted(l, reverse=True),
             max([[1], [1]]), sorted([[2], [1], [2]], reverse=True), max(1, 2.0), max(True, 1),
             min(1, True), sorted([1, True, 1.0])]
        for bad in (lambda: max(e), lambda: max([1, "a"])):
            try:
                bad()
            except (ValueError, TypeError) as ex:
                r.append(str(ex))
        return x + 1, r, [type(v).__name__ for v in r]
    _run(f, lambda i: (torch.ones(1), [3, 1, 2], []))


def test_folded_builtin_returning_an_argument_list_is_not_a_copy():
    # dict.fromkeys shares its value; operator.concat's items are the caller's lists
    def f(x, a, b):
        e = dict.fromkeys(["p", "q"], a)
        e["p"].append(5)
        c = operator.concat([a], [b])
        c[1].append(6)
        return x + 1, e, c
    _run(f, lambda i: (torch.ones(1), [1, 2], [3]))


def test_sum_of_lists_keeps_the_callers_objects():
    def f(x, ls, start):
        empty = sum([], start)  # the start object itself
        empty.append(1)
        flat = sum(ls, [])
        flat[0].append(2)  # flat's items are ls's items
        return x + 1, empty is start, flat, sum([1, 2], 3), sum([(1,), (2,)], ())
    _run(f, lambda i: (torch.ones(1), [[[0]], [[5]]], [0]))


# --- a math/operator/functools function read through its module is guarded by identity -------
# --- (rebinding `math.floor` recompiles, as torch.compile's guard does) ------------------------

def test_rebinding_a_math_or_operator_function_recompiles():
    import math

    def f(x):
        return x * math.floor(2.7) + operator.add(1, 2)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    assert_same(compiled(torch.ones(1)), f(torch.ones(1)))
    old_floor, old_add = math.floor, operator.add
    math.floor, operator.add = (lambda v: 100), (lambda a, b: 50)
    try:
        assert_same(compiled(torch.ones(1)), f(torch.ones(1)))
    finally:
        math.floor, operator.add = old_floor, old_add
    assert_same(compiled(torch.ones(1)), f(torch.ones(1)))
    assert cnt.frame_count == 2
