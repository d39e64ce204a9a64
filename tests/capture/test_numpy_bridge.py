"""NumPy next to torch in one frame (capture/variables/numpy_bridge.py, numpy_arrays.py): ``t.numpy(force=...)``,
``torch.tensor(a, dtype=...)``, tensor-ndarray operators, NumPy calls with dynamic sizes, breaking
ndarray methods, NumPy results that are tuples. Each check compares with eager: values, dtypes,
Python types (ndarray vs tensor vs NumPy scalar), the arguments after the call, and graph/break
counts (the ones torch.compile also gets, where it defines them).
"""
from __future__ import annotations

import operator

import numpy as np
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile, reset, stats

from .test_numpy_interop import check, same

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own NumPy capture (counts are ember's)")


def test_tensor_numpy_force_and_the_graph_it_makes():
    # torch.compile: one graph each (a view_as / detach node), the array shares the tensor's memory
    check(lambda x: x.numpy(), torch.ones(3), graphs=1)
    check(lambda x: x.numpy(force=False), torch.ones(3), graphs=1)
    check(lambda x: x.numpy(force=True), torch.ones(3, requires_grad=True), graphs=1, again=False)
    check(lambda x: (x * 2).conj().numpy(force=True), torch.ones(3, dtype=torch.complex64), graphs=1)

    def shares(x):
        a = x.numpy(force=True)
        a += 1  # writes x (eager: force=True of a tensor that needs no copy is a view)
        return x
    check(shares, torch.zeros(3))
    # eager raises: runs eagerly and raises the same
    compiled = compile(lambda x: x.numpy(), backend="eager")
    with pytest.raises(RuntimeError, match="requires grad"):
        compiled(torch.ones(2, requires_grad=True))


def test_arrays_from_tensors_live_across_a_break():
    def fn(x, y):
        a = x.numpy()
        b = y.numpy()
        print(end="")  # a break
        return np.add(a, 1), np.add(b, 1)
    check(fn, torch.randn(1, 3), torch.randn(1, 3), graphs=2, breaks=1)


def test_breaking_ndarray_method_breaks_at_the_call():
    # the rest of the frame compiles again (before: it ran eagerly from the attribute on)
    def fn(x):
        x += 1
        z = x.tobytes()
        x += 1
        return z
    check(fn, np.array([1, 2]), graphs=2, breaks=1)

    def item_then_more(a):
        v = a.sum().item()
        return a * 2, v
    check(item_then_more, np.arange(4.0), graphs=2, breaks=1)


def test_numpy_tuple_results_and_arrays_of_arrays():
    def mesh(x, y):
        rx, iy = np.meshgrid(x, y, indexing="xy")
        return np.meshgrid(x, y), rx * iy
    out = check(mesh, np.linspace(0, 1, 4), np.linspace(1, 2, 3))(np.linspace(0, 1, 4), np.linspace(1, 2, 3))
    assert type(out[0]) is type(np.meshgrid(np.ones(2), np.ones(2)))
    check(lambda x, y: np.array([x, y]), np.arange(2), np.arange(2) + 2)
    check(lambda x, y: np.array([x, y]), np.arange(2, dtype=np.int32), np.arange(2.0))
    check(lambda x, y: np.stack([x, y], axis=1), np.arange(3.0), np.ones(3))


def test_torch_tensor_of_an_array_with_dtype():
    def fn(x, y):
        t = torch.tensor(np.stack([np.ones([2, 3])], axis=0), dtype=torch.long)
        t.unsqueeze_(0)
        return t + y
    check(fn, 3, torch.randn(1, 2, 3))
    check(lambda a: (torch.tensor(a, dtype=torch.int32), torch.as_tensor(a, dtype=torch.float16)), np.arange(6.5))

    def as_tensor_shares(a):
        t = torch.as_tensor(a, dtype=torch.float64)  # same dtype: a view of a
        t += 1
        return t
    check(as_tensor_shares, np.arange(4.0))
    out = check(lambda a: torch.tensor(a.T), np.arange(6.0).reshape(2, 3))(np.arange(6.0).reshape(2, 3))
    assert out.stride() == torch.tensor(np.arange(6.0).reshape(2, 3).T).stride()


def test_dynamic_sizes_in_numpy_calls():
    # torch.compile: traced once with n=1, then once with n symbolic
    def fn(n, y):
        a = np.ones([2, n])
        return torch.tensor(np.stack([a], axis=0), dtype=torch.long) + y, a.shape, a.T.shape, a.size, a.nbytes
    reset()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for n in range(1, 7):
        y = torch.randn(1, 2, n)
        same(compiled(n, y), fn(n, y))
    assert counter.frame_count == 2
    assert stats()["graph_breaks"] == 0

    def take(x, i, axis):
        return np.take_along_axis(x, i, axis)
    reset()
    compiled = compile(take, backend="eager")
    x = np.random.rand(3, 4).astype(np.float32)
    for i, axis in ((np.zeros((3, 1), dtype=np.int64), 1), (np.ones((1, 4), dtype=np.int64), 0),
                    (np.full((3, 2), 3, dtype=np.int64), 1), (np.full((3, 2), -1, dtype=np.int64), -1)):
        same(compiled(x, i, axis), take(x, i, axis))
    assert stats()["graph_breaks"] == 0


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                                operator.iadd, operator.isub, operator.imul, operator.eq])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_tensor_with_ndarray_operators(op, dtype):
    # eager: the torch operation on torch.from_numpy(a) (an in-place operator rebinds the tensor)
    t = torch.arange(1, 7, dtype=torch.from_numpy(np.zeros(1, dtype)).dtype).reshape(2, 3)
    a = np.arange(2, 5, dtype=dtype)
    check(lambda t, a: (op(t, a), t), t, a, graphs=1, breaks=0)
    if op is operator.eq:
        check(lambda t, a: op(a, t), t, a, graphs=1, breaks=0)


