"""``x.storage_offset()`` of an input (variables/tensor._input_storage_offset): read from the input on
every call, guarded only where the trace uses the number, a symbol once it changed between
compiles. torch.compile 2.13 breaks at the call and passes the offset on as an int: 1 graph when
the offset is only returned, 2 when arithmetic uses it; ember guarded every input's offset (a
graph per offset)."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile

BASE = torch.arange(20.)


def _run(fn, views):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for v in views:
        assert_same(compiled(v), fn(v))
    return cnt.frame_count


VIEWS = [BASE[i:i + 3] for i in (0, 2, 4, 6)]


def test_returned_offset_is_one_graph():
    assert _run(lambda x: (x * 2, x.storage_offset()), VIEWS) == 1


def test_offset_in_arithmetic_is_dynamic_after_a_change():
    assert _run(lambda x: x * x.storage_offset(), VIEWS) == 2


@pytest.mark.parametrize("fn", [
    lambda x: (x[1:] * 2, x[1:].storage_offset()),                       # a view made in the frame
    lambda x: torch.as_strided(x, (2,), (1,), x.storage_offset() + 1),   # the offset given back to an op
    lambda x: (x.t_() if x.dim() == 2 else x.unsqueeze_(0), x.storage_offset())[1] + 0,  # written first
    lambda x: x.sum() if x.storage_offset() > 3 else x.prod(),           # a branch on it
], ids=["view", "as_strided", "after_inplace", "branch"])
def test_other_reads_stay_right(fn):
    _run(fn, [BASE.clone()[i:i + 3] for i in (0, 2, 4, 6)])
