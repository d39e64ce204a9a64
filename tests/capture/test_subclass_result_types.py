"""The trace's type of an op's result on a tensor subclass with torch's default ``__torch_function__``
(capture: the class of a tensor computed from a subclass): eager converts every tensor result to the
subclass, so ``type(a * 2)`` and ``isinstance(a * 2, MyTensor)`` answer with the subclass."""
import torch

from ember_test_helpers import check_same, reset


class MyTensor(torch.Tensor):
    pass


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g * 2, g * 3


def _sub(grad=False):
    return torch.randn(3).as_subclass(MyTensor).requires_grad_(grad)


def test_type_of_an_op_result_on_a_subclass():
    check_same(lambda a: (a * 2, type(a + 1).__name__, isinstance(a.sin(), MyTensor)), _sub())


def test_type_of_results_of_ops_returning_tuples():
    check_same(lambda a: [type(t).__name__ for t in a.max(0)] + [isinstance(a.split(1)[0], MyTensor)], _sub())


def test_parameter_keeps_plain_results():
    p = torch.nn.Parameter(torch.randn(3))
    check_same(lambda p, x: (p * x, type(p * x).__name__, type(p).__name__), p, torch.randn(3))


def test_autograd_function_result_on_a_subclass():
    reset()
    check_same(lambda a, x: (Scale.apply(a, x), type(Scale.apply(a, x)).__name__), _sub(True),
               torch.randn(3, requires_grad=True))
