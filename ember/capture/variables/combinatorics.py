"""``itertools.product`` / ``combinations`` / ``combinations_with_replacement`` /
``permutations`` (and ``pairwise``, ``compress`` over containers) on traced values.

The first four read their inputs completely when constructed (CPython turns
them into tuples), so the trace does the same and enumerates *positions* with
the real itertools function: the items may be any trackers (tensors too), and
the result is an iterator over tuples of those trackers, in itertools' order.
``pairwise``, ``compress`` and ``accumulate`` (with no function or a builtin or torch one)
are lazy in CPython: they are modelled only over
containers (lists, tuples, constants), where reading ahead has no side effect.
"""
from __future__ import annotations

import itertools

from ember.capture.variables.base import is_none, VariableTracker, unsupported


def _items(tx, vt: VariableTracker) -> list:
    return vt.iter(tx).unpack(tx)


def _container(vt: VariableTracker) -> bool:
    from ember.capture.variables.containers import ListVariable, TupleVariable
    return isinstance(vt, (ListVariable, TupleVariable)) or (vt.is_constant() and isinstance(
        vt.as_constant(), (tuple, list, str, range, bytes)))


def construct_combinatoric(tx, cls, args: list, kwargs: dict):
    """The iterator for one of the modelled constructors, or None."""
    from ember.capture.variables.containers import IteratorVariable, TupleVariable
    const = {k: v.as_constant() for k, v in kwargs.items() if v.is_constant()}
    if len(const) != len(kwargs):
        return None
    if cls in (itertools.combinations, itertools.combinations_with_replacement, itertools.permutations):
        if not args or not all(a.is_constant() for a in args[1:]):
            return None
        pool = _items(tx, args[0])
        index_sets = cls(range(len(pool)), *[a.as_constant() for a in args[1:]], **const)
        return IteratorVariable([TupleVariable([pool[i] for i in idx]) for idx in index_sets])
    if cls is itertools.product:
        pools = [_items(tx, a) for a in args]
        index_sets = itertools.product(*[range(len(p)) for p in pools], **const)
        if const.get("repeat", 1) != 1:
            pools = pools * const["repeat"]
        return IteratorVariable([TupleVariable([pools[j][i] for j, i in enumerate(idx)]) for idx in index_sets])
    if cls is itertools.pairwise and len(args) == 1 and not kwargs and _container(args[0]):
        items = _items(tx, args[0])
        return IteratorVariable([TupleVariable([a, b]) for a, b in zip(items, items[1:])])
    if cls is itertools.compress and len(args) == 2 and not kwargs and _container(args[0]) \
            and _container(args[1]):
        selectors = _items(tx, args[1])
        if not all(s.is_constant() for s in selectors):
            raise unsupported("EB0036", "itertools.compress with non-constant selectors")
        return IteratorVariable([d for d, s in zip(_items(tx, args[0]), selectors) if s.as_constant()])
    if cls is itertools.accumulate and 1 <= len(args) <= 2 and set(kwargs) <= {"initial"} \
            and _container(args[0]) and (len(args) == 1 or _pure_function(args[1])):
        # (only a builtin or torch function: calling it ahead of time has no side effect to reorder)
        items = _items(tx, args[0])
        acc = kwargs.get("initial")
        out = [] if acc is None or is_none(acc) else [acc]
        acc = out[0] if out else None
        for item in items:
            if acc is None:
                acc = item
            elif len(args) == 2:
                acc = args[1].call(tx, [acc, item], {})
            else:
                import operator
                acc = tx.binary_op(operator.add, acc, item)
            out.append(acc)
        return IteratorVariable(out)
    return None


def _pure_function(vt: VariableTracker) -> bool:
    from ember.capture.variables.builtins import BuiltinVariable
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    return isinstance(vt, (BuiltinVariable, TorchFunctionVariable))
