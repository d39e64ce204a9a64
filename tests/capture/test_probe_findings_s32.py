"""Findings of the session-32 probe (autograd.Function, scalars, recompiles, stdlib in frames).

Each test runs a small program eagerly and compiled and compares the answers (outputs and the
caller's containers afterwards); where torch defines it, the number of graphs is checked too.
"""
import collections

import pytest

import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile, run_compared


_run = run_compared  # (tests/helpers.py)


# --- a guard on a defaultdict argument read `d[old_key]`: it inserted the key into the caller's dict

def test_defaultdict_argument_with_other_keys_is_not_written_by_guards():
    def f(x, d):
        return x * len(d), sorted(d)

    def args(i):
        return torch.ones(2), collections.defaultdict(int, {"a" if i == 0 else "b": 1})
    _run(f, args, n_calls=3)


def test_defaultdict_of_lists_argument_values_read():
    def f(x, d):
        return {k: x * sum(v) for k, v in d.items()}

    def args(i):
        return torch.ones(2), collections.defaultdict(list, {["a", "b", "c"][i]: [i, 1]})
    _run(f, args, n_calls=3)


def test_defaultdict_built_in_frame_across_a_graph_break():
    # the resume function receives the defaultdict; its guards ran on the next call's dict
    def f(x, words):
        dd = collections.defaultdict(list)
        for w in words:
            dd[w].append(x)
        torch._dynamo.graph_break()
        return {k: sum(v) for k, v in dd.items()}
    _run(f, lambda i: (torch.ones(2), [["a", "b"], ["c"], ["a"]][i]), n_calls=3)


def test_counter_argument_with_other_keys():
    def f(x, c):
        return x * c["a"], dict(c)
    _run(f, lambda i: (torch.ones(2), collections.Counter("ab" if i == 0 else "bb")), n_calls=2)


class _InsertingDict(dict):
    def __missing__(self, k):
        self[k] = len(self)
        return self[k]


def test_dict_subclass_missing_runs_on_the_real_dict_and_guards_do_not_call_it():
    # the trace called __missing__ on the caller's dict while compiling; the guard on the next
    # call read d['z'] through it, writing 'z' into a dict that did not have it
    def f(x, d):
        return x * d["z"], dict(d)
    _run(f, lambda i: (torch.ones(2), _InsertingDict([{"a": 1}, {"z": 5}, {"b": 1}][i])), n_calls=3)


def test_dict_subclass_present_key_read():
    def f(x, d):
        return x * d["a"], len(d)
    _run(f, lambda i: (torch.ones(2), _InsertingDict([{"a": 1}, {"a": 2, "b": 0}, {"a": 3}][i])), n_calls=3)


# --- an argument the function never reads is not guarded (torch.compile wraps arguments lazily)

def test_unread_tensor_argument_changes_shape_and_dtype_without_recompiling():
    def f(x, unused):
        return x * 2
    shapes = [(3,), (4,), (5, 6)]
    dtypes = [torch.float32, torch.float64, torch.int64]
    cnt = _run(f, lambda i: (torch.ones(2), torch.zeros(shapes[i], dtype=dtypes[i])), n_calls=3)
    assert cnt.frame_count == 1


def test_argument_overwritten_before_read_is_not_guarded():
    def f(x, n):
        n = 3
        return x * n
    cnt = _run(f, lambda i: (torch.ones(2), torch.zeros(i + 1)), n_calls=3)
    assert cnt.frame_count == 1


def test_argument_read_through_locals_is_still_guarded():
    def f(x, y):
        return x * 2 + locals()["y"]
    _run(f, lambda i: (torch.ones(2), torch.full((2,), float(i))), n_calls=3)


def test_argument_read_only_by_zero_argument_super():
    class Base(nn.Module):
        def forward(self, x):
            return x * self.k

    class Child(Base):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return super().forward(x) + 1

    m1, m2 = Child(2.0), Child(3.0)
    compiled = compile(m1.forward.__func__, backend=CompileCounter())
    for m in (m1, m2, m1):
        x = torch.ones(2)
        assert_same(compiled(m, x), m(x))


def test_argument_read_only_in_a_branch_after_a_graph_break():
    def f(x, y, flag):
        x = x * 2
        torch._dynamo.graph_break()
        if flag:
            return x + y
        return x
    _run(f, lambda i: (torch.ones(2), torch.full((2,), float(i)), i % 2 == 1), n_calls=4)


