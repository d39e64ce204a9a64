"""The text of CPython's AttributeError for an attribute ember finds missing while tracing.

A user who catches the error may print or compare its message, so it must be eager's, and CPython
words it differently by version: 3.13 names an unset slot's class by its fully qualified name and
adds "and no __dict__ for setting new attributes" when a slotted object refuses a new attribute.
Where the real object raised, its own message is used instead of these.
"""
from __future__ import annotations

import sys

__all__ = ["missing", "unset_slot", "cannot_set"]

_PY313 = sys.version_info >= (3, 13)


def missing(cls: type, name: str) -> str:
    """``obj.name`` found nothing (no instance attribute, nothing on the class, no __getattr__)."""
    return f"'{cls.__name__}' object has no attribute '{name}'"


def _fully_qualified(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    if module in (None, "builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def unset_slot(cls: type, name: str) -> str:
    """Reading a ``__slots__`` member that was never assigned."""
    shown = _fully_qualified(cls) if _PY313 else cls.__name__
    return f"'{shown}' object has no attribute '{name}'"


def cannot_set(cls: type, name: str) -> str:
    """Assigning an attribute that is not a slot on an object without an instance ``__dict__``."""
    text = missing(cls, name)
    return text + " and no __dict__ for setting new attributes" if _PY313 else text
