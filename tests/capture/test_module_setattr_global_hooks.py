"""Module attribute writes through a class's own ``__setattr__`` / a property setter, listings with a
``prefix``, and global module hooks (``register_module_forward_hook``): each compared with eager.

Before: a module's own ``__setattr__`` was skipped while tracing (the trace read back the raw
value: a wrong answer), and a global hook registered after the first call never ran in the
compiled code (no guard on the global hook dicts: a wrong answer).
"""
import copy

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, check_module_same, compile, reset

mm = torch.nn.modules.module


class CountingSetattr(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.count = 0  # stored as 1 (0 * 2 + 1)

    def __setattr__(self, name, value):
        if name == "count":
            value = value * 2 + 1
        super().__setattr__(name, value)

    def forward(self, x):
        self.count = self.count + 1
        return self.lin(x) * self.count


class ExplicitModuleSetattr(nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __setattr__(self, name, value):
        if name == "count":
            value = value + 10
        nn.Module.__setattr__(self, name, value)

    def forward(self, x):
        self.count = self.count + 1
        self.total = x.sum()
        return x * self.count + self.total


class ObjectSetattr(nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __setattr__(self, name, value):
        if name == "count":
            object.__setattr__(self, name, value * 3)
        else:
            super().__setattr__(name, value)

    def forward(self, x):
        self.count = self.count + 1
        return x * self.count


class PropertySetter(nn.Module):
    def __init__(self):
        super().__init__()
        self._scale = 1.0

    @property
    def scale(self):
        return self._scale * 2

    @scale.setter
    def scale(self, v):
        self._scale = v + 1

    def forward(self, x):
        self.scale = 3.0
        return x * self.scale


@pytest.mark.parametrize("cls", [CountingSetattr, ExplicitModuleSetattr, ObjectSetattr, PropertySetter])
def test_module_own_setattr_runs_while_tracing(cls):
    torch.manual_seed(0)
    eager = cls()
    comp = copy.deepcopy(eager)
    compiled = compile(comp, backend=CompileCounter())
    for _ in range(3):
        x = torch.randn(3, 4)
        assert_same(compiled(x), eager(x))
        for name in ("count", "_scale", "total"):  # the state each class's writes leave behind
            assert_same(comp.__dict__.get(name), eager.__dict__.get(name), name)


def test_named_buffers_with_prefix():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("b", torch.ones(4))
            self.register_buffer("nb", torch.full((4,), 2.0), persistent=False)

        def forward(self, x):
            bufs = dict(self.named_buffers(prefix="pre"))
            params = dict(self.named_parameters(prefix="p"))
            return self.lin(x) + bufs["pre.nb"] + bufs["pre.b"] + params["p.lin.bias"], sorted(bufs)

    check_module_same(M, torch.randn(3, 4), graphs=1, check_cache=True)


def _run_with_global_hook_added_later(register):
    """Call the compiled function, register a global hook, call again, remove it, call again."""
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    comp = copy.deepcopy(eager)
    counter = CompileCounter()
    compiled = compile(lambda x: comp(x), backend=counter)
    handles = []
    try:
        for step in range(3):
            if step == 1:
                handles.append(register())
            if step == 2:
                for h in handles:
                    h.remove()
            x = torch.randn(3, 4)
            assert_same(compiled(x), eager(x), f"step {step}")
    finally:
        for h in handles:
            h.remove()
    return counter


def test_global_forward_hook_registered_after_compiling():
    def hook(mod, args, out):
        return out * 2 if isinstance(mod, nn.Linear) else None
    counter = _run_with_global_hook_added_later(lambda: mm.register_module_forward_hook(hook))
    assert counter.frame_count == 2  # one graph without the hook, one with it (then the first again)


def test_global_forward_pre_hook_registered_after_compiling():
    def pre(mod, args):
        return (args[0] + 1,) if isinstance(mod, nn.Linear) else None
    counter = _run_with_global_hook_added_later(lambda: mm.register_module_forward_pre_hook(pre))
    assert counter.frame_count == 2


def test_global_backward_hook_registered_after_compiling():
    reset()
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    comp = copy.deepcopy(eager)
    compiled = compile(lambda x: comp(x), backend=CompileCounter())

    def hook(mod, grad_in, grad_out):
        return tuple(g * 2 if g is not None else None for g in grad_in)

    x = torch.randn(3, 4)
    compiled(x).sum().backward()
    eager(x).sum().backward()
    h = mm.register_module_full_backward_hook(hook)
    try:
        for m in (comp, eager):
            m.zero_grad()
        x = torch.randn(3, 4, requires_grad=True)
        compiled(x).sum().backward()
        eager(x).sum().backward()
    finally:
        h.remove()
    assert_same([p.grad for p in comp.parameters()], [p.grad for p in eager.parameters()])


def test_global_hooks_traced_in_call_order():
    order_e, order_c = [], []

    def make(order):
        def gpre(mod, args):
            order.append(("gpre", type(mod).__name__))
            return (args[0] * 2,)

        def gpost(mod, args, out):
            order.append(("gpost", type(mod).__name__))
            return out + 1
        return gpre, gpost

    torch.manual_seed(0)
    eager = nn.Linear(4, 4)
    comp = copy.deepcopy(eager)
    for m, order in ((eager, order_e), (comp, order_c)):
        m.register_forward_pre_hook(lambda mod, args, order=order: order.append(("pre",)) or (args[0] - 1,))
        m.register_forward_hook(lambda mod, args, out, order=order: order.append(("post",)) or out * 3)
    counter = CompileCounter()
    compiled = compile(comp, backend=counter, fullgraph=True)
    x = torch.randn(3, 4)
    gpre, gpost = make(order_e)
    hs = [mm.register_module_forward_pre_hook(gpre), mm.register_module_forward_hook(gpost)]
    try:
        expected = eager(x)
    finally:
        for h in hs:
            h.remove()
    gpre, gpost = make(order_c)
    hs = [mm.register_module_forward_pre_hook(gpre), mm.register_module_forward_hook(gpost)]
    try:
        actual = compiled(x)
    finally:
        for h in hs:
            h.remove()
    assert_same(actual, expected)
    assert order_c == order_e == [("gpre", "Linear"), ("pre",), ("gpost", "Linear"), ("post",)]
    assert counter.frame_count == 1
