"""NumPy in captured code (capture/variables/numpy_arrays.py), compared with eager NumPy.

Every check compares values, dtypes, Python types (np.ndarray vs np.float64 vs float), shapes,
the input arrays after the call (in-place writes), and exceptions, and counts graphs and breaks.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile, reset, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own NumPy capture (counts are ember's)")

torch.set_num_threads(1)


def same(actual, expected, path="out"):
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} vs {type(expected).__name__}"
    if isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} vs {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} vs {expected.shape}"
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-7, err_msg=path)
    elif isinstance(expected, np.generic):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} vs {expected.dtype}"
        np.testing.assert_allclose(actual, expected, rtol=1e-6, err_msg=path)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-7)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            same(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} vs {expected!r}"


def check(fn, *args, graphs=1, breaks=0, backend="aot_eager", again=True):
    """Eager vs ember on copies of ``args``: outputs, args after the call, graph/break counts."""
    reset()
    counter = CompileCounter()
    eager_args, comp_args = copy.deepcopy(args), copy.deepcopy(args)
    expected = fn(*eager_args)
    compiled = compile(fn, backend=counter if backend == "count" else backend)
    actual = compiled(*comp_args)
    same(actual, expected)
    same(list(comp_args), list(eager_args), "args after call")
    s = stats()
    if graphs is not None:
        assert s["graphs"] == graphs, s
    if breaks is not None:
        assert s["graph_breaks"] == breaks, s
    if again:  # the guards hold for equal inputs: no recompile
        comp2, eager2 = copy.deepcopy(args), copy.deepcopy(args)
        same(compiled(*comp2), fn(*eager2), "second call")
        same(list(comp2), list(eager2), "args after second call")
        assert stats()["recompiles"] == s["recompiles"], stats()
    return compiled


A32 = np.arange(6, dtype=np.float32).reshape(2, 3)
A64 = np.linspace(0.5, 2.0, 6).reshape(2, 3)
AI = np.arange(6).reshape(2, 3)


# -- (1) NumPy scalars, dtypes, constants ------------------------------------------------------

def test_numpy_scalars_and_folded_calls_are_constants():
    # torch.compile: 1 graph; before: 0 graphs and 4 breaks
    check(lambda x: x * np.float32(2.0) + np.sum([1, 2]), torch.ones(3))
    check(lambda x: x + np.sqrt(2.0) + np.pi + np.float32(2.0) * np.int64(3) + np.dtype("float32").itemsize,
          torch.ones(2))


def test_numpy_constant_methods_and_python_helpers():
    def f(x):
        s = np.float32(2.5)
        k = s.item() + s.dtype.itemsize + np.dtype("float64").itemsize + s.real
        return x * k if np.isscalar(3.0) else x

    check(f, torch.ones(2))
    # a method of a NumPy constant that makes an array runs eagerly (a constant array would be shared)
    check(lambda x: (x + 1, np.float32(2.5).reshape(1)), torch.ones(2), graphs=1, breaks=1)
    check(lambda a: (np.atleast_2d(a), np.shape(a), np.ndim(a)), np.ones(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16])
def test_numpy_scalar_in_tensor_arithmetic(dtype):
    check(lambda x: (x * np.float64(2.5), x + np.int64(1), np.float32(3) * x, x - np.int8(2)),
          torch.ones(2, dtype=dtype))


def test_numpy_bool_scalar_breaks_and_torch_tensor_of_scalar_keeps_its_dtype():
    # torch promotes np.bool_ unlike True: eager runs it
    check(lambda x: x * np.bool_(True), torch.ones(2, dtype=torch.int32), graphs=0, breaks=1)
    # torch.tensor(np.int8(2)) is int8: a constant's number with its dtype, in the graph
    check(lambda x: torch.tensor(np.int8(2)) + x, torch.ones(2, dtype=torch.int8), graphs=1, breaks=0)


G_SCALE = np.float32(2.0)


def test_numpy_scalar_global_is_guarded_by_exact_bits():
    global G_SCALE
    fn = compile(lambda x: x * G_SCALE, backend="eager")
    reset()
    torch.testing.assert_close(fn(torch.ones(2)), torch.full((2,), 2.0))
    G_SCALE = np.float32(-0.0)
    assert torch.equal(fn(torch.ones(2)).signbit(), torch.ones(2).mul(-0.0).signbit())
    G_SCALE = np.float32(0.0)
    out = fn(torch.ones(2))
    assert not out.signbit().any()
    assert stats()["recompiles"] == 2, stats()
    G_SCALE = np.float32(2.0)


# -- (2) ndarray arguments ------------------------------------------------------------------

def _reductions(a):
    return np.sum(a), a.mean(axis=0), a.sum(1), a.max(), a.argmax(), np.min(a), np.all(a > 0), np.var(a)


def _arith(a, b):
    return a + b, a * 2, 2 - a, a / 3, a ** 2, -a, abs(a), a @ b.T, a > 1, a == b


def _shapes(a):
    return (a.reshape(3, 2), a.T, a.transpose(), a.ravel(), a.flatten(), np.concatenate([a, a]),
            np.stack([a, a]), a[..., None], a.shape, a.ndim, a.size, a.dtype, len(a))


def _indexing(a):
    return a[0], a[:, 1], a[0, 1], a[1:], a[:, ::2]


def _ufuncs(a):
    return (np.exp(a), np.log1p(a), np.maximum(a, 1), np.clip(a, 1, 3), np.add(a, 1), np.where(a > 1, a, 0),
            np.round(a, 2), np.floor(a), np.cumsum(a, axis=1), np.sort(a), np.linalg.norm(a, axis=1))


def _creation(a):
    return (np.zeros(3), np.ones((2, 2), dtype=np.float32), np.arange(4), np.array([1.0, 2.0]) + a[0, :2],
            np.zeros_like(a), np.ones_like(a, dtype=np.int32), np.full((2,), 3.0, dtype=np.float32))


def _astype(a):
    return a.astype(np.float32), a.astype("int32"), a.astype(np.int64) + np.int64(1), a.copy()


@pytest.mark.parametrize("fn,args", [
    (_reductions, (A64,)), (_reductions, (A32,)), (_reductions, (AI,)), (_arith, (A32, A32 + 1)),
    (_arith, (A64, A64 * 2)), (_shapes, (A32,)), (_indexing, (A64,)), (_ufuncs, (A32,)), (_ufuncs, (A64,)),
    (_creation, (A64,)), (_astype, (A64,)), (_reductions, (A64.T,)), (_ufuncs, (A64[:, ::2],)),
], ids=lambda v: getattr(v, "__name__", "args"))
def test_ndarray_operations_in_one_graph(fn, args):
    check(fn, *args)


def test_reductions_return_numpy_scalars_like_eager():
    out = check(lambda a: (np.sum(a), a.max(), a.mean(), np.sum(a) * 2, a.reshape(-1)[0]), A32)(A32.copy())
    assert [type(o) for o in out] == [np.float32, np.float32, np.float32, np.float32, np.float32]
    out = check(lambda a: (a.sum(), a.reshape(()), np.squeeze(a)), np.array([3]))(np.array([3]))
    assert type(out[0]) is np.int64 and type(out[1]) is np.ndarray and out[1].shape == ()


def test_iterating_an_array():
    def f(a):
        rows = [r * 2 for r in a]
        s = 0
        for v in a[0]:
            s = s + v
        return rows, s, type(s)

    check(f, A64)


def test_returned_array_identity():
    a = A64.copy()
    compiled = check(lambda a: a, A64, graphs=0)
    assert compiled(a) is a
    compiled = check(lambda a: (lambda b: (b, b))(a * 2), A64)
    b1, b2 = compiled(a)
    assert b1 is b2


def test_ndarray_guards_recompile_on_dtype_and_shape():
    fn = compile(lambda a: np.sum(a * 2, axis=0), backend="eager")
    reset()
    for a in (A64, A64 + 1, A32, np.ones((4, 3)), A64.T):
        same(fn(a.copy()), np.sum(a * 2, axis=0))
    assert stats()["recompiles"] == 3, stats()


# -- (3) in place, and torch <-> numpy -----------------------------------------------------

def test_in_place_writes_reach_the_input_array():
    def f(a):
        a += 1
        a[0] = 5
        a[1, :] *= 2
        return a

    compiled = check(f, A64)
    a = A64.copy()
    assert compiled(a) is a
    expected = A64.copy()
    f(expected)
    np.testing.assert_array_equal(a, expected)


def test_in_place_writes_into_strided_and_transposed_inputs():
    def f(a, b):
        a += 1
        b[0] = 7
        return a.sum() + b.sum()

    reset()
    eager_base, comp_base = np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(3, 4)
    eager_c, comp_c = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3)
    expected = f(eager_base[:, ::2], eager_c.T)
    same(compile(f, backend="aot_eager")(comp_base[:, ::2], comp_c.T), expected)
    same([comp_base, comp_c], [eager_base, eager_c], "arrays after the call")
    assert stats()["graphs"] == 1 and stats()["graph_breaks"] == 0, stats()


def test_functions_returning_their_argument_keep_identity():
    check(lambda a: (lambda r: (r, r is a))(np.add(a, 1, out=a)), A64)
    check(lambda a: (lambda b: (b is a, b))(np.asarray(a)), A64)

    def sort_in_place(a):
        a.sort(axis=1)
        return a

    check(sort_in_place, A64[:, ::-1].copy())


def test_numpy_types_and_dtypes_in_python_checks():
    def f(a):
        s = np.sum(a)
        return (isinstance(s, np.floating), isinstance(a, np.ndarray), type(s) is np.float64,
                isinstance(s, np.ndarray), a.dtype == np.float64, a.dtype.name, a * 2)

    check(f, A64)


def test_in_place_through_a_view_and_returning_none():
    def view_write(a):
        b = a[0]
        b += 10

    check(view_write, A64)


def test_from_numpy_and_tensor_numpy_share_memory():
    check(lambda a: torch.from_numpy(a) * 2, A32)

    def mutate_via_tensor(a):
        torch.from_numpy(a).add_(1)
        return a

    check(mutate_via_tensor, A64)

    def mutate_via_array(x):
        a = x.numpy()
        a += 1
        return x, np.sum(a)

    check(mutate_via_array, torch.ones(3))
    check(lambda a: (torch.tensor(a) + 1, torch.as_tensor(a)), A64.T)

    def roundtrip(x):
        b = np.exp(x.numpy())
        return torch.from_numpy(b) + 1, b

    check(roundtrip, torch.ones(2))


def test_numpy_of_tensor_requiring_grad_breaks_like_eager():
    reset()
    fn = compile(lambda x: x.numpy() * 2, backend="eager")
    with pytest.raises(RuntimeError, match="requires grad"):
        fn(torch.ones(2, requires_grad=True))


def test_arrays_over_the_same_memory_run_eagerly():
    # torch.from_numpy makes a new storage per array: two inputs over one memory would be
    # unrelated graph inputs (a write through one unseen through the other): the frame runs eagerly
    def arrays(a, b):
        a += 1
        return b * 2

    def tensor_and_array(t, a):
        t.add_(1)
        return a * 2

    for fn, make in ((arrays, lambda base: (base, base[1:])),
                     (tensor_and_array, lambda base: (torch.from_numpy(base), base))):
        reset()
        eager_base, comp_base = np.arange(6.0), np.arange(6.0)
        expected = fn(*make(eager_base))
        same(compile(fn, backend="eager")(*make(comp_base)), expected)
        same(comp_base, eager_base, "shared memory after the call")
        assert stats()["graphs"] == 0, stats()
    base = np.arange(6.0)
    check(arrays, base, base)  # one array passed twice: one input
    check(arrays, base, np.ones(6))


def test_arrays_across_a_graph_break_and_on_objects():
    def broken(a):
        b = a * 2
        s = np.sum(a)
        print("break")
        return b + 1, a, s * 2

    check(broken, A64, graphs=2, breaks=1)

    class Box:
        pass

    def store(box, a):
        box.arr = a * 2
        box.same = a
        return box.arr.sum()

    reset()
    b1, b2, a1, a2 = Box(), Box(), A64.copy(), A64.copy()
    same(compile(store, backend="eager")(b2, a2), store(b1, a1))
    same(b2.arr, b1.arr)
    assert b2.same is a2


# -- what stays a graph break -------------------------------------------------------------

def test_numpy_random_stays_a_break():
    def f(a):
        np.random.seed(0)
        return a + np.random.rand(*a.shape), np.random.randint(0, 10)

    check(f, A64, graphs=1, breaks=3)


def test_data_dependent_and_python_reads_break():
    def branch(a):
        if np.sum(a) > 2:
            return a * 2
        return -a

    check(branch, A64, graphs=2, breaks=1)
    check(lambda a: float(a.sum()) + 1, A64, graphs=1, breaks=1)
    check(lambda a: a.sum().item(), A64, graphs=1, breaks=1)
    check(lambda a: a[a > 1], A64, graphs=1, breaks=1)  # (a > 1 is a graph)
    check(lambda x, a: x + a, torch.ones(2, 3), A64, graphs=0, breaks=1)


def test_layout_properties_and_integer_division_by_arrays_break():
    check(lambda a: (a * 2).strides, A64, graphs=1, breaks=1)
    # NumPy: 0 (and a warning) for an integer division by zero; torch raises
    with np.errstate(divide="ignore"):
        check(lambda a, b: (a // b, a // 2, a % 3), AI.ravel(), np.array([1, 0, 2, 3, 0, 1]), graphs=1, breaks=1)


def test_torch_numpy_differences_from_numpy_break():
    # torch._numpy gives float32 for int / int and int64 for a uint8 sum; NumPy float64 / uint64
    # (torch.compile returns those wrong dtypes). Integer true division converts the operands to
    # float64 first (NumPy's computation); where that is not NumPy's dtype (uint8 / np.float32 is
    # float32) and for the sum, ember runs them eagerly
    out = check(lambda a: (a / 2, a / a[:1], np.true_divide(a, 3), a[0, 0] / 2), AI)(AI.copy())
    assert out[0].dtype == np.float64 and type(out[3]) is np.float64
    check(lambda a: a / np.float32(2), AI.astype(np.uint8), graphs=0, breaks=1)
    # same dtype and shape, other values: torch._numpy's round returns an integer array unchanged
    # (the probe runs both on test data and compares values)
    out = check(lambda a: np.around(a, -1), AI * 7, graphs=0, breaks=1)(AI * 7)
    assert out[0, 1] == 10
    check(lambda a, i: (np.take_along_axis(a, i, 1), a[:, i[:, 0]]), A64, np.array([[2], [0]]))  # (indices)
    out = check(lambda a: a.sum(), AI.astype(np.uint8), graphs=0, breaks=1)(AI.astype(np.uint8))
    assert type(out) is np.uint64


def test_eager_exceptions():
    def as_key(a):
        try:
            {a: 1}
        except TypeError as e:
            return a * 2, str(e)

    check(as_key, A64)
    reset()
    fn = compile(lambda a, b: a + b, backend="eager")
    with pytest.raises(ValueError, match="broadcast"):
        fn(A64.copy(), np.ones(4))


# -- graph counts vs torch.compile ----------------------------------------------------------

@pytest.mark.parametrize("fn,args", [
    (lambda x: x * np.float32(2.0) + np.sum([1, 2]), (torch.ones(3),)),
    (_reductions, (A64,)), (_arith, (A32, A32 + 1)), (_ufuncs, (A64,)),
    (lambda x: torch.from_numpy(np.exp(x.numpy())) + 1, (torch.ones(2),)),
], ids=["scalars", "reductions", "arith", "ufuncs", "roundtrip"])
def test_graph_counts_match_torch_compile(fn, args):
    import torch._dynamo
    torch._dynamo.reset()
    reference = CompileCounter()
    torch.compile(fn, backend=reference)(*copy.deepcopy(args))
    torch._dynamo.reset()
    ours = CompileCounter()
    reset()
    compile(fn, backend=ours)(*copy.deepcopy(args))
    assert ours.frame_count == reference.frame_count == 1
    assert stats()["graph_breaks"] == 0


@pytest.mark.slow
def test_inductor_backend():
    def f(a):
        a += 1
        return np.sum(a * 2, axis=0), np.exp(a).mean()

    check(f, A64, backend="inductor", again=False)


def test_read_only_array_inputs():
    # np.broadcast_to, np.frombuffer, np.asarray(PIL image) give read-only arrays: traced (never
    # written: a write raises NumPy's ValueError, as in eager), results read-only where eager's are
    import warnings
    bcast = np.broadcast_to(np.arange(3.0), (2, 3))
    buf = np.frombuffer(np.arange(6, dtype=np.float32).tobytes(), dtype=np.float32).reshape(2, 3)

    def reads(a):
        return a * 2 + a.sum(), a.T, a[0], np.broadcast_to(a[0], (4, 3))

    def writes(a):
        v = a[0]
        v[0] = 5
        return a

    for a in (bcast, buf):
        reset()
        compiled = compile(reads, backend="aot_eager")
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # (torch.from_numpy's warning: not shown)
            actual = compiled(a)
        expected = reads(a)
        same(actual, expected)
        assert [x.flags.writeable for x in actual] == [x.flags.writeable for x in expected]
        assert stats()["graphs"] == 1 and stats()["graph_breaks"] == 0
        assert compile(lambda a: a)(a) is a
        reset()
        with pytest.raises(ValueError, match="read-only"):
            compile(writes, backend="aot_eager")(a)
        with pytest.raises(ValueError, match="read-only"):
            compile(lambda a: np.add(a, 1, out=a))(a)
    assert not bcast.flags.writeable and bcast.tolist() == [[0.0, 1.0, 2.0]] * 2
