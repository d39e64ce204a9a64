"""Module hooks while tracing a module call: which hooks ember inlines (forward pre-hooks and
forward hooks, the module's own and the global ones, with or without keyword arguments) and which
make the call a graph break (backward hooks, always-called hooks), and the call itself in
``Module._call_impl``'s order."""
from __future__ import annotations

import torch

from ember.capture.sources import AttrSource, CallSource, ConstSource
from ember.capture.variables.base import is_none, ConstantVariable, unsupported
from ember.capture.variables.module_state import HOOK_DICTS, check_dicts, check_global_hooks


def untraced_hooks(m: torch.nn.Module) -> bool:
    """Hooks that ember does not inline: backward (the module's or global), always-called."""
    mm = torch.nn.modules.module
    return bool(m._backward_hooks or m._backward_pre_hooks or mm._global_backward_hooks
                or getattr(mm, "_global_backward_pre_hooks", None)
                or getattr(m, "_forward_hooks_always_called", None)
                or getattr(mm, "_global_forward_hooks_always_called", None))


def _hooks_in_call_order(m: torch.nn.Module, src) -> tuple[list, list]:
    """``(key, hook, source)`` of the forward pre-hooks and of the forward hooks a call of ``m``
    runs, in ``Module._call_impl``'s order: the global ones first, then the module's own."""
    mm = torch.nn.modules.module
    out = []
    for global_name, own_name in (("_global_forward_pre_hooks", "_forward_pre_hooks"),
                                  ("_global_forward_hooks", "_forward_hooks")):
        hooks = getattr(mm, global_name)
        where = ConstSource(hooks, f"torch.nn.modules.module.{global_name}")
        # (by position, not by handle id: a hook registered anew each call has a new id)
        found = [(key, hook, CallSource(nth_value, where, (i,))) for i, (key, hook) in enumerate(hooks.items())]
        found += [(key, hook, CallSource(nth_value, AttrSource(src, own_name), (i,)) if src is not None else None)
                  for i, (key, hook) in enumerate(getattr(m, own_name).items())]
        out.append(found)
    return out[0], out[1]


def nth_value(d: dict, i: int):
    """The ``i``-th value of ``d`` (a hook dict), read by a guard or by the code after a break."""
    return list(d.values())[i]


def global_forward_hooks() -> bool:
    """Global forward (pre-)hooks (``register_module_forward_hook``): they run at every module call."""
    mm = torch.nn.modules.module
    return bool(mm._global_forward_hooks or mm._global_forward_pre_hooks)


def _hook_flags(tx, module_vt, name) -> set:
    """The hook ids in ``module.<name>`` (hook id -> True). No guard of its own: a hook's flag is
    fixed when it is registered, and the flags of the hooks are guarded by position (``hook_layout``)."""
    return set(getattr(module_vt.module, name, None) or ())


def has_hooks(m: torch.nn.Module) -> bool:
    """Any hook ``Module.__call__`` would run: calling ``forward`` directly would skip it."""
    return bool(m._forward_hooks or m._forward_pre_hooks) or global_forward_hooks() or untraced_hooks(m)


def call_with_hooks(tx, module_vt, args, kwargs):
    """``Module.__call__(module, *args)``: inline what ``Module._call_impl`` does — forward
    pre-hooks (global, then the module's), ``forward``, forward hooks (likewise) — for plain and
    keyword-argument hooks; backward and always-called hooks are refused."""
    from ember.capture.builder import wrap
    from ember.capture.variables.containers import TupleVariable
    m = module_vt.module
    if untraced_hooks(m):
        raise unsupported("EB0043", f"backward or always-called module hooks on {type(m).__name__}")
    src = module_vt.source
    check_dicts(tx, m, HOOK_DICTS)  # (a hook the frame removed or added is not in them yet)
    check_global_hooks(tx)
    tx.guards.global_module_hooks()
    if src is not None:
        tx.guards.hook_keys(src, list(m._forward_pre_hooks), list(m._forward_hooks), m)
    elif m._forward_hooks or m._forward_pre_hooks:
        raise unsupported("EB0043", f"module hooks on a module ember cannot name ({type(m).__name__})")
    # Which hooks take keyword arguments (register_forward_(pre_)hook(..., with_kwargs=True)).
    pre_kw = _hook_flags(tx, module_vt, "_forward_pre_hooks_with_kwargs")
    post_kw = _hook_flags(tx, module_vt, "_forward_hooks_with_kwargs") | \
        set(torch.nn.modules.module._global_forward_hooks_with_kwargs)
    # As Module._call_impl runs them: the global hooks first, then the module's own.
    pre_hooks, post_hooks = _hooks_in_call_order(m, src)
    for key, hook, hook_src in pre_hooks:
        hook_vt = wrap(tx, hook, hook_src)
        if key in pre_kw:
            result = hook_vt.call(tx, [module_vt, TupleVariable(list(args)), _kwargs_dict(kwargs)], {})
            if not is_none(result):
                from ember.capture.variables.containers import DictVariable
                if not (isinstance(result, TupleVariable) and len(result.items) == 2
                        and isinstance(result.items[1], DictVariable)):
                    raise unsupported("EB0043", "forward pre-hook with kwargs must return None or (args, kwargs)")
                new_args, new_kwargs = result.items
                args = list(new_args.unpack(tx))
                kwargs = {k: v for k, v in new_kwargs.items.items()}
            continue
        result = hook_vt.call(tx, [module_vt, TupleVariable(list(args))], {})
        if not is_none(result):
            args = list(result.items) if isinstance(result, TupleVariable) else [result]
    forward = module_vt.getattr(tx, "forward")
    out = forward.call(tx, list(args), kwargs)
    for key, hook, hook_src in post_hooks:
        hook_vt = wrap(tx, hook, hook_src)
        if key in post_kw:
            result = hook_vt.call(tx, [module_vt, TupleVariable(list(args)), _kwargs_dict(kwargs), out], {})
        else:
            result = hook_vt.call(tx, [module_vt, TupleVariable(list(args)), out], {})
        if not is_none(result):
            out = result
    return out


def _kwargs_dict(kwargs: dict):
    """The ``kwargs`` dict a ``with_kwargs=True`` hook receives, as a traced dict."""
    from ember.capture.variables.containers import DictVariable
    kw_vt = DictVariable({})
    for k, v in kwargs.items():
        kw_vt.set_item(ConstantVariable(k), v)
    return kw_vt
