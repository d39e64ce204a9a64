"""A graph break at a branch on a tensor the frame received, with nothing traced before it
(``if flag:`` first thing, ``flag and x``): torch.compile compiles a graph there anyway, one that
returns the tensor tested, and its backend sees one more frame; ember makes the same graph, so a
CompileCounter counts what it counts under torch.compile (upstream test_subgraphs.test_start4: 3
frames, ember had 2). A branch on a tensor the graph computed, or a break at a call, is unchanged.
"""
import pytest
import torch

from ember_test_helpers import CompileCounter, compile

ONE, ZERO = torch.ones(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)


def branch_first(a, b, check):
    if check:
        return a + b + 10
    return a + b - 10


def branch_returns_input(a, check):
    if check:
        return a
    return a * 1


def branch_constants(a, check):
    if check:
        return 1
    return 2


def and_value_first(a, check):
    y = check and a
    return 3 if y is check else 4


def branch_on_computed(a, check):
    if check.sum() > 0:
        return 1
    return 2


def print_first(a, check):
    print("", end="")
    return 1


@pytest.mark.parametrize("fn, calls, frames, ops", [
    (branch_first, [(torch.ones(3), torch.ones(3), ONE), (torch.ones(3), torch.ones(3), ZERO)], 3, 4),
    (branch_returns_input, [(torch.ones(3), ONE), (torch.ones(3), ZERO)], 2, 1),
    (branch_constants, [(torch.ones(3), ONE), (torch.ones(3), ZERO)], 1, 0),
    (and_value_first, [(torch.ones(3), ONE), (torch.ones(3), ZERO)], 1, 0),
    (branch_on_computed, [(torch.ones(3), ONE), (torch.ones(3), ZERO)], 1, 2),
    (print_first, [(torch.ones(3), ONE)], 0, 0),
], ids=["branch-first", "returns-input", "constants", "and-value", "computed", "print-first"])
def test_frames_as_torch_compile(fn, calls, frames, ops):
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for args in calls:
        out, expected = compiled(*args), fn(*args)
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(out, expected)
        else:
            assert out == expected
    for args in calls:  # again: no new graph
        compiled(*args)
    assert (counter.frame_count, counter.op_count) == (frames, ops)


def test_branch_graph_output_not_mutated_alias():
    # the tested tensor comes back out of the graph: the branch and the rest still see the input
    def fn(flag, x):
        if flag:
            flag.add_(1)
            return x + flag
        return x - flag

    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for start in (1.0, 0.0, 1.0):
        f1, f2 = torch.tensor([start]), torch.tensor([start])
        x = torch.arange(3.0)
        torch.testing.assert_close(compiled(f1, x), fn(f2, x))
        torch.testing.assert_close(f1, f2)
