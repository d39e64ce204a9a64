"""Guards: identical inputs hit the cache; each changed assumption recompiles
exactly once and gives the right answer; the recompile limit falls back to eager."""
import sys

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import (IDENTITY_GRAPHS, REFERENCE, CompileCounter, assert_same, clone_inputs, collect_warnings, compile,
                     recompile_limit, stats)


def t(*shape, grad=False, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(grad)


SCALE = 2.0
USE_BIAS = True


def reads_globals(x):
    y = x * SCALE
    if USE_BIAS:
        y = y + 1
    return y


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 0.5
        self.flag = True

    def forward(self, x):
        y = self.lin(x) * self.scale
        return y.relu() if self.flag else y.tanh()


class Recorder:
    """Calls the compiled function and the eager one on copies, compares, and
    tracks how many graphs the backend has seen."""

    def __init__(self, fn, eager_fn=None, fullgraph=True, **compile_kwargs):
        self.counter = CompileCounter()
        self.eager_fn = eager_fn if eager_fn is not None else fn
        self.compiled = compile(fn, backend=self.counter, fullgraph=fullgraph, **compile_kwargs)

    def __call__(self, *args, **kwargs):
        expected = self.eager_fn(*clone_inputs(args), **clone_inputs(kwargs))
        actual = self.compiled(*clone_inputs(args), **clone_inputs(kwargs))
        assert_same(actual, expected)
        return actual

    @property
    def graphs(self):
        return self.counter.frame_count


def assert_recompiles(n):
    assert stats()["recompiles"] == n, stats()


def test_same_inputs_no_recompile():
    r = Recorder(lambda x, y: (x + y).sin())
    x, y = t(3, 4), t(3, 4, seed=1)
    for _ in range(4):
        r(x, y)
    assert r.graphs == 1
    assert stats()["graphs"] == 1
    assert_recompiles(0)


def test_same_inputs_different_values_no_recompile():
    r = Recorder(lambda x, n: x * n + x.sum())
    for seed in range(3):
        r(t(3, seed=seed), 4)
    assert r.graphs == 1
    assert_recompiles(0)


def test_global_variable_change(monkeypatch):
    r = Recorder(reads_globals)
    x = t(3)
    r(x)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
    out = r(x)
    torch.testing.assert_close(out, x * 3.0 + 1)
    assert r.graphs == 2
    assert_recompiles(1)
    r(x)  # the new value is cached
    assert r.graphs == 2


def test_global_bool_flag_change(monkeypatch):
    r = Recorder(reads_globals)
    x = t(3)
    r(x)
    monkeypatch.setattr(sys.modules[__name__], "USE_BIAS", False)
    torch.testing.assert_close(r(x), x * SCALE)
    assert r.graphs == 2
    assert_recompiles(1)


@pytest.mark.parametrize("attr,value", [("scale", 2.5), ("flag", False)])
def test_module_attribute_change(attr, value):
    torch.manual_seed(0)
    m = Scaled()
    cnt = CompileCounter()
    cm = compile(m, backend=cnt, fullgraph=True)
    x = t(2, 4)
    torch.testing.assert_close(cm(x), m(x))
    setattr(m, attr, value)
    torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 2
    assert_recompiles(1)
    torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 2


def test_module_training_flag_change():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    eager = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    eager.load_state_dict(m.state_dict())
    cnt = CompileCounter()
    cm = compile(m, backend=cnt, fullgraph=True)
    x = t(6, 4)
    torch.testing.assert_close(cm(x), eager(x))
    m.eval()
    eager.eval()
    torch.testing.assert_close(cm(x), eager(x))
    torch.testing.assert_close(m[1].running_mean, eager[1].running_mean)
    assert cnt.frame_count == 2
    assert_recompiles(1)


def test_closure_cell_value_change():
    scale = 2.0

    def f(x):
        return x * scale

    r = Recorder(f)
    x = t(3)
    r(x)
    scale = 5.0  # noqa: F841  (rebinds the cell f reads)
    torch.testing.assert_close(r(x), x * 5.0)
    assert r.graphs == 2
    assert_recompiles(1)


@pytest.mark.parametrize("first,second", [(2, 3), (1.5, -0.5), (True, False), ("add", "mul"), (None, 2)])
def test_python_scalar_argument_change(first, second):
    def f(x, s):
        if s is None:
            return x
        if isinstance(s, str):
            return x + 1 if s == "add" else x * 2
        return x * s + s

    r = Recorder(f)
    x = t(3)
    r(x, first)
    r(x, second)
    assert r.graphs == (1 + IDENTITY_GRAPHS if first is None else 2)
    assert_recompiles(1)


def test_tensor_shape_change():
    r = Recorder(lambda x: x.view(x.shape[0], -1).sum(1) * x.size(1))
    r(t(2, 3, 4))
    r(t(5, 3, 4))
    assert r.graphs == 2
    assert_recompiles(1)
    r(t(2, 3, 4))
    assert r.graphs == 2


def test_tensor_dtype_change():
    r = Recorder(lambda x: (x * 2).sum())
    r(t(3))
    r(t(3, dtype=torch.float64))
    assert r.graphs == 2
    assert_recompiles(1)


def test_tensor_requires_grad_change():
    r = Recorder(lambda x: x.sin() * 2)
    out = r(t(3))
    assert not out.requires_grad
    out = r(t(3, grad=True))
    assert out.requires_grad
    assert r.graphs == 2
    assert_recompiles(1)


def test_grad_mode_change():
    r = Recorder(lambda x, w: x @ w)
    x, w = t(2, 3), t(3, 2, grad=True)
    assert r(x, w).requires_grad
    with torch.no_grad():
        assert not r(x, w).requires_grad
    assert r.graphs == 2
    assert_recompiles(1)


def test_recompile_limit_falls_back_to_eager_and_warns_once():
    """Past the limit, every call still returns eager's answer and no further
    graphs are compiled; one warning names the recompile limit."""
    limit = 3
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
              torch.int16]

    def f(x):
        return x * 2 + 1

    # fullgraph=False: Dynamo turns hitting the limit into a hard error under fullgraph=True
    with recompile_limit(limit), collect_warnings() as messages:
        r = Recorder(f, fullgraph=False)
        for dt in dtypes:
            r(t(4, dtype=dt))
        for dt in dtypes:  # the cached ones still hit, the others still run eagerly
            r(t(4, dtype=dt))
    assert limit <= r.graphs <= limit + 1, r.graphs
    mentions = [m for m in messages if "recompile" in m.lower() and "limit" in m.lower()]
    assert len(mentions) == 1, messages


def test_independent_functions_do_not_share_cache_entries():
    a = Recorder(lambda x: x + 1)
    b = Recorder(lambda x: x - 1)
    a(t(2))
    b(t(2))
    a(t(2))
    assert a.graphs == 1 and b.graphs == 1
    assert_recompiles(0)
