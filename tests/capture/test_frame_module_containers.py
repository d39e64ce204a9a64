"""``nn.Sequential`` / ``nn.ModuleList`` / ``nn.ModuleDict`` of torch's stateless modules built inside
the compiled function (constructors.py ``_stateless_container``): one graph, as torch.compile 2.13
(was a graph break at the construction, EB0042: 2 graphs). Changing such a container breaks the
graph (its state is not modelled) and must never be lost; one that escapes is a new object per call."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same


def sequential(x):
    y = x.sin()
    m = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())
    return m(y), len(m)


def module_list(x):
    y = x.sin()
    ms = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Sigmoid()])
    for m in ms:
        y = m(y)
    return y, ms[1](x)


def module_dict(x):
    y = x.sin()
    md = torch.nn.ModuleDict({"a": torch.nn.ReLU(), "b": torch.nn.Tanh()})
    return md["a"](y) + md["b"](y), list(md.keys())


def nested(x):
    y = x.sin()
    m = torch.nn.Sequential(torch.nn.Sequential(torch.nn.ReLU()), torch.nn.GELU(), torch.nn.Softmax(dim=-1))
    return m(y), m[0][0](y), m[-1](y)


# (program, graphs over three calls: torch.compile's count)
CASES = [(sequential, 1), (module_list, 1), (module_dict, 1), (nested, 1)]


@pytest.mark.parametrize("fn,graphs", CASES, ids=[c[0].__name__ for c in CASES])
def test_stateless_container_built_in_frame(fn, graphs):
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    for _ in range(3):
        x = torch.randn(4, requires_grad=True)
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == graphs
    assert ember.stats()["graph_breaks"] == 0


def appended(x):
    y = x.sin()
    ms = torch.nn.ModuleList([torch.nn.ReLU()])
    ms.append(torch.nn.Sigmoid())  # (a break: the container's state is not modelled)
    for m in ms:
        y = m(y)
    return y, len(ms)


def evaluated(x):
    m = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Dropout(0.5))
    m.eval()
    return m(x), m.training, m[1].training


def added_module(x):
    m = torch.nn.Sequential(torch.nn.ReLU())
    m.add_module("extra", torch.nn.Tanh())
    return m(x), len(m)


@pytest.mark.parametrize("fn", [appended, evaluated, added_module])
def test_changing_a_container_built_in_frame_is_not_lost(fn):
    compiled = ember.compile(fn, backend="eager")
    for _ in range(2):
        x = torch.randn(4)
        assert_same(compiled(x), fn(x))


def test_an_escaping_container_is_new_each_call():
    def fn(x):
        m = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Dropout(0.25))
        return m(x), m, m[1]
    compiled = ember.compile(fn, backend="eager")
    x = torch.randn(4)
    a, b = compiled(x), compiled(x)
    assert type(a[1]) is torch.nn.Sequential and len(a[1]) == 2 and a[1][1].p == 0.25
    assert a[1] is not b[1] and a[2] is a[1][1] and a[2] is not b[2]
    a[1].eval()  # (the caller's object: the next call's is a fresh one, in training mode)
    assert compiled(x)[1].training


def test_container_with_parameters_still_breaks():
    def fn(x):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 4))
        return m(x)
    compiled = ember.compile(fn, backend="eager")
    x = torch.randn(4)
    assert_same(compiled(x), fn(x))
    assert ember.stats()["graph_breaks"] >= 1