def test_tensor_with_a_computed_numpy_scalar():
    # eager reads the NumPy scalar as a Python number (int64 tensor * np.float64: float32)
    t = torch.arange(1, 7).reshape(2, 3)
    check(lambda t, a: (t * a.sum(), a.mean() - t, t > a.max()), t, np.arange(2.0, 5.0), graphs=1, breaks=0)
    check(lambda t, a: t * a.sum(), t.half(), np.arange(2.0, 5.0), graphs=1, breaks=1)  # (half: breaks)


@pytest.mark.parametrize("case", ["promote", "truediv", "compare", "bool", "left", "matmul"])
def test_tensor_with_ndarray_eager_paths_break(case):
    # eager computes these with NumPy's rules (or raises): ember runs them eagerly
    t = torch.arange(1, 7).reshape(2, 3)
    a = np.arange(2, 5)
    fn, args = {
        "promote": (lambda t, a: t + a, (t.float(), a)),             # dtypes differ: NumPy promotes
        "truediv": (lambda t, a: t / a, (t, a)),                     # float64 where torch gives float32
        "compare": (lambda t, a: t < a, (t, a)),                     # TypeError
        "bool": (lambda t, a: t + a, (t > 2, a > 2)),
        "left": (lambda t, a: a * t, (t, a)),                        # TypeError
        "matmul": (lambda t, a: t @ a, (t.float(), a.astype(np.float32))),
    }[case]
    reset()
    compiled = compile(fn, backend="eager")
    try:
        expected = fn(*args)
    except Exception as e:
        with pytest.raises(type(e)):
            compiled(*args)
        return
    same(compiled(*args), expected)
    assert stats()["graph_breaks"] >= 1


def test_tensor_from_a_list_of_numpy_scalars():
    def fn(x):
        y = [x[0], x[2], x[4]]
        return (torch.LongTensor(y), torch.tensor(y), torch.tensor(y, dtype=torch.float32),
                torch.FloatTensor([x[1] / 2, x[3] / 3]), torch.tensor([x[0] * 1.5, x[1] - 0.5]))
    check(fn, np.array([1, 2, 3, 4, 5, 6], dtype=np.int64))
    check(fn, np.array([1, -2, 3, 4, 5, 6], dtype=np.int32))
    # mixed dtypes: eager's inference rules, runs eagerly
    check(lambda x: torch.tensor([x[0], x[1] / 2]), np.arange(3), graphs=1, breaks=1)
