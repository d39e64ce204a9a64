"""A tensor's dimension marks (``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_static``) are
guarded as torch.compile guards them: each kind of mark a call's tensor carries must have been on
the tensor the graph was compiled for, with no dimension added. ember used to guard only "the
``mark_dynamic`` dimensions are symbols of the graph", so a ``mark_static`` tensor ran in a graph
that had made that dimension a symbol (automatic dynamic shapes), and a first
``maybe_mark_dynamic`` / ``mark_static`` on a tensor reused the unmarked graph: fewer graphs than
torch.compile, and ``mark_static``'s request ignored."""
import pytest
import torch
import torch._dynamo

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


def _tensor(n, mark):
    t = torch.randn(n, 3)
    if mark == "static":
        torch._dynamo.mark_static(t, 0)
    elif mark == "dynamic":
        torch._dynamo.mark_dynamic(t, 0)
    elif mark == "maybe":
        torch._dynamo.maybe_mark_dynamic(t, 0)
    return t


def scaled_sum(x):
    return x.sum(0) * x.shape[0]


# (size, mark) per call, and the graph count after each call (torch.compile's)
@pytest.mark.parametrize("calls, counts", [
    # mark_static on a tensor whose graph has dim 0 dynamic: a static graph for it
    ([(4, ""), (5, ""), (6, "static"), (7, ""), (8, "static")], [1, 2, 3, 3, 4]),
    # a first mark of any kind on a tensor whose graph was compiled unmarked recompiles
    ([(4, ""), (4, ""), (4, "static")], [1, 1, 2]),
    ([(4, ""), (4, "maybe"), (5, "")], [1, 2, 2]),
    ([(4, ""), (5, ""), (7, "dynamic")], [1, 2, 3]),
    # a kind of mark the compiled tensor had, absent now, fits; the same marks fit
    ([(4, "maybe"), (8, "maybe"), (5, "")], [1, 1, 1]),
    ([(4, "dynamic"), (5, ""), (6, "dynamic")], [1, 1, 1]),
    # a kind of mark the compiled tensor did not have does not
    ([(4, "maybe"), (4, "dynamic"), (7, "dynamic")], [1, 2, 2]),
    ([(4, "dynamic"), (7, "maybe"), (8, "static")], [1, 2, 3]),
])
def test_dimension_marks_recompile_as_torch(calls, counts):
    counter = CompileCounter()
    compiled = compile(scaled_sum, backend=counter)
    seen = []
    for n, mark in calls:
        x = _tensor(n, mark)
        assert_same(compiled(x), scaled_sum(x))
        seen.append(counter.frame_count)
    assert seen == counts


def test_mark_static_gets_a_static_graph():
    """The graph a ``mark_static`` tensor runs in has its size as a constant: no size input."""
    inputs = []

    def backend(gm, example_inputs):
        inputs.append([type(e).__name__ for e in example_inputs])
        return gm.forward

    compiled = compile(scaled_sum, backend=backend)
    for n, mark in [(4, ""), (5, ""), (6, "static")]:
        x = _tensor(n, mark)
        assert_same(compiled(x), scaled_sum(x))
    assert len(inputs) == 3 and inputs[-1] == ["Tensor"]


@pytest.mark.skipif(REFERENCE, reason="ember's recompile reason text (torch logs its own)")
def test_the_recompile_reason_names_the_new_mark():
    counter = CompileCounter()
    compiled = compile(scaled_sum, backend=counter)
    for n, mark in [(4, ""), (5, ""), (6, "static")]:
        compiled(_tensor(n, mark))
    reason = compiled._cache.recompile_reasons[-1]
    assert "dimension marks of L['x']: mark_dynamic within [0], no other marks" in reason, reason
    assert "(now: marks mark_static [0])" in reason, reason
