"""A lazy module's first call (``nn.LazyLinear``) at trace time: its parameters are built from the
fake arguments, as eager's first call builds them (see ``NNModuleVariable.call``)."""
from __future__ import annotations

from ember.capture.variables.base import ConstantVariable, unsupported


def initialize_lazy(tx, vt, args, kwargs) -> None:
    """Build a lazy module's parameters at trace time from the fake arguments (the real module
    gets real parameters, drawn from the RNG as eager's first call draws them). Only while the
    graph so far draws no random numbers: eager draws those before the initialisation, the graph
    would draw them after. Otherwise (or for arguments it cannot show) the call breaks the graph."""
    from ember.capture.rerun import draws_random_numbers
    m = vt.module
    why = f"calling {type(m).__name__} before its parameters exist (lazy module)"
    if vt.source is None or draws_random_numbers(tx.output.graph):
        raise unsupported("EB0044", why)
    try:
        fake_args = [_as_fake(a) for a in args]
        fake_kwargs = {k: _as_fake(v) for k, v in kwargs.items()}
    except _NoFake:
        raise unsupported("EB0044", why) from None
    try:
        m._infer_parameters(m, tuple(fake_args), fake_kwargs)
    except Exception as e:  # noqa: BLE001 - eager raises it at the call, which then runs eagerly
        raise unsupported("EB0044", f"{why}: its initialisation raised {type(e).__name__}") from None
    tx.guards.retype(vt.source, m)  # its class may have changed (``cls_to_become``)


class _NoFake(Exception):
    pass


def _as_fake(vt):
    """The value a lazy module's initialisation sees: fake tensors in their containers."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(vt, TensorVariable):
        return vt.fake
    if isinstance(vt, ConstantVariable):
        return vt.as_constant()
    if isinstance(vt, ListVariable) and vt.list_cls is list:
        return [_as_fake(i) for i in vt.items]
    if isinstance(vt, TupleVariable):
        items = [_as_fake(i) for i in vt.items]
        t = vt.tuple_type
        return tuple(items) if t is None or t is tuple else t(*items)
    if isinstance(vt, DictVariable) and vt.dict_cls is dict and all(isinstance(k, str) for k in vt.items):
        return {k: _as_fake(v) for k, v in vt.items.items()}
    raise _NoFake()
