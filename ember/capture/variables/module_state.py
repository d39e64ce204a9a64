"""A module's internal dicts (``_parameters``, ``_buffers``, ``_modules``, its hook dicts) read by the
tracer straight from the module, after the frame changed them.

The frame's writes to outside objects only happen after the graph (see side_effects): a write
through a tracker of one of those dicts (``self._buffers["b"] = t``, ``handle.remove()`` deleting
from ``_forward_hooks``, ``ModuleList.append`` filling ``_modules``) or an attribute write that lands
in one of them (``self.b = t`` for a buffer ``b``) is not in the real dict yet. Where the tracer
reads those dicts directly (a member's value, the hooks a call runs, a listing, a container's
length), such a read is refused instead: the graph breaks there and the rest runs after the
writes.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import unsupported

MEMBER_DICTS = ("_parameters", "_buffers", "_modules")
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
              "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called", "_backward_hooks",
              "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks", "_global_forward_hooks_with_kwargs",
                     "_global_forward_hooks_always_called")


def _changed(tx, real) -> bool:
    from ember.capture.builder import tracker_of
    if real is None:
        return False
    vt = tracker_of(tx, real)
    return vt is not None and tx.side_effects.is_mutated(vt)


def check_dicts(tx, m: torch.nn.Module, kinds=MEMBER_DICTS) -> None:
    """Refuse a direct read of ``m``'s dicts ``kinds`` once the frame changed one of them."""
    d = m.__dict__
    for kind in kinds:
        if _changed(tx, d.get(kind)):
            raise unsupported("EB0032", f"reading {type(m).__name__}.{kind} after the frame changed it "
                              "(the change happens after the graph)")


def changed_member_dict(tx, m: torch.nn.Module, kind: str):
    """The tracker of ``m``'s member dict ``kind`` once the frame changed it (a dict tracker whose
    items are what the real dict holds after the graph), None if unchanged; a change the tracker
    cannot answer for is refused as `check_dicts` refuses it."""
    from ember.capture.builder import tracker_of
    from ember.capture.variables.containers import DictVariable
    real = m.__dict__.get(kind)
    vt = tracker_of(tx, real) if real is not None else None
    if vt is None or not tx.side_effects.is_mutated(vt):
        return None
    if not isinstance(vt, DictVariable) or not all(isinstance(k, str) for k in vt.items):  # (a lazy one: completed)
        check_dicts(tx, m, (kind,))
    return vt


def check_instance_dict(tx, m: torch.nn.Module) -> None:
    """Refuse an attribute read of ``m`` once the frame wrote into ``m.__dict__`` through a tracker
    (``self.__dict__["k"] = v``): the instance dict the read consults does not have it yet."""
    if _changed(tx, m.__dict__):
        raise unsupported("EB0032", f"reading an attribute of {type(m).__name__} after the frame changed its "
                          "__dict__ (the change happens after the graph)")


def check_global_hooks(tx) -> None:
    mm = torch.nn.modules.module
    for name in GLOBAL_HOOK_DICTS:
        if _changed(tx, getattr(mm, name, None)):
            raise unsupported("EB0032", f"calling a module after the frame changed torch.nn.modules.module.{name}")


def check_members_written(tx, m: torch.nn.Module) -> None:
    """Refuse reading ``m``'s member dicts (or a listing of them) once the frame assigned one of its
    parameters, buffers or submodules by attribute (``self.b = t``): the dicts do not have it yet."""
    d = m.__dict__
    members = [d.get(kind) or {} for kind in MEMBER_DICTS]
    for name in tx.side_effects.written_names(m):
        if any(name in ms for ms in members):
            raise unsupported("EB0032", f"reading the members of {type(m).__name__} after assigning "
                              f"{type(m).__name__}.{name} in the frame")


def check_tree(tx, m: torch.nn.Module) -> None:
    """Both checks, for ``m`` and every module under it (a listing such as ``parameters()``)."""
    for sub in m.modules():
        check_dicts(tx, sub)
        check_members_written(tx, sub)


def module_member_of(tx, vt, name: str):
    """``name`` in the module's (tracker ``vt``'s) ``_parameters``, ``_buffers`` or ``_modules`` (in
    that order), or None. A dict the frame changed (``register_buffer`` in forward) answers from
    its tracker, which holds what the real one will hold after the graph."""
    from ember.capture.builder import wrap
    from ember.capture.sources import ModuleMemberSource
    d = vt.module.__dict__
    for kind in MEMBER_DICTS:
        members = d.get(kind)
        if members is None:
            continue
        changed = changed_member_dict(tx, vt.module, kind)
        if changed is not None:
            if name in changed.items:
                return changed.items[name]
            if name in members:  # deleted by the frame: no guard can say what entry found
                check_dicts(tx, vt.module, (kind,))
            continue
        if name in members:
            builtin = type(vt.module).__module__.startswith("torch.nn.")
            return wrap(tx, members[name], ModuleMemberSource(vt.source, kind, name, builtin) if vt.source else None)
    return None
