"""Writes that eager hides from autograd stay hidden: through ``Tensor.data``, and batch norm's
running statistics.

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

Batch norm in training mode updates ``running_mean`` / ``running_var`` inside its kernel, without a
version bump either: a model run in eval mode (which saves the running stats for its backward) and
then in train mode still backpropagates through the eval call in eager. Those updates are marked
hidden after each such call (``F.batch_norm``, ``torch.batch_norm``, ``F.instance_norm``).
"""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch._subclasses.functional_tensor import FunctionalTensor

_GET_DATA = torch._C._autograd._get_data_attr

# call target -> (position of `training`, positions of the running stats), keywords as in the signature
_RUNNING_STATS = {
    torch.nn.functional.batch_norm: ((5, "training"), ((1, "running_mean"), (2, "running_var"))),
    torch.batch_norm: ((5, "training"), ((3, "running_mean"), (4, "running_var"))),
    torch.nn.functional.instance_norm: ((5, "use_input_stats"), ((1, "running_mean"), (2, "running_var"))),
}


def _argument(n: torch.fx.Node, env: dict, at: tuple):
    i, name = at
    a = n.args[i] if i < len(n.args) else n.kwargs.get(name)
    return env.get(a) if isinstance(a, torch.fx.Node) else a


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
        if n.op == "call_function" and n.target in _RUNNING_STATS:
            training, stats = _RUNNING_STATS[n.target]
            if _argument(n, env, training) is True:
                for at in stats:
                    t = _argument(n, env, at)
                    if isinstance(t, FunctionalTensor):
                        torch._functionalize_mark_mutation_hidden_from_autograd(t.elem)
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
