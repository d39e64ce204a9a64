"""A resume function whose compilation raises to the caller (strict mode, as every test runs; a
backend error): the ``with`` blocks the break cut in two are closed before the error propagates,
as eager closes them on an exception (ember/capture/cache.py, ResumeFrameCache._add_entry).
Before the fix an autocast block stayed entered after the error, and every later test in the
process computed in bfloat16."""
import pytest
import torch

import ember


class _FailOnGraph:
    """A backend whose n-th graph fails to compile (the resume function's graph here)."""

    def __init__(self, fail_at):
        self.fail_at, self.graphs = fail_at, 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        if self.graphs == self.fail_at:
            raise RuntimeError("backend refuses this graph")
        return gm.forward


def _lin():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 4)


def _global_state():
    return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), torch.is_grad_enabled())


def _autocast_block(lin):
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = lin(x)
            print("", end="")  # graph break inside the block
            return lin(y)
    return fn


def _nested_blocks(lin):
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with torch.no_grad():
                y = lin(x)
                print("", end="")
                z = lin(y)
            return z + 1
    return fn


def _no_grad_block(lin):
    def fn(x):
        with torch.no_grad():
            y = lin(x)
            print("", end="")
            return lin(y) * 2
    return fn


@pytest.mark.parametrize("make", [_autocast_block, _nested_blocks, _no_grad_block])
def test_a_resume_compile_error_leaves_the_with_blocks(make):
    ember.reset()
    lin = _lin()
    fn = make(lin)
    before = _global_state()
    backend = _FailOnGraph(fail_at=2)
    with ember.config.patch(strict=True):
        with pytest.raises(Exception, match="backend refuses this graph"):
            ember.compile(fn, backend=backend)(torch.randn(2, 4))
    assert backend.graphs == 2  # the failure was the resume function's graph, after the break
    assert _global_state() == before
    # and what runs next computes as in eager
    x = torch.randn(2, 4)
    assert lin(x).dtype == torch.float32 and lin(x).requires_grad


@pytest.mark.parametrize("make", [_autocast_block, _nested_blocks, _no_grad_block])
def test_a_resume_that_compiles_still_matches_eager(make):
    ember.reset()
    lin = _lin()
    fn = make(lin)
    x = torch.randn(2, 4)
    expected, actual = fn(x), ember.compile(fn, backend="eager")(x)
    assert actual.dtype == expected.dtype and actual.requires_grad == expected.requires_grad
    torch.testing.assert_close(actual, expected)
    assert _global_state() == (False, torch.get_autocast_dtype("cpu"), True)
