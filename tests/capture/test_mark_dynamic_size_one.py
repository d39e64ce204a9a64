"""``torch._dynamo.mark_dynamic(x, 0)`` on a dimension of size 0 or 1: the graph specialises it (as
torch.compile does: count 1, then a recompile for another size), but the entry's guard "the marked
dimensions are among the graph's symbolic ones" failed on the very call that compiled it — an
internal error ("fresh entry fails its own guards"), the frame eager from then on."""
import pytest
import torch
import torch._dynamo

import ember
from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


def _mark(t, how):
    if how == "mark_dynamic":
        torch._dynamo.mark_dynamic(t, 0)
    elif how == "maybe_mark_dynamic":
        torch._dynamo.maybe_mark_dynamic(t, 0)
    else:
        ember.mark_dynamic(t, 0)
    return t


@pytest.mark.parametrize("how", ["mark_dynamic", "maybe_mark_dynamic", "ember"])
@pytest.mark.parametrize("sizes,counts", [((1, 3, 4), (1, 2, 2)), ((0, 3, 5), (1, 2, 2)), ((3, 1, 4), (1, 2, 2)),
                                          ((1, 1), (1, 1))])
def test_marked_dimension_of_size_one_specialises(how, sizes, counts):
    if REFERENCE and how == "ember":
        pytest.skip("ember's own mark_dynamic")
    def fn(x):
        return x.sum(0) * 2 + x.shape[0]

    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    seen = []
    for n in sizes:
        x = _mark(torch.randn(n, 3), how)
        assert_same(compiled(x), fn(x))
        seen.append(cnt.frame_count)
    assert tuple(seen) == counts
