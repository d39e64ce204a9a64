"""A data-dependent ``a and b`` / ``a or b`` used as a value (3.11's JUMP_IF_FALSE_OR_POP /
JUMP_IF_TRUE_OR_POP) breaks the graph and both ways on resume compiled, as a branch does.

Found with PyTorch's test_subgraphs (test_control_flow4/5): the break ran the rest of the frame
eagerly (one graph where torch.compile makes more), so what followed was never compiled. The jump
keeps the tested value on the stack for its target, the fallthrough drops it.
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile


def and_value(a, b):
    tmp = a.sum() > b.sum() and a.sum() > 0
    if tmp:
        return a * 2, tmp
    return b - 1, tmp


def or_value(a, b):
    tmp = a.sum() > b.sum() or b.mean()
    return a + 1, tmp


def and_in_call_args(a, b):
    # a pending call below the break on the stack (NULL + callable)
    return torch.add(a, (a.sum() > 0 and b).float() * 3)


def and_keeps_tensor(a, b):
    # the jump target receives the tested tensor itself
    c = a.mean() > 10
    out = c and b
    return out, out is c


def chained(a, b):
    v = a.sum() > 0 and b.sum() > 0 and a.max()
    w = a.sum() < 0 or b.sum() < 0 or b.min()
    return a * 2 + 1, v, w


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, generator=g), torch.randn(4, generator=g)) for _ in range(6)] + [
        (torch.ones(4), -torch.ones(4)), (-torch.ones(4), torch.ones(4)), (torch.ones(4), torch.ones(4)),
        (-torch.ones(4), -torch.ones(4))]


def _same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor), (a, b)
        torch.testing.assert_close(a, b)
        assert a.dtype == b.dtype
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("fn", [and_value, or_value, and_in_call_args, and_keeps_tensor, chained])
def test_and_or_value_matches_eager(fn):
    compiled = compile(fn, backend=CompileCounter())
    for a, b in _inputs():
        _same(compiled(a.clone(), b.clone()), fn(a.clone(), b.clone()))


@pytest.mark.skipif(REFERENCE, reason="ember resumes after the break (counts differ from torch's empty graphs)")
def test_and_value_resumes_compiled():
    counter = CompileCounter()
    compiled = compile(and_value, backend=counter)
    a, b = torch.ones(4), -torch.ones(4)  # both sides true: the fallthrough and the `if`
    compiled(a, b)
    # the graph before the break, and the second comparison after it (compiled, not eager)
    assert counter.frame_count >= 2
    assert any(torch.ops.aten.gt.Scalar in [getattr(n.target, "default", n.target) for n in g.graph.nodes]
               or any("gt" in str(n.target) for n in g.graph.nodes) for g in counter.graphs[1:])
