"""Writes through ``Tensor.data`` are hidden from autograd, as in eager.

``p.data`` is an alias of ``p`` with a version counter of its own: ``p.data.add_(1)`` changes ``p``
without bumping ``p._version``, so what an earlier backward graph saved of ``p`` stays usable (eager
runs that backward with the new values). Functionalization sees such a write as an ordinary data
mutation of the input, and the epilogue's ``copy_`` would bump the version: the earlier backward
then failed its version check where eager succeeds. While the AOT layer traces, each in-place write
through a ``.data`` alias (or a view of one) is marked hidden from autograd; an input whose writes
are all hidden is then updated without a version bump (``InputInfo.mutations_hidden_from_autograd``).
A write to the input itself (``with torch.no_grad(): p.add_(1)``) still counts, as in eager.

    def f(p):                    # p: a leaf that requires grad
        p.data.mul_(0.9)         # hidden: p._version unchanged, p stays a leaf
        return p * 2
"""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch._subclasses.functional_tensor import FunctionalTensor

_GET_DATA = torch._C._autograd._get_data_attr


class DataWrites:
    """Follows one run of a user graph (see `ember.aot.errors.LocatingInterpreter`)."""

    def __init__(self):
        self._aliases: dict[int, torch.Tensor] = {}  # id -> alias (kept alive: ids stay unique)

    def _through_data(self, t: torch.Tensor) -> bool:
        root = t._base if t._is_view() else t
        return root is not None and self._aliases.get(id(root)) is root

    def after(self, n: torch.fx.Node, env: dict, result) -> None:
        if n.op not in ("call_function", "call_method") or not n.args:
            return
        if n.target is _GET_DATA:
            if isinstance(result, torch.Tensor):
                self._aliases[id(result)] = result
            return
        if not self._aliases or not isinstance(n.args[0], torch.fx.Node):
            return
        value = env.get(n.args[0])
        if not isinstance(value, FunctionalTensor):
            return
        writes = result is value or n.target is operator.setitem or n.target == "__setitem__"
        if writes and self._through_data(value):
            torch._functionalize_mark_mutation_hidden_from_autograd(value.elem)
