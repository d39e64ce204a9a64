"""TorchScript modules (torch.jit.trace / torch.jit.script) called inside a compiled function, and
compiled themselves: a ScriptModule's class attribute ``forward`` raises when read from the class,
so ember reads it without running descriptors; the call runs as it is (a graph break) and the
answer is eager's — no internal error, no eager frame."""
import warnings

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import CompileCounter, assert_same


def _modules():
    torch.manual_seed(0)
    traced = torch.jit.trace(nn.Linear(3, 2), torch.randn(1, 3))
    scripted = torch.jit.script(nn.Sequential(nn.Linear(3, 3), nn.ReLU()))
    return traced, scripted


@pytest.mark.parametrize("which", ["traced", "scripted"])
def test_script_module_called_inside_a_compiled_function(which):
    traced, scripted = _modules()
    mod = traced if which == "traced" else scripted

    def f(x):
        return mod(x * 2) + 1

    counter = CompileCounter()
    x = torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = ember.compile(f, backend=counter)(x)
    assert not [w for w in caught if "ember" in str(w.message)]  # no "internal error ... eagerly"
    assert_same(got, f(x))
    assert counter.frame_count == 2  # x * 2, then + 1: the script call between them


@pytest.mark.parametrize("which", ["traced", "scripted"])
def test_compiling_a_script_module_runs_it(which):
    traced, scripted = _modules()
    mod = traced if which == "traced" else scripted
    x = torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = ember.compile(mod)
        assert_same(compiled(x), mod(x))
    assert not [w for w in caught if "ember" in str(w.message)]
