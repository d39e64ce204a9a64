"""Module listings (``children()``, ``named_parameters(prefix=...)``, ``keys()``, ...) read in a
frame: which methods are listings, what identifies their items for a guard, and the prefix a
``named_*`` listing puts in front of each key."""
from __future__ import annotations

import inspect


_LISTINGS = ("children", "modules", "parameters", "buffers", "named_children", "named_modules",
             "named_parameters", "named_buffers", "keys", "values", "items")


def listing_keys(m, name: str, cargs: tuple, ckw: tuple) -> tuple:
    """What identifies the items of ``m.<name>(*cargs, **ckw)`` (a module listing) for a guard."""
    items = getattr(m, name)(*cargs, **dict(ckw))
    if name in ("keys",):
        return tuple(items)
    return tuple(k if not isinstance(k, tuple) else k[0] for k in
                 (item if name.startswith("named_") or name == "items" else (type(item).__name__,)
                  for item in items))


def _listing_prefix(m, name: str, cargs: list, ckw: dict) -> str:
    """The ``prefix`` a ``named_*`` listing puts in front of each key (not part of the path)."""
    if not name.startswith("named_") or name == "named_children":
        return ""
    try:
        bound = inspect.signature(getattr(m, name)).bind(*cargs, **ckw)
    except TypeError:
        return ""
    prefix = bound.arguments.get("prefix", "")
    return prefix if isinstance(prefix, str) else ""
