"""Shared helpers for the AOT tests.

``ember/__init__.py`` imports ``ember.api``, which another package provides;
until it exists, install a placeholder so that the AOT layer (which does not
need it) can be tested on its own.
"""
import importlib
import sys
import types


def _ensure_ember_importable():
    try:
        importlib.import_module("ember")
    except ModuleNotFoundError as e:
        if e.name != "ember.api":
            raise
        for name in [m for m in sys.modules if m == "ember" or m.startswith("ember.")]:
            del sys.modules[name]
        stub = types.ModuleType("ember.api")

        def _missing(*a, **k):
            raise NotImplementedError("ember.api is not available in this checkout")
        stub.compile = stub.reset = stub.explain = _missing
        sys.modules["ember.api"] = stub
        importlib.import_module("ember")


_ensure_ember_importable()
