"""A class called on constants inside the frame makes a new object on every call, as in eager.

Found running PyTorch's test_skip_non_tensor against ember: ``torch.FloatStorage(1)`` was made once
at trace time (its deprecation warning fired twice, once while tracing), and so were
``torch.Tensor([1.0, 2.0])``, ``torch.LongTensor(2, 3)``, ``bytearray(3)``: every call returned
the very same object, and a write to one call's result showed in the next call's (a wrong answer).
Legacy tensor constructors now run in the graph (``torch.tensor`` / ``torch.empty`` of the class's
dtype); other mutable results break the graph (EB0042).
"""
import warnings

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, check_raises_same, check_same, compile




@pytest.mark.parametrize("make", [
    lambda: torch.Tensor([1.0, 2.0]),
    lambda: torch.FloatTensor([1.0, 2.0]),
    lambda: torch.LongTensor([1, 2]),
    lambda: torch.DoubleTensor((3, 4)),
    lambda: torch.Tensor(2).fill_(1.0),
    pytest.param(lambda: torch.Tensor(torch.Size([2])).fill_(2.0), marks=pytest.mark.skipif(
        REFERENCE, reason="torch.compile 2.13 makes torch.Tensor(torch.Size([2])) a 1-element tensor")),
], ids=["Tensor-data", "FloatTensor", "LongTensor", "DoubleTensor-tuple", "Tensor-size", "Tensor-Size"])
def test_legacy_tensor_constructor_is_new_every_call(make):
    def fn(x):
        t = make()
        return x + t, t

    x = torch.ones(2)
    compiled = compile(fn, backend=CompileCounter())
    first = compiled(x)
    first[1].mul_(100)  # eager: the next call makes a new tensor, untouched by this
    again = compiled(x)
    expected = fn(x)
    assert again[1] is not first[1]
    torch.testing.assert_close(again[0], expected[0])
    torch.testing.assert_close(again[1], expected[1])
    assert again[1].dtype == expected[1].dtype


@pytest.mark.skipif(REFERENCE, reason="ember's graph spells the constructor torch.tensor")
def test_legacy_tensor_constructor_in_graph():
    def fn(x):
        return x * torch.Tensor([[1.0, 2.0], [3.0, 4.0]]) + torch.LongTensor([1, 2])

    counter = check_same(fn, torch.randn(2, 2), graphs=1)
    assert torch.tensor in counter.targets()


def test_legacy_tensor_constructor_under_default_dtype():
    def fn(x):
        return x + torch.Tensor([1.0, 2.0]).sum()

    compiled = compile(fn, backend=CompileCounter())
    x = torch.ones(2, dtype=torch.float64)
    assert compiled(x).dtype == fn(x).dtype
    prior = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out, expected = compiled(x), fn(x)
    finally:
        torch.set_default_dtype(prior)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises TorchRuntimeError, not eager's ValueError")
def test_legacy_tensor_constructor_error_is_eagers():
    def fn(x):
        return x + torch.Tensor([[1.0], [2.0, 3.0]])

    check_raises_same(fn, torch.ones(2))


@pytest.mark.parametrize("make", [
    lambda: bytearray(3),
    lambda: memoryview(bytearray(2)),
], ids=["bytearray", "memoryview"])
def test_mutable_builtin_is_new_every_call(make):
    def fn(x):
        return x + 1, make()

    compiled = compile(fn, backend=CompileCounter())
    x = torch.ones(2)
    a, b = compiled(x)[1], compiled(x)[1]
    assert a is not b
    assert type(a) is type(fn(x)[1])


def test_storage_made_once_per_call_warns_once():
    def fn(x):
        return x + 1, torch.FloatStorage(2)

    compiled = compile(fn, backend=CompileCounter())
    x = torch.ones(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = compiled(x)[1]
    assert sum("TypedStorage is deprecated" in str(w.message) for w in caught) == 1
    b = compiled(x)[1]
    assert a is not b and a.size() == b.size() == 2


def test_immutable_constants_still_fold():
    def fn(x):
        return x.reshape(torch.Size([2, 2])) + int("3") + float("0.5"), torch.device("cpu"), tuple(range(3))

    check_same(fn, torch.randn(4), graphs=1)
