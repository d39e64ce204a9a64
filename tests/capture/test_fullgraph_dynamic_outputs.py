"""Under ``fullgraph=True`` an op whose output size depends on data is traced with an unbacked
size, as torch.compile does (its ShapeEnv allows dynamic output shapes for one-graph traces): a
graph break there could only be an error. Without fullgraph it stays a graph break unless
``config.capture_dynamic_output_shape_ops`` is set.
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, UNSUPPORTED, CompileCounter, assert_same, check_same, compile


def mask_index_sum(a, b):
    return a[a > 0].sum() + b


def bool_list_index(a):
    return a[[True, False] * 5][:2] * 2


def nonzero_and_masked_select(a):
    idx = torch.nonzero(a > 0.5)
    return idx.shape[0] * 0 + torch.masked_select(a, a < 0).sum() + a[idx[:, 0], idx[:, 1]].sum()


def unique_count(a):
    u = torch.unique((a * 2).round())
    return u.sum(), u.numel() >= 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fullgraph_mask_index(backend):
    cnt = CompileCounter()
    c = compile(mask_index_sum, backend=cnt if backend == "eager" else "aot_eager", fullgraph=True)
    for _ in range(2):
        x, y = torch.randn(10, 10, requires_grad=True), torch.randn(10, 10, requires_grad=True)
        xe, ye = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        out, ref = c(x, y), mask_index_sum(xe, ye)
        assert_same(out, ref)
        out.sum().backward(); ref.sum().backward()
        assert_same((x.grad, y.grad), (xe.grad, ye.grad))
    if backend == "eager":
        assert cnt.frame_count == 1


def test_fullgraph_bool_list_index():
    check_same(bool_list_index, torch.randn(10, 10, requires_grad=True))


def test_fullgraph_nonzero_masked_select():
    check_same(nonzero_and_masked_select, torch.randn(10, 10, requires_grad=True))


def test_fullgraph_unique():
    check_same(unique_count, torch.randn(10, 10))


@pytest.mark.skipif(REFERENCE, reason="ember's own default: a graph break without fullgraph (Dynamo's too)")
def test_without_fullgraph_still_breaks():
    cnt = CompileCounter()
    c = compile(mask_index_sum, backend=cnt)
    a, b = torch.randn(10, 10), torch.randn(10, 10)
    assert_same(c(a, b), mask_index_sum(a, b))
    assert cnt.frame_count == 2  # (a > 0) in one graph, the sum in the resumed one


def sliced_selection_plus_rows(a):
    # the sum's sizes need Min(2, u0) == 2: a runtime assert built from the unbacked size
    return a[a[:, 0] > 0][:2] + a[:2]


def test_runtime_assert_over_a_sliced_unbacked_size():
    # building that assert's expression called torch.sym_min on fx proxies with __torch_function__
    # off (the trace's setting): an internal error, the frame ran eagerly (strict: raised)
    a = torch.randn(10, 10)
    a[:, 0] = torch.arange(10.)  # 9 rows selected
    check_same(sliced_selection_plus_rows, a)
    check_same(bool_list_then_rows, torch.randn(10, 10))


def bool_list_then_rows(a):
    return a[[True] * 10][:2] + a[:2]


@pytest.mark.skipif(REFERENCE, reason="torch.compile raises its runtime assertion's message, not eager's error")
def test_runtime_assert_fails_as_eager_raises():
    from ember_test_helpers import check_raises_same
    a = torch.randn(10, 10)
    a[:, 0] = -1.0
    a[3, 0] = 1.0  # one row selected: (1, 10) + (2, 10) broadcasts in eager, 0 rows would not
    check_same(sliced_selection_plus_rows, a)
    a[3, 0] = -1.0  # none selected: eager's error
    check_raises_same(sliced_selection_plus_rows, a, fullgraph=True)
