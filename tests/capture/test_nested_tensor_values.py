"""Strided nested tensors (``torch.nested.nested_tensor``) run eagerly, as sparse layouts do
(capture/builder.py, EB0022): their layout reads ``torch.strided`` but their sizes raise, so a
resume function given one, or a frame called with one, failed with an internal error (the frame
then ran eagerly with a warning)."""
import warnings

import pytest
import torch

import ember
from ember_test_helpers import REFERENCE, check_same, compile

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")


def _no_internal_error(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_same(fn, *args, graphs=None, fullgraph=False)
    assert not [w for w in caught if "internal error" in str(w.message)]


def test_nested_tensor_made_in_frame():
    def f(a, b):
        nt = torch.nested.nested_tensor([a * 2, b])
        return [t.sum() for t in nt.unbind()]

    _no_internal_error(f, torch.randn(2, 3), torch.randn(4, 3))


def test_nested_tensor_argument():
    def f(nt, x):
        return [t * 2 for t in nt.unbind()], nt.is_nested, x + 1

    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(1, 3)])
    x = torch.randn(3)
    (ref_parts, ref_flag, ref_x) = f(nt, x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (parts, flag, got_x) = compile(f)(nt, x)
    assert not [w for w in caught if "internal error" in str(w.message)]
    assert flag is ref_flag is True
    assert all(torch.equal(a, b) for a, b in zip(parts, ref_parts)) and torch.equal(got_x, ref_x)


def test_nested_tensor_is_a_break_with_reason():
    if REFERENCE:
        return  # ember's reason
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(1, 3)])
    explanation = ember.explain(lambda n: [t + 1 for t in n.unbind()])(nt)
    assert any("nested tensor" in str(r) for r in explanation.break_reasons)
