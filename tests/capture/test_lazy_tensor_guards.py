"""Tensor inputs are guarded when the trace first uses them (as torch.compile's lazy trackers):
a tensor the frame leaves unused, or hands on unchanged to a graph break's resume function, adds
no guard to that frame, so its dtype or size changing does not recompile it; a tensor whose
metadata the graph or the trace depends on (an op, a metadata read, a branch on ``is None``, a
return value, a side effect) is guarded, and a change recompiles. Counts are torch.compile's
(``EMBER_TEST_REFERENCE=torch`` runs the same programs on it); values are eager's."""
import sys

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, clone_inputs, compile, reset, stats


def run(fn, calls, **kwargs):
    """Each call compiled and eagerly (on copies, outputs and mutated inputs compared); the backend's
    graph count and the number of frames compiled."""
    reset()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, **kwargs)
    for args in calls:
        expected_args, actual_args = clone_inputs(args), clone_inputs(args)
        expected = fn(*expected_args)
        actual = compiled(*actual_args)
        assert_same(actual, expected)
        assert_same(actual_args, expected_args, path="inputs")
    return counter.frame_count, stats()["frames"]


def t(*shape, dtype=torch.float32, grad=False):
    g = torch.Generator().manual_seed(sum(shape) + 7)
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(grad)


def _dtypes(make):
    return [make(dt) for dt in (torch.float32, torch.float64, torch.int64)]


# -- not a use: no guard, no recompile ------------------------------------------------------------

def unused(x, y):
    return x + 1


def stored_only(x, y):
    z = y
    kept = [z]  # noqa: F841 (a list made and dropped)
    return x * 2


def unused_item(x, pair):
    return x + pair[0]


def inlined_unused(x, y):
    return _callee(x, y)


def _callee(a, b):
    return a - 1


@pytest.mark.parametrize("fn", [unused, stored_only, inlined_unused])
def test_an_unused_tensor_argument_is_not_guarded(fn):
    assert run(fn, _dtypes(lambda dt: (t(3), t(2, dtype=dt)))) == (1, 1)
    # its size neither (and under dynamic=False)
    assert run(fn, [(t(3), t(n)) for n in (2, 5, 7)], dynamic=False) == (1, 1)


def test_an_unused_item_of_a_tuple_argument_is_not_guarded():
    assert run(unused_item, _dtypes(lambda dt: (t(3), (t(3), t(4, dtype=dt))))) == (1, 1)
    # the item that is used is guarded
    assert run(unused_item, _dtypes(lambda dt: (t(3), (t(3, dtype=dt), t(4))))) == (3, 3)


def used_after_break(x, y):
    x = x + 1
    torch._dynamo.graph_break()
    return x * y


def test_a_tensor_used_only_after_a_graph_break_is_guarded_by_the_resume_function_only():
    # first call: two graphs; each other dtype of y: the resume function alone compiles again
    assert run(used_after_break, _dtypes(lambda dt: (t(3), t(3, dtype=dt)))) == (4, 4)


def paths_join(x, y, z, flag):
    if flag:
        x = x + 1
    else:
        x = x - 1
    torch._dynamo.graph_break()
    x = x * 2
    torch._dynamo.graph_break()
    return x + z


def test_resume_paths_join_recompile_only_where_the_tensor_is_used():
    calls = [(t(3), t(2), t(3, dtype=dt), flag) for flag in (True, False) for dt in (torch.float32, torch.float64)]
    # the first frame per flag (2), the middle resume function once (its x is the same kind), the
    # last one per dtype of z (2): z and y never recompile the frames that only hand them on
    assert run(paths_join, calls) == (5, 5)


# -- a use: guarded, a change recompiles ---------------------------------------------------------

def returned(x, y):
    return x + 1, y


def is_none(x, y):
    return x + 1 if y is not None else x - 1


def shape_branch(x, y):
    if y.shape[0] > 2:  # only y's metadata, no op on y
        return x + 1
    return x - 1


def dtype_read(x, y):
    return x.to(y.dtype)


def grad_read(x, y):
    return x * 2 if y.requires_grad else x * 3


def isinstance_check(x, y):
    return x + 1 if isinstance(y, torch.Tensor) else x


G = {}


def global_store(x, y):
    G["y"] = y
    return x + 1


@pytest.mark.parametrize("fn", [returned, is_none, dtype_read, global_store, isinstance_check])
def test_a_used_tensor_is_guarded(fn):
    assert run(fn, _dtypes(lambda dt: (t(3), t(2, dtype=dt)))) == (3, 3)


def test_metadata_read_without_an_op_is_guarded():
    # sizes 2 and 4 take different branches: a missed guard would give the first branch's answer
    assert run(shape_branch, [(t(3), t(2)), (t(3), t(4)), (t(3), t(1))], dynamic=False) == (3, 3)
    assert run(grad_read, [(t(3), t(2)), (t(3), t(2, grad=True))]) == (2, 2)


def on_the_stack_at_a_break(x, y):
    x = x + 1
    print_nothing(y)
    return x


def print_nothing(v):
    torch._dynamo.graph_break()


@pytest.mark.usefixtures("without_nested_breaks")
def test_a_tensor_on_the_stack_at_a_graph_break_is_guarded():
    calls = _dtypes(lambda dt: (t(3), t(2, dtype=dt)))
    graphs, frames = run(on_the_stack_at_a_break, calls)
    assert graphs == 3 and frames >= 3


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="nested graph breaks are off on Python 3.13 "
                    "(a chain's residual crashed there): plain breaks, other counts")
def test_a_tensor_dead_in_a_nested_break_is_not_guarded():
    # with nested graph breaks the callee stops at its own break, where y is dead: torch.compile
    # (nested_graph_breaks=True) makes one graph for the three dtypes too
    calls = _dtypes(lambda dt: (t(3), t(2, dtype=dt)))
    assert run(on_the_stack_at_a_break, calls)[0] == 1


def test_unused_dynamic_input_adds_no_shape_guard():
    def f(x, y):
        return x * 2
    # y's size (and its equality with x's) is not guarded: one graph for all of them
    assert run(f, [(t(n), t(m)) for n, m in ((3, 3), (4, 9), (5, 2))], dynamic=True) == (1, 1)


def used_on_one_path(x, y, flag):
    if flag:
        return x + 1
    return x + y[:1]


def test_sizes_of_an_unused_input_are_not_recorded_for_automatic_dynamic():
    # y unused by the first compile: its size 2 is not seen, so the second compile (flag changed)
    # takes y's size 4 as static, and the third (size 5) makes it dynamic: three graphs, as torch
    calls = [(t(3), t(2), True), (t(3), t(4), False), (t(3), t(5), False), (t(3), t(6), False)]
    assert run(used_on_one_path, calls) == (3, 3)
