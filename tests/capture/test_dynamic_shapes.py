"""Automatic dynamic shapes: a recompile for a changed size makes that dimension a symbol.

Every test compares with eager (outputs, gradients) and counts compiles, against what
torch.compile does with the same program and sizes.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember_test_helpers import CompileCounter, assert_same, clone_inputs, compile, stats


def _run(fn, shapes, *, backend="aot_eager", dynamic=None, grad=False, make=None):
    """Call the compiled ``fn`` on inputs of each shape; compare with eager (and gradients)."""
    compiled = ember.compile(fn, backend=backend, dynamic=dynamic)
    for shape in shapes:
        x = make(shape) if make else torch.randn(*shape)
        a, b = clone_inputs(x), clone_inputs(x)
        if grad:
            a.requires_grad_()
            b.requires_grad_()
        expected = fn(a)
        actual = compiled(b)
        assert_same(actual, expected)
        if grad:
            expected.sum().backward()
            actual.sum().backward()
            assert_same(b.grad, a.grad)
    return compiled


def flat(x):
    b = x.size(0)
    y = x.view(b, -1) * 2
    if x.shape[0] > 3:  # a branch on a size: a guard, not a specialisation
        y = y + 1
    return y.sum(1) / b


def test_second_size_recompiles_once_with_a_symbol():
    compiled = _run(flat, [(4, 3), (5, 3), (6, 3), (9, 3), (31, 3)])
    assert stats()["recompiles"] == 1  # 5 recompiled with dim 0 symbolic; 6, 9, 31 reuse it
    guards = compiled._cache.entries[-1].guards.readable()
    assert any("4 <= L['x'].size()[0]" in g for g in guards), guards  # the branch, as a guard
    # the branch's other side is a new graph
    _run(flat, [(2, 3)])
    assert stats()["recompiles"] == 2


def test_recompile_reason_names_the_shape_guard():
    compiled = _run(flat, [(4, 3), (5, 3), (2, 3)])
    # the symbolic entry's failing guard, with the sizes that broke it
    assert any("L['x'].size()[0]" in r and "(now: L['x'].size()=[2, 3])" in r
               for r in compiled._cache.recompile_reasons[1:]), compiled._cache.recompile_reasons


def test_dynamic_false_recompiles_per_size():
    _run(flat, [(4, 3), (5, 3), (6, 3)], dynamic=False)
    assert stats()["recompiles"] == 2


def test_dynamic_true_is_symbolic_from_the_first_call():
    _run(flat, [(4, 3), (5, 3), (6, 7)], dynamic=True)
    assert stats()["recompiles"] == 0


@pytest.mark.parametrize("size", [0, 1])
def test_sizes_zero_and_one_are_specialised(size):
    _run(lambda x: x * x.size(0), [(4, 3), (5, 3), (size, 3), (7, 3)])
    assert stats()["recompiles"] == 2  # 5 (symbolic), then the size 0/1 graph; 7 reuses the symbolic one


def test_mark_dynamic_and_mark_static():
    counter = CompileCounter()
    fn = compile(lambda x: x.view(x.size(0), -1).sum(1), backend=counter)
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        ember.mark_dynamic(x, 0)
        assert_same(fn(x), x.view(n, -1).sum(1))
    assert counter.frame_count == 1
    ember.reset()
    fn = ember.compile(lambda x: x * 2, backend="eager", dynamic=True)
    for n in (3, 4):
        x = torch.randn(n, 2)
        ember.mark_static(x)
        assert_same(fn(x), x * 2)
    assert stats()["recompiles"] == 1


def test_torch_mark_dynamic_is_honoured():
    import torch._dynamo
    fn = ember.compile(lambda x: x.sum(0) * x.size(0), backend="aot_eager")
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        torch._dynamo.mark_dynamic(x, 0)
        assert_same(fn(x), x.sum(0) * n)
    assert stats()["recompiles"] == 0


def test_equal_sizes_share_a_symbol_until_they_differ():
    def f(x, y):
        return x + y.sum(1, keepdim=True)  # broadcast: dim 0 of both must agree
    compiled = ember.compile(f, backend="aot_eager")
    for n, m in [(3, 2), (4, 5), (6, 7)]:
        x, y = torch.randn(n, 1), torch.randn(n, m)
        assert_same(compiled(x, y), f(x, y))
    assert stats()["recompiles"] == 1
    bad_x, bad_y = torch.randn(5, 1), torch.randn(6, 2)  # eager raises: so does the compiled call
    with pytest.raises(RuntimeError):
        f(bad_x, bad_y)
    with pytest.raises(RuntimeError):
        compiled(bad_x, bad_y)


OPS = {
    "view_numel": lambda x: x.reshape(-1)[: x.numel() // 2].sum(),
    "new_zeros": lambda x: x.new_zeros(x.shape) + torch.ones(x.size(0), x.size(1)) + x,
    "arange": lambda x: x + torch.arange(x.size(-1), dtype=x.dtype),
    "unpack_shape": lambda x: (lambda b, c: x.t().contiguous().view(c, b).sum(0) / b)(*x.shape),
    "expand": lambda x: x[:, :1].expand(x.size(0), x.size(1)) + x,
    "slice_by_size": lambda x: x[: x.size(0) // 2 + 1].sum(0),
    "min_of_size": lambda x: x[: min(x.size(0), 3)].sum(),
    "float_ratio": lambda x: x * (x.size(0) / x.size(1)),
    "triu_mask": lambda x: x.unsqueeze(1).masked_fill(
        torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), 1), 0.0).sum(-1),
    "pad_to_8": lambda x: F.pad(x, (0, (8 - x.size(1) % 8) % 8)),
    "attention": lambda x: (x.unsqueeze(2) @ x.unsqueeze(1) / x.size(-1) ** 0.5).softmax(-1).sum(1),
    "setitem": lambda x: (lambda y: (y.__setitem__((slice(None), 0), 1.0), y.mul_(y.size(0)))[1])(x.clone()),
}


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_on_symbolic_sizes_match_eager_with_grads(name, backend):
    _run(OPS[name], [(4, 6), (5, 6), (7, 6), (9, 10), (3, 6)], backend=backend, grad=True)
    assert stats()["fallbacks"] == 0


def test_inductor_training_reuses_the_symbolic_graph():
    """Inductor's compile (forward and the lazily compiled backward) may not assume more about the
    sizes than the entry's guards check."""
    _run(OPS["slice_by_size"], [(4, 6), (5, 6), (7, 6), (11, 6)], backend="inductor", grad=True)
    assert stats()["fallbacks"] == 0


