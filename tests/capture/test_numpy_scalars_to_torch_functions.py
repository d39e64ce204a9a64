"""A NumPy int or float scalar passed straight to a torch function or tensor method
(``torch.zeros(n)``, ``x.view(n, -1)``, ``torch.full((2,), v)``, ``torch.clamp(x, min=v)``): eager
reads it as the Python number it holds (only torch.tensor / as_tensor / asarray keep its dtype).
ember broke the graph there (EB0030, "a NumPy scalar passed to torch.zeros()"), and read a NumPy
argument passed to a method as a constant (a recompile per value); torch.compile keeps NumPy scalar
arguments unspecialized: one graph, fullgraph, for every value (lowering.numbers_of_numpy_scalars)."""
import numpy as np
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

INT_PROGRAMS = {
    "zeros": lambda x, n: x.sum() + torch.zeros(n).sum(),
    "ones_tuple": lambda x, n: torch.ones((n, 2)) * x[:2],
    "new_ones": lambda x, n: x.new_ones(n) + x.sum(),
    "arange": lambda x, n: torch.arange(n) * x.sum(),
    "view": lambda x, n: x.view(n, -1).sum(1),
    "eye": lambda x, n: torch.eye(n) * x.sum(),
    "full_size": lambda x, n: torch.full((n,), 2.0) + x.mean(),
    "mul": lambda x, n: torch.mul(x, n) + torch.clamp(x, max=n),
}

FLOAT_PROGRAMS = {
    "mul": lambda x, v: torch.mul(x, v),
    "clamp": lambda x, v: torch.clamp(x, min=v),
    "where": lambda x, v: torch.where(x > 0, v, x),
    "full_fill": lambda x, v: torch.full((12,), v) + x,
    "float_of": lambda x, v: x * float(v),
    "new_full": lambda x, v: x.new_full((2,), v).sum() + x,
}


@pytest.mark.parametrize("name", sorted(INT_PROGRAMS))
@pytest.mark.parametrize("np_type", [np.int64, np.int32])
def test_numpy_int_argument_to_a_torch_function_is_one_graph(name, np_type):
    fn = INT_PROGRAMS[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, fullgraph=True)
    for v in (2, 3, 4, 6):
        x = torch.arange(12.) - 5
        assert_same(compiled(x, np_type(v)), fn(x, np_type(v)))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("name", sorted(FLOAT_PROGRAMS))
@pytest.mark.parametrize("np_type", [np.float64, np.float32])
def test_numpy_float_argument_to_a_torch_function_is_one_graph(name, np_type):
    if REFERENCE and (name, np_type) == ("new_full", np.float32):
        pytest.skip("torch.compile 2.13 fails x.new_full((2,), np.float32(v)) (PendingUnbackedSymbolNotFound)")
    fn = FLOAT_PROGRAMS[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, fullgraph=True)
    for v in (0.5, 1.25, -2.0, 3.75):
        x = torch.arange(12.) - 5
        assert_same(compiled(x, np_type(v)), fn(x, np_type(v)))
    assert cnt.frame_count == 1


def test_numpy_int_argument_stays_right_at_zero_one_and_in_a_branch():
    def fn(x, n):
        y = torch.zeros(n) + 1
        if n > 3:
            return y * 2
        return y
    compiled = compile(fn, backend=CompileCounter())
    for v in (0, 1, 2, 5, 7, 1, 3):
        assert_same(compiled(torch.ones(1), np.int64(v)), fn(torch.ones(1), np.int64(v)))


N_GLOBAL = np.int64(3)
F_GLOBAL = np.float32(1.5)
H_GLOBAL = np.float16(2.5)


def test_numpy_constants_in_factories_and_torch_tensor_keep_eager_dtypes():
    def fn(x):
        return (x + torch.full((3,), F_GLOBAL) + torch.zeros(N_GLOBAL) + torch.arange(N_GLOBAL),
                torch.tensor(F_GLOBAL), torch.tensor(H_GLOBAL), torch.as_tensor(N_GLOBAL),
                torch.tensor(N_GLOBAL, dtype=torch.float64))
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, fullgraph=True)
    out, expected = compiled(torch.ones(3)), fn(torch.ones(3))
    assert_same(out, expected)
    assert [t.dtype for t in out] == [torch.float32, torch.float32, torch.float16, torch.int64, torch.float64]
    assert cnt.frame_count == 1


def test_torch_tensor_of_a_numpy_argument_keeps_its_dtype():
    def fn(x, v):
        t = torch.tensor(v)
        return x * t, t.dtype
    compiled = compile(fn, backend=CompileCounter())
    for v in (0.5, 1.25):
        x = torch.ones(3, dtype=torch.float16)
        assert_same(compiled(x, np.float16(v)), fn(x, np.float16(v)))