# --- the conjugate / negative / inference bits were guarded only when the first tensor had them

def test_plain_then_conjugated_view_recompiles():
    def f(x):
        return x * 2, x.is_conj(), x.is_neg()
    z = torch.randn(2, dtype=torch.complex64)
    views = [z, z.conj(), z, z.conj().imag, z.imag]
    cnt = _run(f, lambda i: (views[i],), n_calls=5)
    assert cnt.frame_count == 4  # complex: plain, conjugated; float (.imag): negated, plain


def test_plain_then_inference_tensor_recompiles():
    def f(x):
        return x + 1, x.is_inference()
    with torch.inference_mode():
        xi = torch.ones(2)
    xs = [torch.ones(2), xi, torch.ones(2)]
    _run(f, lambda i: (xs[i],), n_calls=3)


# --- queries an input's fake cannot answer (it is a fresh tensor): the real tensor's, guarded

def test_is_view_of_a_plain_then_a_view_input():
    base = torch.randn(4, 4)

    def f(x):
        return x + 1, x._is_view()
    xs = [torch.randn(4), base[0], torch.randn(4)]
    _run(f, lambda i: (xs[i],), n_calls=3)


def test_detach_inplace_of_a_view_input_raises_as_eager():
    def f(x):
        x.detach_()
        return x + 1
    compiled = compile(f, backend=CompileCounter())
    assert_same(compiled(torch.ones(4)), f(torch.ones(4)))
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        f(torch.ones(4, 4)[0])
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        compiled(torch.ones(4, 4)[0])


def test_retains_grad_and_is_shared_of_inputs():
    def f(x):
        return x * 2, x.retains_grad, x.is_shared()

    def make(i):
        x = torch.ones(2, requires_grad=True) * 1
        if i == 1:
            x.retain_grad()
        return x
    shared = torch.ones(2).share_memory_()
    _run(f, lambda i: (make(i),), n_calls=3)
    _run(f, lambda i: ([torch.ones(2), shared, torch.ones(2)][i],), n_calls=3)


# --- a float argument made symbolic (automatic dynamic) took a later inf: `v == inf` was False

def test_symbolic_float_argument_then_inf():
    def f(x, v):
        return x.clamp(max=v), v == float("inf"), v == -float("inf")
    vals = [1.0, 2.0, float("inf"), 3.0, -float("inf"), 4.0]
    _run(f, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))


# --- Tensor.is_set_to answered by fake tensors (always False), and unguarded across calls

def test_is_set_to_of_the_same_tensor_and_of_two_inputs():
    t = torch.randn(4)
    base = torch.randn(8)

    def f(x, y):
        return x + y, x.is_set_to(y), x.is_set_to(x)
    pairs = [(base[:4], base[:4]), (torch.randn(4), torch.randn(4)), (t, t), (base[:4], base[4:])]
    _run(f, lambda i: pairs[i], n_calls=len(pairs))


def test_is_set_to_of_a_view_made_in_the_frame():
    def f(x, n):
        return x.is_set_to(x[:n]), x[:n].is_set_to(x[:x.shape[0]])
    _run(f, lambda i: (torch.arange(5.0), [2, 5, 3, 5][i]), n_calls=4)


# --- min/max of a symbolic number and a number of another type read (and guarded) every value

def test_min_max_of_a_symbolic_float_and_an_int_guard_only_the_outcome():
    def f(x, v):
        return x * 1, min(v, -1), max(v, 0, -2.5), max(1, v)
    vals = [1.5, 2.5, -0.5, -2.5, 3.7, 0.49, -7.25, 1e10, -1.0, 1.0]
    cnt = _run(f, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))
    assert cnt.frame_count <= 5  # (was one graph per value, up to the recompile limit)


def test_min_max_of_a_symbolic_int_and_a_float():
    def f(x, n):
        return x * 1, max(n, 2.0), min(n, 3.5), min(n, True)
    vals = [1, 2, 3, 4, 5, 6, 7, 8, -1, 0]
    cnt = _run(f, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))
    assert cnt.frame_count <= 5


# --- types.SimpleNamespace lists its own (generic) __setattr__: a write broke as a custom one

