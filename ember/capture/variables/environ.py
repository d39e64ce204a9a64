"""``os.environ`` in a traced frame: each read is answered now and guarded by re-reading it."""
from __future__ import annotations

import os

from ember.capture.sources import CallSource
from ember.capture.variables.base import VariableTracker, unsupported


def _environ_get(key, default=None):
    return os.environ.get(key, default)


def _environ_contains(key):
    return key in os.environ


class EnvironVariable(VariableTracker):
    """``os.environ``: reads are answered now and guarded (the variable re-read on every call)."""

    def __init__(self, source=None):
        self.source = source

    def describe(self):
        return "os.environ"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if name in ("get", "__getitem__", "__contains__"):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if kwargs or not all(a.is_constant() for a in args):
            raise unsupported("EB0036", "os.environ with non-constant arguments")
        cargs = tuple(a.as_constant() for a in args)
        if name == "__contains__":
            value = _environ_contains(*cargs)
            src = CallSource(_environ_contains, _NoBase(), cargs)
        elif name in ("get", "__getitem__"):
            if name == "__getitem__" and cargs[0] not in os.environ:
                from ember.exc import PythonException
                raise PythonException(KeyError(cargs[0]))
            value = _environ_get(*cargs)
            src = CallSource(_environ_get, _NoBase(), cargs)
        else:
            return super().call_method(tx, name, args, kwargs)
        from ember.capture.builder import wrap
        return wrap(tx, value, src)


class _NoBase:
    """A CallSource with no object argument (module-level function)."""

    def name(self):
        return "os.environ"

    def expr(self, scope):
        return None
