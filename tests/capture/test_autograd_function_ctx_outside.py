"""``ctx.attr = <the program's own list or dict>`` in a traced ``autograd.Function``: eager's ctx holds
that very object, and ``backward`` reads what it holds when it runs. ember kept a copy taken while
tracing (a dict: the backward missed a change made between forward and backward, a wrong gradient) or
broke the graph (a list of modules: EB0046 "ctx.layers holds a list[module ...]")."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class Reversible(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, layers):
        for layer in layers:
            h = layer(h)
        ctx.layers = layers
        return h

    @staticmethod
    def backward(ctx, g):
        return g * len(ctx.layers), None


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [torch.nn.Linear(4, 4)]  # a plain list: not registered submodules

    def forward(self, x):
        return Reversible.apply(x, self.layers) + 1


def _run(mod, x):
    out = mod(x)
    out.sum().backward()
    grad, x.grad = x.grad, None
    return out, grad


def test_ctx_holds_the_programs_list_of_modules():
    torch.manual_seed(0)
    mod, x = Stack(), torch.randn(2, 4, requires_grad=True)
    cnt = CompileCounter()
    compiled = compile(mod, backend=cnt, fullgraph=True)
    for _ in range(2):
        out, grad = _run(compiled, x)
        ref, ref_grad = _run(mod, x)
        assert_same(out, ref)
        assert_same(grad, ref_grad)
    assert cnt.frame_count == 1


def test_backward_sees_the_list_as_it_is_then():
    """The list grows between forward and backward: eager's backward reads its new length."""
    torch.manual_seed(0)
    results = []
    for make in (lambda m: m, lambda m: compile(m, backend=CompileCounter(), fullgraph=True)):
        mod, x = Stack(), torch.randn(2, 4, requires_grad=True)
        out = make(mod)(x)
        mod.layers.append(torch.nn.Identity())
        out.sum().backward()
        results.append(x.grad)
    assert_same(results[1], results[0])
    assert_same(results[0], torch.full((2, 4), 2.0))


class ScaledByConfig(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        ctx.cfg = cfg
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.cfg["scale"] * len(ctx.cfg["sizes"]), None


class Configured(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = {"scale": 5.0, "sizes": [1, 2]}

    def forward(self, x):
        return ScaledByConfig.apply(x, self.cfg)


@pytest.mark.parametrize("change", ["value", "nested_list", "none"])
def test_backward_reads_the_programs_dict_when_it_runs(change):
    def run(make):
        mod, x = Configured(), torch.ones(3, requires_grad=True)
        out = make(mod)(x)
        if change == "value":
            mod.cfg["scale"] = 7.0
        elif change == "nested_list":
            mod.cfg["sizes"].append(3)
        out.sum().backward()
        return out, x.grad, mod.cfg
    ref = run(lambda m: m)
    cnt = CompileCounter()
    got = run(lambda m: compile(m, backend=cnt, fullgraph=True))
    for g, r in zip(got, ref):
        assert_same(g, r)
    assert cnt.frame_count == 1


def test_dict_changed_inside_the_frame_before_the_call():
    """The frame writes the dict before apply: the backward reads the written value, as in eager."""
    def f(x, cfg):
        cfg["scale"] = 3.0
        return ScaledByConfig.apply(x, cfg)

    def run(fn):
        cfg, x = {"scale": 1.0, "sizes": [1]}, torch.ones(2, requires_grad=True)
        fn(x, cfg).sum().backward()
        return x.grad, cfg
    ref = run(f)
    got = run(compile(f, backend=CompileCounter()))
    assert_same(got[0], ref[0])
    assert got[1] == ref[1]