def test_module_with_a_varying_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    compiled = ember.compile(model, backend="aot_eager")
    for n in (4, 5, 6, 7):
        x = torch.randn(n, 8)
        assert_same(compiled(x), model(x))
        compiled(x).sum().backward()
    assert stats()["recompiles"] == 1  # the parameters stay static


def test_in_place_metadata_change_falls_back_to_static():
    def f(x):
        x.t_()  # the input's sizes change in the trace: guards must read the entry sizes
        return x * 2
    compiled = ember.compile(f, backend="eager")
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        a, b = x.clone(), x.clone()
        assert_same(compiled(b), f(a))
        assert_same(b, a)
    assert stats()["fallbacks"] == 0


def test_graph_break_keeps_the_symbol():
    def f(x):
        y = x * x.size(0)
        print("", end="")  # graph break
        return y.view(x.size(0), -1) + 1
    compiled = ember.compile(f, backend="aot_eager")
    for n in (3, 4, 5, 6):
        x = torch.randn(n, 2)
        assert_same(compiled(x), f(x))
    assert stats()["recompiles"] <= 2  # (the frame and its resume function once each)


def test_sizes_returned_from_the_frame_stay_symbolic():
    def f(x):
        return x.sum(), x.size(0), x.shape
    compiled = ember.compile(f, backend="aot_eager")
    for n in (3, 4, 5, 6):
        x = torch.randn(n, 2)
        out, size, shape = compiled(x)
        assert size == n and type(size) is int
        assert shape == x.shape and type(shape) is torch.Size
        assert_same(out, x.sum())
    assert stats()["recompiles"] == 1


def test_int_argument_that_changes_becomes_a_symbol():
    def f(x, n, scale):
        y = x[:n] * scale
        if n > 2:
            y = y + n
        return y.sum(0), n * 2
    compiled = ember.compile(f, backend="aot_eager")
    for n, scale in [(3, 2), (4, 3), (5, 4), (7, 5), (1, 2), (0, 1)]:
        x = torch.randn(8, 3)
        out, twice = compiled(x, n, scale)
        assert_same(out, f(x, n, scale)[0])
        assert twice == 2 * n and type(twice) is int
    # 4: symbols for n and scale (3 <= n <= 8, the branch and the slice); 1 and 0: one graph each
    assert stats()["recompiles"] == 3
    guards = compiled._cache.entries[1].guards.readable()
    assert any("3 <= L['n']" in g for g in guards), guards


def test_global_ints_stay_specialised():
    compiled = ember.compile(lambda x: x * _SCALE[0], backend="eager")
    for v in (2, 3, 4):
        _SCALE[0] = v
        assert_same(compiled(torch.ones(2)), torch.ones(2) * v)
    assert stats()["recompiles"] == 2  # (torch.compile also specialises a global int)


_SCALE = [1]


