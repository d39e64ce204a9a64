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
