"""A backend of the program's own that raises. Under ``fullgraph=True`` ``BackendCompilerFailed``
reaches the caller, as torch.compile 2.13 raises it (ember used to warn and run the frame
eagerly). Without fullgraph the frame runs eagerly with one warning (torch.compile raises there
too, but a program's backend that checks its graph or inputs may see ember's differ from
torch.compile's; upstream test_inplace_unsqueeze_input is one). One of ember's or torch's own
backends failing stays an internal error (tests/test_safety_net.py)."""
import warnings

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


def test_backend_error_under_fullgraph_reaches_the_caller():
    CALLS.clear()
    compiled = ember.compile(one_graph, backend=raising_backend, fullgraph=True)
    with ember.config.patch(strict=False):
        for _ in range(2):  # (and again on the next call: nothing was cached)
            with pytest.raises(BackendCompilerFailed, match="ValueError: backend boom") as info:
                compiled(torch.randn(3))
            assert isinstance(info.value.__cause__, ValueError)
    assert len(CALLS) >= 2  # (the backend is tried again on each call)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [one_graph, break_first])
def test_backend_error_without_fullgraph_runs_eagerly(fn):
    compiled = ember.compile(fn, backend=raising_backend)
    x = torch.randn(3)
    with ember.config.patch(strict=False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(x)
    torch.testing.assert_close(out, fn(x))
    assert any("backend boom" in str(w.message) for w in caught)


def test_backend_error_under_fullgraph_with_break_is_unsupported():
    compiled = ember.compile(break_first, backend=raising_backend, fullgraph=True)
    with pytest.raises(ember.Unsupported):
        compiled(torch.randn(3))


def test_torch_backend_failing_on_embers_graph_runs_eagerly():
    # one of torch's backends (here one standing for it) failing on ember's graph is ember's
    # problem, not the program's: the frame runs eagerly with one warning, even under fullgraph
    def torch_side_backend(gm, example_inputs):
        raise ValueError("torch backend boom")
    torch_side_backend.__module__ = "torch._dynamo.backends.standin"
    compiled = ember.compile(one_graph, backend=torch_side_backend, fullgraph=True)
    x = torch.randn(3)
    with ember.config.patch(strict=False), pytest.warns(UserWarning, match="torch backend boom"):
        out = compiled(x)
    torch.testing.assert_close(out, one_graph(x))