def test_loop_counter_across_a_break_stops_recompiling():
    def f(x):
        i = 0
        while i < 12:
            x = x * 1.01 + i
            print("", end="")  # graph break inside the loop: i is an argument of the resume function
            i += 1
        return x
    compiled = ember.compile(f, backend="aot_eager")
    x = torch.randn(3)
    assert_same(compiled(x), f(x))
    # a break inside a loop skips the frame (as torch.compile): no resume function per value of i
    assert stats()["fallbacks"] == 1
    assert stats()["recompiles"] == 0
    assert_same(compiled(x), f(x))
    assert stats()["recompiles"] == 0


def test_no_symint_reaches_the_program():
    """A size the trace computed as a SymInt that turned out constant (0 * s1, a specialised
    size) comes back as an int, as in eager."""
    def f(x):
        a, b = x.shape
        return a * b, x.size(0) - x.size(0), tuple(x.shape)
    compiled = ember.compile(f, backend="aot_eager")
    for shape in [(4, 3), (5, 3), (4, 6), (0, 3), (1, 7)]:
        x = torch.randn(*shape)
        got = compiled(x)
        assert got == f(x)
        assert all(type(v) is int for v in (got[0], got[1], *got[2])), got


def test_int_argument_passed_through_a_break_and_negative_values():
    def f(x, k):
        y = x * 2
        print("", end="")  # break: k reaches the resume function unchanged
        return y + k, k
    compiled = ember.compile(f, backend="aot_eager")
    for k in (3, 4, -5, 7, 0):
        x = torch.ones(2)
        out, back = compiled(x, k)
        assert_same(out, x * 2 + k)
        assert back == k and type(back) is int


@pytest.mark.parametrize("make", [
    lambda x: x * torch.tensor(float(x.size(0))),
    lambda x: torch.tensor(x.size(0)) + x.sum(),
    lambda x: torch.as_tensor(x.size(0) > 3) & (x.sum() > 0),
    lambda x: x * int(x.size(0)) + abs(-x.size(1)),
], ids=["tensor_of_float", "tensor_of_int", "as_tensor_of_bool", "int_abs"])
def test_conversions_of_sizes_stay_symbolic(make):
    compiled = ember.compile(make, backend="aot_eager")
    for n in (4, 5, 6, 9):
        x = torch.randn(n, 3)
        got, want = compiled(x), make(x)
        assert got.dtype == want.dtype
        assert_same(got, want)
    assert stats()["recompiles"] == 1


@pytest.mark.parametrize("make", [
    lambda x: x.view((-1,) + x.size()[1:]) * 2,
    lambda x: x.reshape(x.shape[:1] + (x.shape[1], -1)).sum(-1),
    lambda x: x * math.ceil(x.shape[1] / 4) + math.sqrt(x.shape[-1]) + math.floor(x.size(0) / 3),
    lambda x: x * 2 if x.shape == (2, 9) else x - 1,
    lambda x: x * 2 if x.shape != (x.size(0), 3) else x - 1,
], ids=["size_plus_tuple", "tuple_plus_tuple", "math_functions", "shape_equals_tuple", "shape_not_equals"])
def test_tuple_and_math_operations_on_sizes(make):
    compiled = ember.compile(make, backend="aot_eager")
    for shape in [(2, 8), (3, 10), (4, 12), (5, 6), (2, 9)]:
        x = torch.randn(*shape)
        assert_same(compiled(x), make(x))
    assert stats()["recompiles"] <= 2  # (== (2, 9) is one more graph, as in torch.compile)


def test_min_cut_partitioner_does_not_fix_sizes():
    def f(x):
        return (x.sin() * x.cos()).sum(1)
    with ember.config.patch(aot_eager_partitioner="min_cut"):
        _run(f, [(4, 6), (5, 6), (7, 6), (9, 6)], grad=True)
    assert stats()["recompiles"] == 1


_CALLS = []


@torch.compiler.disable
def _opaque(t):
    _CALLS.append(1)
    return t * 2 + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_symbolic_int_computed_by_a_graph_without_tensors(backend):
    """A resume function whose graph only computes ``c + 1`` from its int argument: the graph's
    int output must follow the input (the AOT layer once traced it as the constant it saw: the
    loop below never ended, and the disabled function ran 66 times instead of 4)."""
    def f(x):
        c = 0
        while c < 4:
            c += 1
            t = _opaque(x)
        return t + c
    compiled = ember.compile(f, backend=backend)
    for _ in range(3):
        _CALLS.clear()
        assert_same(compiled(torch.ones(2)), torch.full((2,), 7.0))
        assert len(_CALLS) == 4