def test_simple_namespace_argument_attribute_write():
    import types

    def f(x, ns):
        ns.extra = x * 2
        ns.k = ns.k + 1
        return x * ns.k

    def args(i):
        return torch.ones(2), types.SimpleNamespace(k=i + 1)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt, fullgraph=True)
    for i in range(2):
        (xc, nc), (xe, ne) = args(i), args(i)
        assert_same(compiled(xc, nc), f(xe, ne))
        assert_same(vars(nc), vars(ne))


def test_simple_namespace_made_in_the_frame():
    import types

    def f(x):
        ns = types.SimpleNamespace(t=x * 2, k=3)
        ns.k += 1
        return ns, ns.t * ns.k, getattr(ns, "missing", 5)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt, fullgraph=True)
    x = torch.ones(2)
    a, b = compiled(x), compiled(x)
    e = f(x)
    assert type(a[0]) is types.SimpleNamespace and a[0] is not b[0]  # a new one each call
    assert_same(vars(a[0]), vars(e[0]))
    assert_same(a[1:], e[1:])
    assert cnt.frame_count == 1


def test_simple_namespace_made_in_the_frame_compared_and_printed():
    import types

    def f(x):
        a, b = types.SimpleNamespace(a=1), types.SimpleNamespace(a=1)
        return x + 1, a == b, a == types.SimpleNamespace(a=2), repr(a)
    _run(f, lambda i: (torch.ones(2),), n_calls=2)


def test_invert_of_a_symbolic_int_stays_symbolic():
    def f(x, n):
        return x * 1, ~n, ~n * 2
    vals = [5, 7, -3, -8, 9, 2, -1, 13, 0, 1]
    cnt = _run(f, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))
    assert cnt.frame_count == 2  # (was one graph per value up to the recompile limit)


# --- contextlib.ExitStack: types.MethodType(fn, obj) and sys.exc_info() (no exception handled)
#     broke the graph (the whole frame ran eagerly inside a loop)

def test_exit_stack_of_user_context_managers():
    import contextlib

    def f(x, n):
        log = []

        @contextlib.contextmanager
        def tag(i):
            log.append(f"in{i}")
            yield i
            log.append(f"out{i}")
        with contextlib.ExitStack() as st:
            vals = [st.enter_context(tag(i)) for i in range(n)]
            st.callback(log.append, "callback")
            y = x * n
        return y, log, vals
    cnt = _run(f, lambda i: (torch.ones(2), [2, 3, 2][i]), n_calls=3, fullgraph=True)
    assert cnt.frame_count == 2


def test_method_type_and_exc_info_in_the_frame():
    import sys
    import types

    class O:
        def __init__(self, k):
            self.k = k

    def scale(self, t):
        return t * self.k

    def f(x, o):
        m = types.MethodType(scale, o)
        return m(x), m.__self__ is o, sys.exc_info()

    cnt = CompileCounter()
    compiled = compile(f, backend=cnt, fullgraph=True)
    o = O(3)
    assert_same(compiled(torch.ones(2), o), f(torch.ones(2), o))


def test_exc_info_inside_a_handler_keeps_eager_traceback():
    import sys

    def f(x):
        try:
            raise ValueError("v")
        except ValueError:
            t, v, tb = sys.exc_info()
            return x + 1, t.__name__, str(v), tb is not None
    _run(f, lambda i: (torch.ones(2),), n_calls=2)


def test_index_and_int_methods_of_a_symbolic_int_stay_symbolic():
    def f(x, n):
        return x * n.__int__(), n.__index__(), n.conjugate(), n.__round__(-1)
    vals = [5, 7, -3, -8, 9, 2]
    cnt = _run(f, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))
    assert cnt.frame_count <= 6  # (__round__(-1) reads the value; the others do not)

    def g(x, n):
        return x * 1, n.__index__(), n.__int__() * 2
    cnt = _run(g, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))
    assert cnt.frame_count == 2  # (was one graph per value up to the recompile limit)


def test_radians_and_degrees_of_a_symbolic_number_stay_symbolic():
    import math

    def f(x, v):
        return x * math.radians(v), math.radians(v), math.degrees(v)
    vals = [1.5, 2.5, -0.5, -2.5, 3.7, 123.456789, 7, 180]
    cnt = _run(f, lambda i: (torch.ones(2), vals[i]), n_calls=len(vals))
    assert cnt.frame_count <= 4  # float: static, symbolic; int: symbolic (was one per value)
