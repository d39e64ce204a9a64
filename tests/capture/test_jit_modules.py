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


def _scaled_sum(a, b):
    return a + b * 0.67


@pytest.mark.parametrize("which", ["script", "trace"])
def test_script_function_is_traced_through_its_python_original(which):
    # torch.jit.script / trace of a *function*: the trace follows the Python function TorchScript
    # was made from, so the call joins the graph (one frame, also under fullgraph)
    if which == "script":
        jit_fn = torch.jit.script(_scaled_sum)
    else:
        jit_fn = torch.jit.trace(_scaled_sum, (torch.zeros(4), torch.zeros(4)))

    def f(a, b):
        return jit_fn(a, b).relu() + 1

    counter = CompileCounter()
    compiled = ember.compile(f, backend=counter, fullgraph=True)
    a, b = torch.randn(4), torch.randn(4)
    assert_same(compiled(a, b), f(a, b))
    a2, b2 = torch.randn(4), torch.randn(4)
    assert_same(compiled(a2, b2), f(a2, b2))
    assert counter.frame_count == 1


def test_rebinding_a_script_function_recompiles():
    fns = [torch.jit.script(_scaled_sum), torch.jit.script(lambda_free_sub)]
    holder = {"fn": fns[0]}

    def f(a, b):
        return holder["fn"](a, b) * 2

    compiled = ember.compile(f, backend="eager")
    a, b = torch.randn(3), torch.randn(3)
    assert_same(compiled(a, b), f(a, b))
    holder["fn"] = fns[1]
    assert_same(compiled(a, b), f(a, b))


def lambda_free_sub(a, b):
    return a - b


def test_compiling_a_script_function_and_passing_one_on():
    # compiled directly, and handed to an opaque call: the value stays the ScriptFunction
    jit_fn = torch.jit.script(_scaled_sum)
    a, b = torch.randn(3), torch.randn(3)
    assert_same(ember.compile(jit_fn, backend="eager")(a, b), jit_fn(a, b))

    def f(a, b):
        return torch._C.ScriptFunction.__call__(jit_fn, a, b) + 1, jit_fn

    got, fn_back = ember.compile(f, backend="eager")(a, b)
    assert fn_back is jit_fn
    assert_same(got, f(a, b)[0])
