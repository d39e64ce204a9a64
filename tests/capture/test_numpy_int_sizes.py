"""``int(n)`` of a NumPy integer argument used as a size (variables/numpy_arrays.symbolic_int_of_scalar):
a symbol from the first compile, read as ``int(n)`` on every call. torch.compile 2.13 keeps NumPy
scalar arguments unspecialized: one graph for every value; ember recompiled per value (3 graphs
for 3 values: a constant guarded by its bits)."""
import numpy as np
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

PROGRAMS = {
    "new_zeros": lambda x, n: x.new_zeros(int(n)) + 1,
    "slice": lambda x, n: x[: int(n)] * 2,
    "reshape": lambda x, n: x.reshape(int(n), -1).sum(0),
    "ones_plus": lambda x, n: torch.ones(int(n) + 1) * x.sum(),
    "narrow": lambda x, n: x.narrow(0, 0, int(n)).cos(),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("np_type", [np.int64, np.int32])
def test_int_of_numpy_scalar_is_one_graph(name, np_type):
    if REFERENCE and np_type is np.int32:
        pytest.skip("torch.compile 2.13 gives 0 or 2 graphs for np.int32 (1 for np.int64)")
    fn = PROGRAMS[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    x = torch.arange(12.)
    for v in (2, 3, 4, 6):
        assert_same(compiled(x, np_type(v)), fn(x, np_type(v)))
    assert cnt.frame_count == 1


def test_values_zero_and_one_and_a_branch_stay_right():
    def fn(x, n):
        k = int(n)
        if k > 3:
            return x[:k] * 2
        return x[:k] + 1
    compiled = compile(fn, backend=CompileCounter())
    x = torch.arange(8.)
    for v in (0, 1, 2, 5, 7, 1, 3):
        assert_same(compiled(x, np.int64(v)), fn(x, np.int64(v)))


def test_a_python_int_argument_is_unchanged():
    cnt = CompileCounter()
    fn = PROGRAMS["new_zeros"]
    compiled = compile(fn, backend=cnt)
    x = torch.ones(3)
    for v in (2, 3, 4):
        assert_same(compiled(x, v), fn(x, v))
    assert cnt.frame_count == 2  # (automatic dynamic after the first change, as torch.compile)


# A NumPy int used directly where Python reads its __index__: a slice bound was a constant
# guarded by its bits (4 graphs for 4 values; torch.compile: 1); a list index was a graph break.
DIRECT = {
    "slice_stop": (lambda x, n: x[:n] * 2, 1),
    "slice_start_stop": (lambda x, n: x[1:n].cos(), 1),
    "slice_step": (lambda x, n: x[::n] + 1, 1),
    "list_index": (lambda x, n: x * [1, 2, 3, 4, 5, 6, 7][n], 4),  # (specialised, as torch)
}


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_a_numpy_int_read_as_an_index(name):
    fn, graphs = DIRECT[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    x = torch.arange(12., requires_grad=True)
    for v in (2, 3, 4, 6):
        assert_same(compiled(x, np.int64(v)), fn(x, np.int64(v)))
    assert cnt.frame_count == graphs


def test_a_numpy_int_slice_bound_of_zero_and_one():
    fn = DIRECT["slice_stop"][0]
    compiled = compile(fn, backend=CompileCounter())
    x = torch.arange(8.)
    for v in (0, 1, 5, 1, 0, 8, 9):
        assert_same(compiled(x, np.int64(v)), fn(x, np.int64(v)))


def test_a_numpy_int_list_index_under_fullgraph():
    fn = DIRECT["list_index"][0]
    compiled = compile(fn, backend=CompileCounter(), fullgraph=True)
    x = torch.arange(4.)
    assert_same(compiled(x, np.int64(3)), fn(x, np.int64(3)))
