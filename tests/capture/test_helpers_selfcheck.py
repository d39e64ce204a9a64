"""The comparison helpers must be able to fail: a backend that computes the
wrong thing, a missed mutation, a wrong graph count, dtype/shape/container
mismatches are all caught."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_module_same, check_same


class WrongBackend(CompileCounter):
    """Counts like CompileCounter but returns a function that adds 1 to every output."""

    def __call__(self, gm, example_inputs):
        fwd = super().__call__(gm, example_inputs)

        def wrong(*args):
            out = fwd(*args)
            if isinstance(out, (tuple, list)):
                return type(out)(o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                                 for o in out)
            return out + 1
        return wrong


class DropMutationBackend(CompileCounter):
    """Runs the graph on clones of the inputs, so in-place input mutations are lost."""

    def __call__(self, gm, example_inputs):
        fwd = super().__call__(gm, example_inputs)
        return lambda *args: fwd(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])


class NoGradBackend(CompileCounter):
    def __call__(self, gm, example_inputs):
        fwd = super().__call__(gm, example_inputs)

        def run(*args):
            with torch.no_grad():
                return fwd(*args)
        return run


def test_wrong_output_is_caught():
    with pytest.raises(AssertionError):
        check_same(lambda x: x * 2, torch.randn(3), counter=WrongBackend())


def test_lost_input_mutation_is_caught():
    def f(x):
        x.mul_(2)
        return x.sum()
    with pytest.raises(AssertionError, match="args after call"):
        check_same(f, torch.randn(3), counter=DropMutationBackend())


def test_missing_requires_grad_is_caught():
    with pytest.raises(AssertionError, match="requires_grad"):
        check_same(lambda x: x.sin(), torch.randn(3, requires_grad=True), counter=NoGradBackend())


def test_wrong_graph_count_is_caught():
    with pytest.raises(AssertionError, match="graph"):
        check_same(lambda x: x + 1, torch.randn(2), graphs=2)


def test_module_wrong_output_is_caught():
    with pytest.raises(AssertionError):
        check_module_same(lambda: torch.nn.Linear(3, 3), torch.randn(2, 3), counter=WrongBackend())


@pytest.mark.parametrize("actual,expected", [
    (torch.zeros(3), torch.zeros(3, dtype=torch.float64)),
    (torch.zeros(3), torch.zeros(1, 3)),
    ((torch.zeros(1),), [torch.zeros(1)]),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    (1, 1.0),
    (True, 1),
    ([1, 2], [1, 2, 3]),
    (torch.zeros(2).requires_grad_(), torch.zeros(2)),
])
def test_assert_same_rejects(actual, expected):
    with pytest.raises(AssertionError):
        assert_same(actual, expected)


def test_assert_same_accepts_equal_nested():
    a = {"x": [torch.ones(2), (3, "s", None)], "y": 2.5}
    b = {"x": [torch.ones(2), (3, "s", None)], "y": 2.5}
    assert_same(a, b)
