"""Small helpers the generated entry code calls to rebuild values made in the frame (bound into
its scope by convert_frame._ReturnPlan)."""
from __future__ import annotations


def _with_attrs(obj, attrs: dict):
    """``obj`` with the instance attributes ``attrs`` set (a dict made in the frame that escapes)."""
    obj.__dict__.update(attrs)
    return obj


def _with_kwdefaults(fn, kwdefaults):
    fn.__kwdefaults__ = kwdefaults
    return fn


def _with_attributes(fn, attrs: dict):
    for k, v in attrs.items():
        setattr(fn, k, v)
    return fn


def _with_annotations(fn, flat: tuple):
    """MAKE_FUNCTION's annotations (3.11: a flat tuple of name, value pairs)."""
    fn.__annotations__ = dict(zip(flat[::2], flat[1::2]))
    return fn
