"""A frame's arguments are wrapped (and guarded) when the trace first reads them: one that only
goes on to a graph break's resume function (of any type: a string, a dict, a tuple, a module,
None or a tensor) is guarded by that function alone, so a change recompiles it and not the frame
before the break (counts as torch.compile's, ``EMBER_TEST_REFERENCE=torch``; values as eager's)."""
import pytest
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, clone_inputs, compile, reset, stats


def run(fn, calls, **kwargs):
    reset()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, **kwargs)
    for args in calls:
        expected_args, actual_args = clone_inputs(args), clone_inputs(args)
        assert_same(compiled(*actual_args), fn(*expected_args))
    return counter.frame_count, stats()["frames"]


def mode_after_break(x, mode):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2 if mode == "double" else x - 1


def test_a_string_read_only_after_a_break_recompiles_the_resume_function_only():
    calls = [(torch.ones(3), m) for m in ("double", "other", "double", "third")]
    # the first graph once; the resume function per mode value (double / other / third)
    assert run(mode_after_break, calls) == (4, 4)


def passed_on(x, y):
    x = x + 1
    torch._dynamo.graph_break()
    return x, y


_VALUES = {
    "dict": [{"a": 1}, {"b": 2}, {"a": 1, "c": 3}],
    "str": ["a", "b", "c"],
    "tuple": [(1, 2), (1, 2, 3), (4,)],
    "none_or_tensor": [None, torch.ones(2), None],
    "tensor_or_none": [torch.ones(2), None, torch.ones(2, dtype=torch.int64), None],
    "module": [nn.Linear(2, 2), nn.Linear(3, 3), nn.ReLU()],
    "dtype": [torch.float32, torch.int64, torch.float64],
}


@pytest.mark.parametrize("kind", sorted(_VALUES))
def test_an_argument_only_handed_on_does_not_recompile_the_frame(kind):
    calls = [(torch.ones(3), v) for v in _VALUES[kind]]
    # one graph (x + 1); the resume function has no graph (it returns what it got) and is not
    # recompiled by the argument either
    graphs, frames = run(passed_on, calls)
    assert graphs == 1
    assert frames == 2


def read_before_break(x, mode):
    x = x + 1 if mode == "inc" else x - 1
    torch._dynamo.graph_break()
    return x * 2


def test_an_argument_read_before_the_break_is_guarded_there():
    calls = [(torch.ones(3), m) for m in ("inc", "dec", "inc")]
    graphs, frames = run(read_before_break, calls)
    assert graphs == 3  # x + 1, x - 1, then the resume function's x * 2 once
    assert frames == 3


class Holder:
    def __init__(self, items):
        self.items = items


def mutated_then_handed_on(x, lst, other):
    lst.append(1)
    x = x + len(lst)
    torch._dynamo.graph_break()
    return x, len(other)


def test_an_unread_argument_that_is_a_read_one_sees_its_mutation():
    # the second call passes one list as both `lst` and `other` (unread before the break, so not
    # guarded apart from `lst`): the entry of the first call runs, and the resume function sees
    # the append replayed on that list, as eager
    compiled = compile(mutated_then_handed_on, backend="eager")
    assert_same(compiled(torch.ones(2), [0], [5, 6]), mutated_then_handed_on(torch.ones(2), [0], [5, 6]))
    eager_list, compiled_list = [0], [0]
    expected = mutated_then_handed_on(torch.ones(2), eager_list, eager_list)
    assert_same(compiled(torch.ones(2), compiled_list, compiled_list), expected)
    assert compiled_list == eager_list == [0, 1]
