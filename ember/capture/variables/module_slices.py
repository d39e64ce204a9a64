"""Slices of container modules: ``self.seq[:2]``, ``self.layers[1:]``, ``self.params[::2]``.

In eager, slicing an ``nn.Sequential`` / ``nn.ModuleList`` / ``nn.ParameterList``
builds a new container of the same class holding the same members. The trace
keeps it as `ModuleSliceVariable`: the parent's tracker plus the selected keys,
so each member keeps its source (and its guards, and parameters stay graph
inputs). It iterates, indexes, slices again and measures like the container,
and calling a ``Sequential`` slice runs its members in order, as
``Sequential.forward`` does. If it escapes the frame it is rebuilt by slicing
the real parent again.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException


class ModuleSliceVariable(VariableTracker):
    def __init__(self, parent, keys: list, index: slice):
        self.parent = parent          # NNModuleVariable of the real container (or another slice)
        self.keys = list(keys)        # member keys of the real root container, in order
        self.index = index            # the slice applied to the parent (to rebuild it)

    @property
    def container_cls(self) -> type:
        return type(self.root().module)

    def root(self):
        return self.parent.root() if isinstance(self.parent, ModuleSliceVariable) else self.parent

    def python_type(self):
        return self.container_cls

    def describe(self):
        return f"{self.container_cls.__name__} slice {self.keys}"

    def truth(self, tx):
        return bool(self.keys)

    def members(self, tx) -> list:
        root = self.root()
        if issubclass(self.container_cls, torch.nn.ParameterList):
            return [root.call_method(tx, "__getitem__", [ConstantVariable(int(k))], {}) for k in self.keys]
        return [root.getattr(tx, k) for k in self.keys]

    def unpack(self, tx):
        return self.members(tx)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return ConstantVariable(len(self.keys))
        if name == "__getitem__":
            key = args[0].as_constant() if args[0].is_constant() else None
            if isinstance(key, slice):
                return ModuleSliceVariable(self, self.keys[key], key)
            if isinstance(key, int):
                if not -len(self.keys) <= key < len(self.keys):
                    raise PythonException(IndexError(f"index {key} is out of range"))
                return self.members(tx)[key]
            raise unsupported("EB0039", f"indexing {self.describe()} with {args[0].describe()}")
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx, name):
        if name in ("__len__", "__getitem__", "__iter__"):
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        raise unsupported("EB0031", f"attribute {name!r} of a {self.describe()}")

    def call(self, tx, args, kwargs):
        if not issubclass(self.container_cls, torch.nn.Sequential) or kwargs or len(args) != 1:
            raise unsupported("EB0033", f"calling a {self.describe()}")
        # Sequential.forward: each member on the previous one's output (no hooks on a fresh slice).
        value = args[0]
        for member in self.members(tx):
            value = member.call(tx, [value], {})
        return value

    def reconstruct(self, plan) -> str:
        from ember.capture.codegen import literal
        from ember.capture.sources import bind
        return f"{plan.expr(self.parent)}[{literal(self.index, plan.scope, bind)}]"


def slice_container(tx, module_vt, key: slice):
    """``container[key]`` for a Sequential / ModuleList / ParameterList tracker."""
    m = module_vt.module
    if isinstance(m, torch.nn.ParameterList):
        keys = [str(i) for i in range(len(m))][key]
    else:
        keys = list(m._modules)[key]
    return ModuleSliceVariable(module_vt, keys, key)
