"""``torch.func.functional_call(module, params, args, kwargs)`` traced as the module's call.

Eager swaps the given tensors into the module (``nn.utils.stateless._reparametrize_module``),
calls it and swaps the originals back. Inlining that meant writing the module's parameters and
reading them back in one trace, which ember refuses (EB0032), so the call ran eagerly; torch.compile
2.13 makes one graph of it. ember calls the module with an override instead: while the call is
traced, reading a named parameter or buffer of a module in the tree (``self.weight``) gives the
tensor passed for it. Anything that could see the module's own tensors another way while the
override is on — its ``_parameters`` / ``_buffers`` / ``__dict__``, ``parameters()``,
``state_dict()`` and the like — breaks the graph at the call, which then runs eagerly; so do keys
that are not an existing parameter or buffer, tied weights, a tuple of dicts with a repeated key,
``strict=True`` with a missing key (eager raises), and values that are not tensors.
"""
from __future__ import annotations

import inspect

from ember.capture.variables.base import is_none, VariableTracker, unsupported

_GUARDED_NAMES = frozenset({"_parameters", "_buffers", "_modules", "__dict__", "state_dict", "_named_members",
                            "get_parameter", "get_buffer", "register_parameter", "register_buffer", "_apply",
                            "to", "cuda", "cpu", "float", "double", "half", "type", "load_state_dict"})


def functional_call_function():
    from torch._functorch.functional_call import functional_call
    return functional_call


def overridden(tx, module, name: str):
    """What a read of ``module.<name>`` gives while a functional_call overrides ``module``'s
    tensors: the tracker passed for it, None when ``name`` is not overridden (a plain lookup), or a
    break when the read could see the module's own tensors past the override."""
    table = tx.output.__dict__.get("module_overrides")
    if not table or id(module) not in table:
        return None
    mine = table[id(module)][1]
    if name in mine:
        return mine[name]
    from ember.capture.variables.module_listings import _LISTINGS
    if name in _GUARDED_NAMES or name in _LISTINGS:
        raise unsupported("EB0032", f"reading {type(module).__name__}.{name} inside torch.func.functional_call "
                          "(it would see the module's own tensors)")
    return None


class FunctionalCallVariable(VariableTracker):
    """``torch.func.functional_call`` itself."""

    def __init__(self, fn, source=None):
        self.fn, self.source = fn, source

    def describe(self):
        return "torch.func.functional_call"

    def python_type(self):
        return type(self.fn)

    def truth(self, tx):
        return True

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        return plan._read(self.source) if self.source is not None else bind(plan.scope, self.fn, "functional_call")

    def call(self, tx, args, kwargs):
        from ember.capture.speculation import Checkpoint
        from ember.exc import Unsupported
        with Checkpoint(tx) as cp:
            try:
                return _trace(tx, self.fn, args, kwargs)
            except Unsupported:
                cp.restore()
                raise


def _trace(tx, fn, args, kwargs):
    from ember.capture.variables.base import ConstantVariable
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    from ember.capture.variables.objects import NNModuleVariable
    from ember.capture.variables.tensor import TensorVariable
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise unsupported("EB0032", f"functional_call called as eager would refuse: {e}") from None
    bound.apply_defaults()
    a = bound.arguments
    module_vt = a["module"]
    if not isinstance(module_vt, NNModuleVariable):
        raise unsupported("EB0032", "functional_call of something other than a module from outside the frame")
    module = module_vt.module
    options = {}
    for name in ("tie_weights", "strict"):
        v = a[name]
        if isinstance(v, VariableTracker):
            if not v.is_constant():
                raise unsupported("EB0032", f"functional_call with a non-constant {name}")
            v = v.as_constant()
        options[name] = v
    dicts = a["parameter_and_buffer_dicts"]
    dicts = list(dicts.items) if isinstance(dicts, (TupleVariable, ListVariable)) else [dicts]
    given: dict[str, VariableTracker] = {}
    for d in dicts:
        if not isinstance(d, DictVariable) or d.dict_cls is not dict:
            raise unsupported("EB0032", "functional_call with parameters that are not a dict")
        for key_vt, value in zip(d.keys.values(), d.items.values()):
            if not key_vt.is_constant() or type(key_vt.as_constant()) is not str:
                raise unsupported("EB0032", "functional_call with a key that is not a string")
            key = key_vt.as_constant()
            if key in given:
                raise unsupported("EB0032", "functional_call with a key in two dicts (eager raises)")
            if not isinstance(value, TensorVariable):
                raise unsupported("EB0032", f"functional_call with {value.describe()} for {key}")
            given[key] = value
    members = dict(module.named_parameters(remove_duplicate=False))
    members.update(module.named_buffers(remove_duplicate=False))
    if len({id(t) for t in members.values()}) != len(members):
        raise unsupported("EB0032", "functional_call on a module with tied or shared weights")
    if any(k not in members for k in given):
        raise unsupported("EB0032", "functional_call with a key that is not a parameter or buffer of the module")
    if options["strict"] and len(given) != len(members):
        raise unsupported("EB0032", "functional_call(strict=True) with missing keys (eager raises)")
    table = tx.output.__dict__.setdefault("module_overrides", {})
    if any(id(m) in table for m in module.modules()):
        raise unsupported("EB0032", "functional_call nested on the same module")
    mine = {id(m): (m, {}) for m in module.modules()}
    for key, value in given.items():
        path, _, leaf = key.rpartition(".")
        owner = module.get_submodule(path) if path else module
        mine[id(owner)][1][leaf] = value
    call_args = a["args"]
    if call_args is None or is_none(call_args):
        call_args = []
    elif isinstance(call_args, TupleVariable) and call_args.tuple_type is None:
        call_args = list(call_args.items)
    elif call_args.is_constant() and type(call_args.as_constant()) is tuple:
        call_args = [ConstantVariable(v) for v in call_args.as_constant()]
    else:
        call_args = [call_args]
    call_kwargs = a["kwargs"]
    if call_kwargs is None or isinstance(call_kwargs, ConstantVariable) and call_kwargs.as_constant() is None:
        call_kwargs = {}
    elif isinstance(call_kwargs, DictVariable) and all(k.is_constant() and type(k.as_constant()) is str
                                                       for k in call_kwargs.keys.values()):
        call_kwargs = {k.as_constant(): v for k, v in zip(call_kwargs.keys.values(), call_kwargs.items.values())}
    else:
        raise unsupported("EB0032", "functional_call with kwargs that are not a dict of string keys")
    table.update(mine)
    before = set(tx.side_effects._attrs)
    try:
        result = module_vt.call(tx, call_args, call_kwargs)
    finally:
        for k in mine:
            table.pop(k, None)
    if any(key[0] in mine for key in set(tx.side_effects._attrs) - before):
        # (eager puts the module's own tensors back after the call, over what forward assigned)
        raise unsupported("EB0032", "an attribute assigned on the module inside torch.func.functional_call")
    return result
