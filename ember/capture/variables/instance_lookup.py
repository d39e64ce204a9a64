"""Where an attribute of an object from outside the frame is found: ``type_attribute`` for the
implicit lookups Python does on the type (``obj[k]``, ``len(obj)``, ``with obj``), and
``tracked_instance_dict`` for reads after the trace took ``obj.__dict__`` as a dict tracker."""
from __future__ import annotations

from ember.capture.sources import AttrSource


def type_attribute(tx, obj_vt, obj, name):
    """``type(obj).name`` bound to ``obj``, as an implicit call finds it (``obj[k]``, ``with obj``):
    on the class only, whatever the instance dict holds."""
    from ember.capture.variables.objects import _class_attribute, _static_lookup, class_member, class_source
    attr = _static_lookup(obj, name)
    member = class_member(tx, attr, AttrSource(class_source(type(obj)), name), obj_vt, type(obj))
    return member if member is not None else _class_attribute(tx, obj_vt, obj, name)


def tracked_instance_dict(tx, source, obj):
    """The dict tracker of ``obj.__dict__`` if the trace read it (None otherwise)."""
    if source is None or not tx.side_effects.instance_dict_read(obj):
        return None
    from ember.capture.variables.containers import DictVariable
    hit = tx.output.source_memo.get(AttrSource(source, "__dict__"))
    if hit is not None and isinstance(hit[1], DictVariable):
        return hit[1]
    return None


def written_instance_dict(tx, obj_vt, d: dict, obj=None):
    """``obj.__dict__`` after the frame assigned (or deleted) attributes of ``obj`` (default:
    ``obj_vt.obj``): its keys and values as they are now, with the writes (existing keys keep their
    place, new ones follow in write order, deleted ones are gone). Read-only: writing through it,
    or another attribute write, is a break."""
    from ember.capture.builder import wrap
    from ember.capture.side_effects import DELETED
    from ember.capture.variables.base import ConstantVariable, unsupported
    from ember.capture.variables.containers import DictVariable
    obj = obj_vt.obj if obj is None else obj
    base = wrap(tx, d, AttrSource(obj_vt.source, "__dict__"))
    if not isinstance(base, DictVariable):
        raise unsupported("EB0032", f"reading the __dict__ of a {type(obj).__name__} object the frame "
                          "assigned attributes of")
    base._observe_order(tx)
    view = DictVariable(base.items, base.keys)
    for name, value in tx.side_effects.pending_attrs(obj):
        if value is DELETED or tx.side_effects.readded(obj, name):
            # (`del obj.name`: it was present, checked at the delete; set again after it: at the end)
            view.items.pop(name, None)
            view.keys.pop(name, None)
        if value is not DELETED:
            view.set_item(ConstantVariable(name), value)
    view.read_only = "writing into an object's __dict__ after assigning its attributes"
    # live across a graph break it is the real __dict__ (the writes are replayed before the
    # code after the break runs); its order is already guarded through `base`
    view.source, view.order_source = base.source, None
    tx.side_effects.read_instance_dict(obj, written_ok=True, view=view)
    return view


def write_through_read_dict(tx, obj_vt, name: str, value) -> bool:
    """``obj.name = value`` after the trace took ``obj.__dict__`` as a dict tracker (``if "c" in
    self.__dict__`` earlier): the write goes into that tracker, which reads of ``obj.name`` and of
    the dict consult and which is replayed onto the real ``__dict__``. False when there is no such
    tracker, or the frame also wrote attributes the other way (their replay would interleave)."""
    obj = obj_vt.obj
    tracked = tracked_instance_dict(tx, obj_vt.source, obj)
    if tracked is None or type(obj.__dict__) is not dict or tx.side_effects.has_attrs(obj) or \
            getattr(tracked, "read_only", None):
        return False
    from ember.capture.variables.base import ConstantVariable
    tracked.call_method(tx, "__setitem__", [ConstantVariable(name), value], {})
    return True


def module_written_dict(tx, vt, d: dict):
    """``module.__dict__`` after the frame assigned attributes of the module (``self.n = n`` and
    then ``self.register_buffer(...)``, which checks ``"_buffers" in self.__dict__``): the
    `written_instance_dict` view when every write lands in the instance dict; None (the read is
    refused) when one lands in ``_parameters``, ``_buffers`` or ``_modules`` instead."""
    import torch
    from ember.capture.side_effects import DELETED
    m = vt.module
    if vt.source is None or type(d) is not dict:
        return None
    members = [d.get(kind) or {} for kind in ("_parameters", "_buffers", "_modules")]
    for name, value in tx.side_effects.pending_attrs(m):
        if any(name in ms for ms in members):
            return None
        if value is not DELETED and issubclass(value.python_type(), (torch.nn.Module, torch.nn.Parameter)):
            return None
    return written_instance_dict(tx, vt, d, m)
