"""The pure-Python versions CPython's ``heapq`` and ``bisect`` modules carry before their C
accelerators replace them: loaded once from the modules' own source with the accelerator hidden, so
the traced algorithm is exactly the reference one (same comparisons, same resulting order)."""
from __future__ import annotations

import importlib.util
import sys
import types

_PURE: dict = {}


def _pure_module(name: str, accelerator: str) -> types.ModuleType:
    if name not in _PURE:
        spec = importlib.util.find_spec(name)
        source = spec.loader.get_source(name)
        missing = object()
        saved = sys.modules.get(accelerator, missing)
        sys.modules[accelerator] = None  # `from _heapq import *` fails: the Python versions stay
        try:
            mod = types.ModuleType(f"{name}")
            mod.__file__ = spec.origin
            exec(compile(source, spec.origin, "exec"), mod.__dict__)
        finally:
            if saved is missing:
                del sys.modules[accelerator]
            else:
                sys.modules[accelerator] = saved
        _PURE[name] = mod
    return _PURE[name]


def call_until(fn, sentinel):
    """``iter(fn, sentinel)``: checks ``fn`` is callable now, then calls it lazily until it returns a
    value equal to ``sentinel``."""
    if not callable(fn):
        raise TypeError(_ITER_NOT_CALLABLE)
    return _call_until(fn, sentinel)


def _iter_not_callable_message() -> str:
    try:
        iter(None, None)
    except TypeError as e:  # (the wording changed in 3.12)
        return str(e)
    return "iter(v, w): v must be callable"  # pragma: no cover


_ITER_NOT_CALLABLE = _iter_not_callable_message()


def _call_until(fn, sentinel):
    while True:
        value = fn()
        if value == sentinel:
            return
        yield value


def sequence_iter(obj):
    """``iter(obj)`` for a class with ``__getitem__`` but no ``__iter__``: obj[0], obj[1], ... until
    IndexError (or StopIteration)."""
    i = 0
    while True:
        try:
            value = obj[i]
        except (IndexError, StopIteration):
            return
        yield value
        i += 1


def contains_by_iteration(obj, item):
    """``item in obj`` for a class without ``__contains__``: its iteration, identity first."""
    for value in obj:
        if value is item or value == item:
            return True
    return False


def count_elements(mapping, iterable):
    """``collections._count_elements`` (Counter's tally loop), as CPython's Python fallback does it."""
    mapping_get = mapping.get
    for elem in iterable:
        mapping[elem] = mapping_get(elem, 0) + 1


def pure_version(fn):
    """The Python function standing for the C function ``fn`` of heapq/bisect, or None."""
    if getattr(fn, "__module__", None) == "_collections" and getattr(fn, "__name__", None) == "_count_elements":
        return count_elements
    owner = {"_heapq": ("heapq", "_heapq"), "_bisect": ("bisect", "_bisect")}.get(getattr(fn, "__module__", None))
    if owner is None:
        return None
    try:
        pure = getattr(_pure_module(*owner), fn.__name__, None)
    except Exception:  # noqa: BLE001 - no source available: the C function stays opaque
        return None
    return pure if isinstance(pure, types.FunctionType) else None
