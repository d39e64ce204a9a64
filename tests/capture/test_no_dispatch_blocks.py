"""A `with no_dispatch():` block in a compiled function (torch's own utility: Python dispatch off,
as torch's internals use it): the frame breaks at the `with`, and the resume function, called
inside the block, was compiled there: making fake tensors under no_dispatch fails (an internal
error, a warning, the resume function eager from then on). A frame called while Python dispatch is
off now runs as it is, without a compile attempt; the code before the block stays compiled."""
import warnings

import pytest
import torch
from torch.utils._mode_utils import no_dispatch

from ember_test_helpers import REFERENCE, CompileCounter, compile

pytestmark = pytest.mark.skipif(REFERENCE, reason="checks ember's own internal-error warning")


def _with_block(x):
    y = x.sin()
    with no_dispatch():
        z = y + 1
    return z * 2


def _called_inside(x):
    return x.cos() + 1


def test_no_dispatch_block_in_frame():
    cnt = CompileCounter()
    cf = compile(_with_block, backend=cnt)
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            torch.testing.assert_close(cf(x), _with_block(x))
    assert not [w for w in caught if "internal error" in str(w.message)]
    assert cnt.frame_count >= 1  # the code before the block


def test_compiled_function_called_under_no_dispatch():
    cnt = CompileCounter()
    cf = compile(_called_inside, backend=cnt)
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with no_dispatch():
            got = cf(x)
        torch.testing.assert_close(got, _called_inside(x))
        torch.testing.assert_close(cf(x), _called_inside(x))  # compiled outside the block
    assert not [w for w in caught if "internal error" in str(w.message)]
    assert cnt.frame_count == 1