def test_a_newly_marked_dimension_recompiles():
    def f(a):
        return a.cos() if a.shape[0] > 2 else a.sin()
    counter = CompileCounter()
    compiled = compile(f, backend=counter)
    x0 = torch.randn(3, 3, 3)
    ember.mark_dynamic(x0, 0)
    compiled(x0)
    compiled(torch.randn(3, 3, 3))  # unmarked: the symbolic entry serves it
    assert counter.frame_count == 1
    x1 = torch.randn(3, 3, 3)
    ember.mark_dynamic(x1, 1)  # a dimension the entry has static: recompile
    assert_same(compiled(x1), f(x1))
    assert counter.frame_count == 2


def _specialises(x):
    y = x * 2
    if x.shape[0] == 3:  # needs the exact size: the mark cannot hold
        return y * 2
    return y


def test_specialising_a_marked_dimension_raises_under_fullgraph_naming_the_line():
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError
    x = torch.randn(3, 2)
    ember.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolationError, match=r"(?s)x.size\(\)\[0\].*if x.shape\[0\] == 3"):
        ember.compile(_specialises, backend="eager", fullgraph=True)(x)
    ember.reset()
    y = torch.randn(5, 2)
    ember.mark_dynamic(y, 0, min=2, max=4)  # 5 is outside the range the user promised
    with pytest.raises(ConstraintViolationError):
        ember.compile(lambda t: t * 2, backend="eager", fullgraph=True)(y)


def test_specialising_a_marked_dimension_warns_once_and_specialises():
    compiled = ember.compile(_specialises, backend="eager")
    with pytest.warns(UserWarning, match="marked with ember.mark_dynamic") as record:
        for n in (3, 3, 4, 3, 5):
            x = torch.randn(n, 2)
            ember.mark_dynamic(x, 0)
            assert_same(compiled(x), _specialises(x))
    assert sum("mark_dynamic" in str(w.message) for w in record) == 1
    assert stats()["graphs"] == 2  # 3 specialised; every other size one symbolic graph


def test_torch_mark_dynamic_keeps_torchs_contract():
    # (torch's test_raise_guard_full_constraint: the error without fullgraph)
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError
    x = torch.randn(3, 2)
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolationError):
        ember.compile(_specialises, backend="eager")(x)


@pytest.mark.parametrize("dynamic", [False, None, True])
def test_zero_size_batch_trains_with_the_min_cut_partitioner(dynamic):
    """A zero-size batch's gradient reads the input without depending on the tangent (zeros_like):
    the min-cut partitioner saved nothing for it and failed ("backward reads unsaved primals")."""
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)

    def f(x):
        return (torch.softmax(lin(x), 0) * x.size(0)).cumsum(0)
    with ember.config.patch(aot_eager_partitioner="min_cut"):
        _run(f, [(5, 3), (6, 3), (0, 3)], dynamic=dynamic, grad=True)
    assert stats()["fallbacks"] == 0


def test_ints_in_star_args_and_with_other_int_arguments():
    def f(x, *ints, off=1):
        return x[: ints[0]] * ints[0] + off, ints[0] + off
    compiled = ember.compile(f, backend="aot_eager")
    for n in (3, 4, 5, 6, 7):
        x = torch.randn(8, 2)
        out, m = compiled(x, n)
        assert_same(out, f(x, n)[0])
        assert m == n + 1 and type(m) is int
    assert stats()["recompiles"] == 1  # ints[0] symbolic after it changed (off stays a constant)


def test_size_in_a_constant_tuple():
    def f(x):
        return x * 2 if x.shape[0] in (0, 1) else x - 1
    compiled = ember.compile(f, backend="aot_eager")
    for n in (4, 5, 6, 7, 1, 8):
        x = torch.randn(n)
        assert_same(compiled(x), f(x))
    assert stats()["recompiles"] == 2  # 5: symbolic (guards s0 != 0, s0 != 1 are implied); 1: its own


def test_aliasing_variant_compiled_at_call_time_with_a_symbolic_int():
    """A graph with a symbolic int input that mutates an input, later called with aliased inputs:
    the AOT layer compiles that layout's variant at call time with static values (keyed by them)."""
    def f(a, b, n):
        a.add_(n)
        return b * n
    compiled = ember.compile(f, backend="aot_eager")
    for n, alias in [(3, False), (4, False), (5, True), (6, True), (7, False)]:
        base = torch.randn(4)
        ea = base.clone()
        eb = ea if alias else base.clone()
        ca = base.clone()
        cb = ca if alias else base.clone()
        assert_same(compiled(ca, cb, n), f(ea, eb, n))
        assert_same(ca, ea)


def divmod_of_size(x):
    q, r = divmod(x.shape[0], 3)
    return x[:q] * 2 + r


def test_divmod_of_a_size_stays_symbolic():
    # (was read as a value: a recompile per size until the recompile limit)
    _run(divmod_of_size, [(n, 2) for n in (7, 8, 10, 11, 13, 14)])  # (q >= 2: no size-1 guard)
    assert stats()["recompiles"] == 1
