"""An optimizer's ``_init_group`` runs for real while tracing its ``step``, as torch.compile does.

``Adam._init_group(group, params, grads, exp_avgs, ...)`` fills the lists it is given and creates
the optimizer's state lazily on the first step (``if len(state) == 0: state["step"] = ...``). Traced,
the first step's graph creates the state and the second call recompiles (the state exists now);
run for real at trace time, the state exists before the graph, the graph takes it as inputs, and
the first graph serves every step (torch.compile 2.13: 1 graph, no recompile).

What the real call read is guarded: every parameter's ``.grad`` (a tensor, or None: which ones
the lists hold), the group's hyperparameters, and the state (its keys in order, each entry's keys,
each tensor). The lists' trackers are then filled with the trackers of those very tensors, read
through their sources. Anything unexpected (an argument that is not the group, a fresh empty
list or a constant, a value it put in a list that the trace cannot name, a state the trace read
before) leaves the call to be traced as before.
"""
from __future__ import annotations

import torch

from ember.capture.sources import AttrSource, ItemSource, Source
from ember.capture.variables.base import ConstantVariable


class _NotMapped(Exception):
    pass


def is_init_group(fn) -> bool:
    """``fn`` is a torch optimizer's ``_init_group`` (or torch.compile's ``disable`` wrapper of one,
    which its TorchPatcher installs once torch.compile has run in the process)."""
    from ember.capture.skipfiles import optimizer_file
    fn = getattr(fn, "_torchdynamo_orig_callable", fn)
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_name == "_init_group" and optimizer_file(code.co_filename)


def call_init_group(tx, opt_vt, fn, args, kwargs):
    """The result of ``opt._init_group(*args, **kwargs)`` run for real, or None (trace it)."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    opt, src = getattr(opt_vt, "obj", None), opt_vt.source
    if src is None or not isinstance(opt, torch.optim.Optimizer) or getattr(type(opt), "_init_group", None) is not fn:
        return None
    if tx.side_effects.has_attrs(opt) or tx.side_effects.has_attrs(opt.state):
        return None
    groups_src, state_src = AttrSource(src, "param_groups"), AttrSource(src, "state")
    prefix = state_src.name()
    if any(isinstance(s, Source) and s.name().startswith(prefix) for s in tx.output.source_memo):
        return None  # (the trace holds the state as it was: it would not see the new entries)
    lists, group_vts = [], []

    def real_of(vt):
        if isinstance(vt, ListVariable) and vt.source is None and not vt.items and vt.list_cls is list:
            real = []
            lists.append((vt, real))
            return real
        if isinstance(vt, DictVariable) and isinstance(vt.source, ItemSource) and vt.source.base == groups_src \
                and isinstance(vt.source.index, int) and 0 <= vt.source.index < len(opt.param_groups) \
                and not tx.side_effects.is_mutated(vt):
            group_vts.append(vt)
            return opt.param_groups[vt.source.index]
        if vt.is_constant():
            return vt.as_constant()
        raise _NotMapped

    try:
        py_args = [real_of(a) for a in args]
        py_kwargs = {k: real_of(v) for k, v in kwargs.items()}
    except _NotMapped:
        return None
    if len(group_vts) != 1:
        return None
    group_vt = group_vts[0]
    group = opt.param_groups[group_vt.source.index]
    params_vt = group_vt.items.get("params")
    if not isinstance(params_vt, (ListVariable, TupleVariable)) or len(params_vt.items) != len(group["params"]):
        return None
    if any(tx.side_effects.has_attrs(p) for p in group["params"]):
        return None  # (a .grad the frame assigned: the real call would not see it)
    ret = fn(opt, *py_args, **py_kwargs)
    if ret is not None and type(ret) not in (bool, int):
        return None
    # what the call read, guarded, and the trackers of what it put in the lists
    known: dict[int, object] = {}
    for p, p_vt in zip(group["params"], params_vt.items):
        known[id(p)] = p_vt
        grad_vt = p_vt.getattr(tx, "grad")  # (a tensor, or None: guarded either way)
        if p.grad is not None:
            known[id(p.grad)] = grad_vt
    for key, value in group.items():
        if key != "params":
            _use(group_vt.items.get(key))
    state_vt = opt_vt.getattr(tx, "state")
    if not isinstance(state_vt, DictVariable) or len(state_vt.items) != len(opt.state):
        return None
    for (p, entry), entry_vt in zip(opt.state.items(), state_vt.items.values()):
        if not isinstance(entry, dict) or not isinstance(entry_vt, DictVariable):
            continue
        for k, v in entry.items():
            if isinstance(v, torch.Tensor) and k in entry_vt.items:
                known[id(v)] = entry_vt.items[k]
    filled = []
    for vt, real in lists:
        items = []
        for item in real:
            if item is None:
                items.append(ConstantVariable(None))
            elif id(item) in known:
                items.append(known[id(item)])
            else:
                return None  # (the trace runs it again: the state now exists, the lists fill alike)
        filled.append((vt, items))
    for vt, items in filled:
        for item in items:
            vt.call_method(tx, "append", [item], {})
    return ConstantVariable(ret)


def _use(vt) -> None:
    """Read a hyperparameter's value (installs its guard).

    A number that automatic dynamic made symbolic (the lr an lr scheduler changes every step) is
    guarded by its sign only: torch's ``_init_group``s ask of a hyperparameter its type (Adam:
    ``torch.is_tensor(group["lr"])``) or compare it with 0 (SGD, RMSprop: ``momentum != 0``, ``> 0``);
    the value is read only where the call creates a state (Rprop's, ASGD's first step), which
    happens for real here, once. Guarding the value made every new lr a recompile."""
    from ember.capture.variables.containers import ListVariable, TupleVariable
    from ember.capture.variables.symbolic import SymNodeVariable
    if isinstance(vt, SymNodeVariable) and not isinstance(vt.sym, torch.SymBool):
        bool(vt.sym > 0), bool(vt.sym < 0)  # (each a guard on the ShapeEnv's symbol)
    elif isinstance(vt, ConstantVariable):
        vt.value  # noqa: B018 — reading it guards it
    elif isinstance(vt, (TupleVariable, ListVariable)):
        for item in vt.items:
            _use(item)
