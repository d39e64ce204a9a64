"""Idioms of library code in forward that torch.compile captures in one graph: a stateless
``nn.Module`` built in the frame (HF's ``ACT2FN["silu"]`` builds one per call),
``dict.fromkeys``, ``functools.lru_cache``-wrapped helpers with constant arguments.
"""
import collections
import functools

import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, check_module_same, check_same, compile


class Act(nn.Module):
    def forward(self, x):
        return torch.nn.functional.silu(x)


class Scaled(nn.Module):
    def __init__(self, k, bias=0.0):
        super().__init__()
        self.k = k
        self.bias = bias

    def forward(self, x):
        return x * self.k + self.bias if self.training else x


class Registry(collections.OrderedDict):
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACTS = Registry({"silu": Act, "scaled": (Scaled, {"k": 2.0})})


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = ACTS["silu"](self.lin(x))
        y = ACTS["scaled"](y)
        return Scaled(3.0, bias=1.0)(y), isinstance(Act(), nn.Module)


def test_modules_built_in_forward():
    check_module_same(Model, torch.randn(2, 4, requires_grad=True), graphs=1, check_cache=True)


def test_stateful_module_built_in_frame_is_not_traced_but_correct():
    def fn(x):
        lin = nn.Linear(3, 3)  # parameters made per call: not modelled, runs eagerly
        return lin.weight.shape[0] + x
    x = torch.randn(3)
    torch.testing.assert_close(compile(fn, backend=CompileCounter())(x), fn(x))


def test_dict_fromkeys():
    def fn(x):
        a = dict.fromkeys(range(3))
        b = dict.fromkeys(["p", "q"], 1.5)
        c = collections.OrderedDict.fromkeys("ab", 0)
        a[1] = x
        return a, b, c, x * b["q"]
    check_same(fn, torch.randn(3))


def test_dict_fromkeys_wrong_arguments_raise_as_eager():
    def fn(x, n):
        try:
            dict.fromkeys(*range(n))
        except TypeError as e:
            return x + 1, str(e)
        return x, ""
    cf = compile(fn, fullgraph=True)
    for n in (0, 3):
        out, msg = cf(torch.ones(2), n)
        ref, ref_msg = fn(torch.ones(2), n)
        assert_same(out, ref)
        assert msg == ref_msg and msg


CALLS = []


@functools.lru_cache
def available(name):
    CALLS.append(name)
    return name.startswith("t")


def test_lru_cached_helper():
    def fn(x):
        if available("torch"):
            x = x + 1
        return x * 2 if not available("numpy") else x
    available.cache_clear()
    CALLS.clear()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), fn(x))
    assert CALLS == ["torch", "numpy"]  # the body ran once per argument, as with eager alone
    assert counter.frame_count == 1



class Base:
    pass


class Derived(Base):
    pass


def test_singledispatch_picks_the_implementation_in_one_graph():
    @functools.singledispatch
    def describe(v):
        return "other"

    @describe.register
    def _(v: int):
        return v * 2

    @describe.register(torch.Tensor)
    def _(v):
        return v + 1

    def fn(x, v, o):
        return describe(x), describe(v), describe("s"), describe(o), describe(True)
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x, 3, Derived()), fn(x, 3, Derived()))
    assert counter.frame_count == 1
    assert_same(compiled(x, 2.5, Derived()), fn(x, 2.5, Derived()))  # another type: recompiles
    describe.register(Base, lambda v: "base")  # registered after the compile: guarded
    assert_same(compiled(x, 3, Derived()), fn(x, 3, Derived()))
    assert compiled(x, 3, Derived())[3] == "base"
