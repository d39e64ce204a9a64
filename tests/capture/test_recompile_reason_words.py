"""A recompile reason for a tensor guard names the new tensor and its first difference in
torch.compile's words (``tensor 'x' dtype mismatch. expected Float, actual Double``), so logs and
searches written for torch.compile's recompile messages find ember's too."""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's recompile reasons (torch logs its own)")


def double(x):
    return x * 2


def reasons_for(inputs, **kwargs):
    counter = CompileCounter()
    compiled = compile(double, backend=counter, **kwargs)
    for x in inputs:
        assert_same(compiled(x), double(x))
    assert counter.frame_count == len(inputs)  # each call recompiled once
    return compiled._cache.recompile_reasons


@pytest.mark.parametrize("second, words", [
    (torch.ones(3, dtype=torch.float64), "tensor 'x' dtype mismatch. expected Float, actual Double"),
    (torch.ones(4), "tensor 'x' size mismatch at index 0. expected 3, actual 4"),
    (torch.ones(3, 2)[:, 0], "tensor 'x' stride mismatch at index 0. expected 1, actual 2"),
    (torch.ones(3, 3), "tensor 'x' rank mismatch. expected 1, actual 2"),
    (torch.ones(3, requires_grad=True), "tensor 'x' requires_grad mismatch. expected requires_grad=0"),
])
def test_a_tensor_guard_failure_says_what_differs(second, words):
    (reason,) = reasons_for([torch.ones(3), second], dynamic=False)
    assert words in reason, reason
    assert reason.startswith("L['x']: Tensor torch.float32 cpu size=[3] stride=[1] requires_grad=False (now: ")


def test_a_dynamic_input_names_its_rank_change():
    reasons = reasons_for([torch.ones(3), torch.ones(4), torch.ones(2, 2)])
    assert "tensor 'x' rank mismatch. expected 1, actual 2" in reasons[-1], reasons


@pytest.mark.parametrize("state, words", [
    ("grad", "torch.is_grad_enabled() is True (now: False)"),
    ("deterministic", "deterministic algorithms, cuBLAS reduced-precision flags, number of threads == (False, "),
])
def test_a_global_state_guard_failure_says_the_new_state(state, words):
    """The frame entry's global-state guards (grad mode, deterministic algorithms, autocast) name
    the state the call came in with, not only the one the graph was compiled for."""
    counter = CompileCounter()
    compiled = compile(double, backend=counter)
    compiled(torch.ones(3))
    try:
        if state == "grad":
            with torch.no_grad():
                assert_same(compiled(torch.ones(3)), double(torch.ones(3)))
        else:
            torch.use_deterministic_algorithms(True)
            assert_same(compiled(torch.ones(3)), double(torch.ones(3)))
    finally:
        torch.use_deterministic_algorithms(False)
    assert counter.frame_count == 2
    (reason,) = compiled._cache.recompile_reasons
    assert words in reason, reason
    assert "(now: " in reason and ("(now: (True, " in reason if state == "deterministic" else True), reason
