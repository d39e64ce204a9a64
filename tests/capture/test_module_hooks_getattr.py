"""Modules with hooks and custom ``__getattr__``, and ``getattr(obj, name, default)`` where a
Python ``__getattr__`` raises: each compiles into one graph (as torch.compile), matching eager.
"""
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, check_module_same, check_same, compile


def _pre_kwargs(mod, args, kwargs):
    kwargs = dict(kwargs)
    kwargs["scale"] = kwargs.get("scale", 1.0) * 3.0
    return (args[0] * 2,), kwargs


def _post_kwargs(mod, args, kwargs, out):
    return out + kwargs["scale"]


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


def _hooked():
    m = Scaled()
    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    m.register_forward_pre_hook(_pre_kwargs, with_kwargs=True)
    m.register_forward_hook(_post_kwargs, with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: out * 2)
    return m


def test_top_module_hooks_with_kwargs():
    check_module_same(_hooked, torch.randn(2, 4, requires_grad=True), scale=0.5, graphs=1, check_cache=True)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _hooked()

    def forward(self, x):
        return self.inner(x, scale=2.0).sum(-1)


def test_submodule_hooks_with_kwargs():
    check_module_same(Outer, torch.randn(2, 4, requires_grad=True), graphs=1, check_cache=True)


class Dynamic(nn.Module):
    """A module class with its own __getattr__ (computed attributes), deferring to Module's."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __getattr__(self, name):
        if name == "magic":
            return 3.0
        if name.startswith("alias_"):
            return getattr(self, name[len("alias_"):])
        return super().__getattr__(name)

    def forward(self, x):
        y = self.alias_lin(x) * self.magic
        return y + getattr(self, "missing", 1.0)


def test_module_custom_getattr():
    check_module_same(Dynamic, torch.randn(2, 4, requires_grad=True), graphs=1, check_cache=True)


class Raising:
    scale = 2.0

    def __getattr__(self, name):
        if name == "computed":
            return 5.0
        raise AttributeError(name)


OBJ = Raising()


def test_getattr_default_when_getattr_raises():
    def fn(x):
        a = getattr(OBJ, "absent", 0.5)
        b = hasattr(OBJ, "absent")
        return x * a + OBJ.computed + getattr(OBJ, "scale", 0.0), b
    check_same(fn, torch.randn(3))


def test_checkpoint_breaks_around_and_matches_eager():
    import torch.utils.checkpoint as cp

    class Ck(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            y = self.a(x).relu()
            y = cp.checkpoint(self.b, y, use_reentrant=False)
            return (y * 2).sum()
    check_module_same(Ck, torch.randn(2, 4, requires_grad=True), graphs=None, fullgraph=False)
