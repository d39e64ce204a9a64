"""A 0-d tensor where an op takes a Python number (a fill value, ``alpha=``, ``value=``).

Eager turns the tensor into a number inside the kernel. ``torch.full`` / ``new_full`` are
traced as ``empty(...).fill_(v)`` as torch.compile does (one graph, with and without
fullgraph); other ops whose fake kernel reads the value under fullgraph keep the node, the
value read at run time (torch.compile: one graph each, checked with EMBER_TEST_REFERENCE=torch).
A size made from the value (``torch.arange(t)`` of a float) stays Unsupported; before, an
internal PendingUnbackedSymbolNotFound escaped the fullgraph compile.
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, UNSUPPORTED, CompileCounter, check_same, compile

FILLS = [torch.tensor(True), torch.tensor(3), torch.tensor(2.5, dtype=torch.float64),
         torch.tensor(-1.25), torch.tensor(7, dtype=torch.uint8)]


@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("v", FILLS, ids=lambda v: str(v.dtype))
def test_full_with_a_tensor_fill_value(v, fullgraph):
    check_same(lambda x, v: torch.full((2, 3), v) + x, torch.ones(3), v, fullgraph=fullgraph, graphs=1)


@pytest.mark.parametrize("v", FILLS, ids=lambda v: str(v.dtype))
def test_full_with_a_tensor_fill_value_and_a_dtype(v):
    check_same(lambda v: torch.full((4,), v, dtype=torch.float64), v, graphs=1)
    check_same(lambda v: torch.full(size=(4,), fill_value=v, dtype=torch.int32), v, graphs=1)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises PendingUnbackedSymbolNotFound for most of these "
                    "(new_full is not decomposed there)")
@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("base", [torch.ones(3), torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.bool)],
                         ids=lambda b: str(b.dtype))
@pytest.mark.parametrize("v", FILLS, ids=lambda v: str(v.dtype))
def test_new_full_with_a_tensor_fill_value(v, base, fullgraph):
    check_same(lambda x, v: x.new_full((2,), v), base, v, fullgraph=fullgraph, graphs=1)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises PendingUnbackedSymbolNotFound (new_full)")
def test_new_full_with_a_tensor_fill_value_and_a_dtype():
    check_same(lambda x, v: x.new_full((2,), v, dtype=torch.float64), torch.ones(3), torch.tensor(3), graphs=1)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 fills from the tensor and does not raise eager's TypeError")
def test_full_with_a_fill_value_that_requires_grad_raises_as_eager():
    v = torch.tensor(2., requires_grad=True)
    with pytest.raises(TypeError):
        torch.full((2,), v)
    with pytest.raises(TypeError):
        compile(lambda v: torch.full((2,), v), backend=CompileCounter())(v)


@pytest.mark.parametrize("v", [torch.tensor(3), torch.tensor(2.5, dtype=torch.float64)], ids=["int", "float"])
@pytest.mark.parametrize("op", [
    lambda x, v: torch.add(x, x, alpha=v),
    lambda x, v: x.add(x, alpha=v),
    lambda x, v: torch.full_like(x, v),
    lambda x, v: torch.addcmul(x, x, x, value=v),
    lambda x, v: torch.baddbmm(x.view(1, 3, 1), x.view(1, 3, 1), x.view(1, 1, 3)[..., :1], beta=v),
    lambda x, v: torch.nn.functional.threshold(x * 3, v, 0.),
    lambda x, v: x * int(v) + float(v),
], ids=["add", "Tensor.add", "full_like", "addcmul", "baddbmm", "threshold", "int_float"])
def test_ops_reading_a_scalar_from_a_tensor_under_fullgraph(op, v):
    check_same(op, torch.arange(3.), v, graphs=1)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 captures arange of a float tensor (an unbacked size)")
def test_a_size_from_a_float_tensors_value_is_unsupported_under_fullgraph():
    f = compile(lambda v: torch.arange(v) * 2, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(UNSUPPORTED, match="EB0019"):
        f(torch.tensor(2.5, dtype=torch.float64))


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises PendingUnbackedSymbolNotFound (new_full)")
def test_full_with_a_tensor_fill_value_under_aot_eager():
    f = compile(lambda x, v: (x.new_full((2,), v), torch.full((3,), v), torch.add(x, x, alpha=v)),
                backend="aot_eager", fullgraph=True)
    x, v = torch.ones(2), torch.tensor(1.5, dtype=torch.float64)
    out, ref = f(x, v), (x.new_full((2,), v), torch.full((3,), v), torch.add(x, x, alpha=v))
    for a, b in zip(out, ref):
        assert a.dtype == b.dtype and torch.equal(a, b)
