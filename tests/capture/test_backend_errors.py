"""A backend of the program's own that raises: ``BackendCompilerFailed`` reaches the caller, with or
without fullgraph, at the first graph or at a resume function's (torch.compile 2.13 raises
torch._dynamo.exc.BackendCompilerFailed in each case; ember used to warn and run the frame
eagerly). One of ember's own backends failing stays an internal error (tests/test_safety_net.py)."""
import pytest
import torch

import ember
from ember.exc import BackendCompilerFailed

CALLS = []


def raising_backend(gm, example_inputs):
    CALLS.append(len(gm.graph.nodes))
    raise ValueError("backend boom")


def one_graph(x):
    return x.sin() + 1


def break_first(x):
    print("", end="")  # no graph before the break: the resume function's graph is the first
    return x.cos() * 2


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("fn", [one_graph, break_first])
def test_backend_error_reaches_the_caller(fn, fullgraph):
    if fn is break_first and fullgraph:
        pytest.skip("fullgraph refuses the break before any backend runs")
    CALLS.clear()
    compiled = ember.compile(fn, backend=raising_backend, fullgraph=fullgraph)
    for _ in range(2):  # (and again on the next call: nothing was cached)
        with pytest.raises(BackendCompilerFailed, match="ValueError: backend boom") as info:
            compiled(torch.randn(3))
        assert isinstance(info.value.__cause__, ValueError)
    assert len(CALLS) == 2
    assert torch.is_grad_enabled()


def test_backend_error_under_fullgraph_with_break_is_unsupported():
    compiled = ember.compile(break_first, backend=raising_backend, fullgraph=True)
    with pytest.raises(ember.Unsupported):
        compiled(torch.randn(3))


def test_torch_backend_failing_on_embers_graph_runs_eagerly():
    # one of torch's backends (here one standing for it) failing on ember's graph is ember's
    # problem, not the program's: the frame runs eagerly with one warning
    def torch_side_backend(gm, example_inputs):
        raise ValueError("torch backend boom")
    torch_side_backend.__module__ = "torch._dynamo.backends.standin"
    compiled = ember.compile(one_graph, backend=torch_side_backend)
    x = torch.randn(3)
    with ember.config.patch(strict=False), pytest.warns(UserWarning, match="torch backend boom"):
        out = compiled(x)
    torch.testing.assert_close(out, one_graph(x))
